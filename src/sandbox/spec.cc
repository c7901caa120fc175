#include "sandbox/spec.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <set>

#include "core/json_input.h"
#include "core/units.h"
#include "net/edge_credential.h"
#include "net/egress_policy.h"
#include "proto/messages.h"

namespace rf {

namespace {

bool valid_id(const std::string& id) {
  if (id.empty() || id.size() > 63) return false;
  for (char c : id) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return id.front() != '-' && id.back() != '-';
}

constexpr std::array<std::pair<BackendKind, std::string_view>, 4> kBackends = {{
    {BackendKind::kNative, "native"},
    {BackendKind::kDocker, "docker"},
    {BackendKind::kRemoteDocker, "remotedocker"},
    {BackendKind::kLocal, "local"},
}};
constexpr std::array<BackendKind, 4> kBackendKinds = {
    BackendKind::kNative, BackendKind::kDocker, BackendKind::kRemoteDocker, BackendKind::kLocal};
constexpr std::array<std::pair<NetworkPolicy, std::string_view>, 3> kNetworks = {{
    {NetworkPolicy::kNone, "none"},
    {NetworkPolicy::kProxy, "proxy"},
    {NetworkPolicy::kHost, "host"},
}};

template <class Table>
std::string names_of(const Table& table) {
  std::string out;
  for (const auto& [_, name] : table) out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

}  // namespace

std::string_view to_string(BackendKind kind) {
  for (const auto& [k, name] : kBackends) {
    if (k == kind) return name;
  }
  return "?";
}

Result<BackendKind> parse_backend_kind(std::string_view text) {
  for (const auto& [k, name] : kBackends) {
    if (text == name) return k;
  }
  return make_error(
      "", "unknown backend \"" + std::string(text) + "\" (allowed: " + names_of(kBackends) + ")");
}

std::span<const BackendKind> all_backend_kinds() { return kBackendKinds; }

std::string_view to_string(NetworkPolicy policy) {
  for (const auto& [p, name] : kNetworks) {
    if (p == policy) return name;
  }
  return "?";
}

Result<NetworkPolicy> parse_network_policy(std::string_view text) {
  for (const auto& [p, name] : kNetworks) {
    if (text == name) return p;
  }
  return make_error("", "unknown network policy \"" + std::string(text) +
                            "\" (allowed: " + names_of(kNetworks) + ")");
}

Status check_volume_path(const std::string& path, const std::string& field) {
  if (path.empty() || path[0] != '/' || path == "/")
    return make_error(field, "expected an absolute path below /, such as /var/agent/state");
  if (path.size() > 4096 || path.find('\0') != std::string::npos)
    return make_error(field, "too long, or holds a NUL byte");
  size_t start = 1;
  std::string first;
  while (start <= path.size()) {
    const size_t end = std::min(path.find('/', start), path.size());
    const std::string part = path.substr(start, end - start);
    if (part.empty() || part == "." || part == "..")
      return make_error(field, "\"" + path + "\" is not normalized (no empty, . or .. parts)");
    if (first.empty()) first = part;
    start = end + 1;
  }
  for (const char* system : {"usr", "etc", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "proc",
                             "sys", "dev", ".ringfence", ".oldroot"}) {
    if (first == system) {
      return make_error(field, "/" + first +
                                   " is the sandbox's own (its image, or the kernel's): "
                                   "mount a volume elsewhere, such as /var/agent/state");
    }
  }
  return ok_status();
}

Status validate_spec(const SandboxSpec& s) {
  if (s.volumes.size() > kMaxVolumeMounts) {
    return make_error("volumes", "at most " + std::to_string(kMaxVolumeMounts) + " per sandbox");
  }
  for (size_t i = 0; i < s.volumes.size(); ++i) {
    const std::string field = "volumes[" + std::to_string(i) + "].path";
    RF_TRY(check_volume_path(s.volumes[i].path, field));
    if (s.volumes[i].host_dir.empty())
      return make_error("volumes[" + std::to_string(i) + "]", "has no host directory");
    for (size_t j = 0; j < i; ++j) {
      if (s.volumes[j].path == s.volumes[i].path)
        return make_error(field, s.volumes[i].path + " is another volume's path already");
    }
  }
  if (!s.id.empty() && !valid_id(s.id)) {
    return make_error("id",
                      "\"" + s.id + "\" must be 1-63 of [a-z0-9-], not starting or ending with -");
  }
  const bool docker = is_docker(s.backend);
  if (!docker && s.image != "host") {
    return make_error("image", "unknown image \"" + s.image + "\" (the " +
                                   std::string(to_string(s.backend)) + " backend has only: host)");
  }
  // A docker reference: name[:tag][@digest], no spaces, no option-like start.
  const bool image_ok = !s.image.empty() && s.image.size() <= 255 && s.image[0] != '-' &&
                        s.image.find_first_not_of(
                            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                            "._-/:@") == std::string::npos;
  if (docker && !image_ok) {
    return make_error("image",
                      "\"" + s.image + "\" is not an image reference (name[:tag][@digest])");
  }
  if (!s.workspace_dir.empty()) {
    if (s.workspace_dir[0] != '/') {
      return make_error("workspace", "\"" + s.workspace_dir + "\" must be an absolute path");
    }
    struct stat st {};
    if (::stat(s.workspace_dir.c_str(), &st) != 0) return sys_error("workspace " + s.workspace_dir);
    if (!S_ISDIR(st.st_mode)) return make_error("workspace " + s.workspace_dir, "not a directory");
  }
  for (const auto& [k, v] : s.env) {
    if (!proto::valid_env_name(k)) return make_error("env", "bad variable name \"" + k + "\"");
    if (v.find('\0') != std::string::npos) return make_error("env." + k, "contains a NUL byte");
  }
  for (const LimitField& f : limit_fields()) {
    if (auto bad = f.check(s.limits); !bad) return make_error(f.spec_field(), bad.error().message);
  }
  if (!s.allow.empty() && s.network != NetworkPolicy::kProxy) {
    return make_error("allow", "rules apply only with network proxy (network is " +
                                   std::string(to_string(s.network)) + ")");
  }
  if (auto policy = net::EgressPolicy::parse(s.allow); !policy) {
    return make_error("allow", policy.error().to_string());
  }
  for (const auto& [key, value] : s.labels) {
    const bool key_ok =
        !key.empty() && key.size() <= 64 &&
        key.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789._-") == std::string::npos;
    if (!key_ok) {
      return make_error("labels",
                        "bad key \"" + key + "\" (expected [a-z0-9._-], 1 to 64 characters)");
    }
    const bool value_ok =
        value.size() <= 256 && std::all_of(value.begin(), value.end(), [](char c) {
          return static_cast<unsigned char>(c) >= 0x20 && c != 0x7f;
        });
    if (!value_ok) {
      return make_error("labels." + key, "expected at most 256 printable characters");
    }
  }
  if (s.tls_intercept && s.network != NetworkPolicy::kProxy) {
    return make_error("tls_intercept", "applies only with network proxy (network is " +
                                           std::string(to_string(s.network)) + ")");
  }
  if (s.seccomp != "default") {
    return make_error("seccomp",
                      "unknown seccomp profile \"" + s.seccomp + "\" (available: default)");
  }
  return ok_status();
}

Result<SandboxSpec> parse_spec_json(const std::string& text) {
  using nlohmann::json;
  const json j = rf::parse_json_or_discarded(text);
  if (j.is_discarded()) return make_error("spec", "not valid JSON");
  if (!j.is_object()) return make_error("spec", "expected a JSON object");
  SandboxSpec s;
  static const std::set<std::string> kKeys = {"id",      "backend", "image",        "workspace",
                                              "env",     "limits",  "network",      "allow",
                                              "seccomp", "labels",  "tls_intercept"};
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!kKeys.count(it.key())) return make_error(it.key(), "unknown field");
  }
  auto str = [&](const char* key, std::string* out) -> Status {
    if (!j.contains(key)) return ok_status();
    if (!j[key].is_string()) return make_error(key, "expected a string");
    *out = j[key].get<std::string>();
    return ok_status();
  };
  RF_TRY(str("id", &s.id));
  std::string backend(to_string(s.backend)), network(to_string(s.network));
  RF_TRY(str("backend", &backend));
  RF_TRY(str("network", &network));
  auto kind = parse_backend_kind(backend);
  if (!kind) return make_error("backend", kind.error().message);
  s.backend = *kind;
  auto policy = parse_network_policy(network);
  if (!policy) return make_error("network", policy.error().message);
  s.network = *policy;
  RF_TRY(str("image", &s.image));
  RF_TRY(str("workspace", &s.workspace_dir));
  RF_TRY(str("seccomp", &s.seccomp));
  if (j.contains("tls_intercept")) {
    if (!j["tls_intercept"].is_boolean())
      return make_error("tls_intercept", "expected true or false");
    s.tls_intercept = j["tls_intercept"].get<bool>();
  }
  if (j.contains("allow")) {
    if (!j["allow"].is_array()) return make_error("allow", "expected an array of rules");
    for (const auto& rule : j["allow"]) {
      if (!rule.is_string()) return make_error("allow", "expected an array of strings");
      s.allow.push_back(rule.get<std::string>());
    }
  }
  if (j.contains("labels")) {
    if (!j["labels"].is_object()) return make_error("labels", "expected an object of strings");
    for (auto it = j["labels"].begin(); it != j["labels"].end(); ++it) {
      if (!it.value().is_string()) return make_error("labels." + it.key(), "expected a string");
      s.labels[it.key()] = it.value().get<std::string>();
    }
  }
  if (j.contains("env")) {
    if (!j["env"].is_object()) return make_error("env", "expected an object of strings");
    for (auto it = j["env"].begin(); it != j["env"].end(); ++it) {
      if (!it.value().is_string()) return make_error("env." + it.key(), "expected a string");
      s.env[it.key()] = it.value().get<std::string>();
    }
  }
  if (j.contains("limits")) {
    const json& l = j["limits"];
    if (!l.is_object()) return make_error("limits", "expected an object");
    for (auto it = l.begin(); it != l.end(); ++it) {
      const std::string field = "limits." + it.key();
      const json& v = it.value();
      auto as_text = [&]() -> Result<std::string> {
        if (v.is_string()) return v.get<std::string>();
        if (v.is_number()) return v.dump();
        return make_error(field, "expected a string or a number");
      };
      auto t = as_text();
      if (!t) return t.take_error();
      const LimitField* f = find_limit_by_json(it.key());
      if (f == nullptr) return make_error(field, "unknown field");
      if (f->kind == LimitKind::kCount && !v.is_number_unsigned() && !v.is_string()) {
        return make_error(field, "expected a positive integer");
      }
      if (auto set = f->set(s.limits, *t); !set) return make_error(field, set.error().message);
    }
  }
  return s;
}

nlohmann::json spec_json(const SandboxSpec& s) {
  nlohmann::json limits = nlohmann::json::object();
  for (const LimitField& f : limit_fields()) {
    const std::string text = f.get(s.limits);
    // Counts and cpus as JSON numbers, sizes and durations as their text.
    if (f.kind == LimitKind::kCount) {
      limits[std::string(f.json_key)] = std::stoull(text);
    } else if (f.kind == LimitKind::kCpus) {
      limits[std::string(f.json_key)] = s.limits.cpus;
    } else {
      limits[std::string(f.json_key)] = text;
    }
  }
  nlohmann::json j = {{"id", s.id},         {"backend", to_string(s.backend)},
                      {"image", s.image},   {"workspace", s.workspace_dir},
                      {"env", s.env},       {"network", to_string(s.network)},
                      {"allow", s.allow},   {"seccomp", s.seccomp},
                      {"labels", s.labels}, {"limits", limits}};
  if (s.tls_intercept) j["tls_intercept"] = true;
  return j;
}

std::string spec_to_json(const SandboxSpec& s) { return spec_json(s).dump(); }

std::map<std::string, std::string> base_environment(bool tty) {
  std::map<std::string, std::string> env = {
      {"PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
      {"HOME", "/workspace"},
      {"LANG", "C.UTF-8"},
  };
  if (tty) env["TERM"] = "xterm-256color";
  return env;
}

static_assert(std::string_view(kEgressListen) == net::kSandboxProxyAuthority);

std::map<std::string, std::string> proxy_environment() {
  const std::string url = std::string("http://") + kEgressListen;
  const std::string no_proxy = "localhost,127.0.0.1,::1";
  std::map<std::string, std::string> env;
  for (const auto& [upper, lower] :
       {std::pair{"HTTP_PROXY", "http_proxy"}, std::pair{"HTTPS_PROXY", "https_proxy"},
        std::pair{"ALL_PROXY", "all_proxy"}}) {
    env[upper] = url;
    env[lower] = url;
  }
  env["NO_PROXY"] = no_proxy;
  env["no_proxy"] = no_proxy;
  return env;
}

std::map<std::string, std::string> trust_environment() {
  std::map<std::string, std::string> env;
  for (const char* name : {"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
                           "GIT_SSL_CAINFO", "PIP_CERT", "AWS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"}) {
    env[name] = kTrustBundleInSandbox;
  }
  return env;
}

std::string generate_sandbox_id() {
  unsigned char raw[6];
  int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? ::read(fd, raw, sizeof raw) : -1;
  if (fd >= 0) ::close(fd);
  if (n != static_cast<ssize_t>(sizeof raw)) {
    const auto t =
        static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    for (size_t i = 0; i < sizeof raw; ++i) raw[i] = static_cast<unsigned char>(t >> (8 * i));
  }
  static const char* kHex = "0123456789abcdef";
  std::string id = "rf-";
  for (unsigned char c : raw) {
    id.push_back(kHex[c >> 4]);
    id.push_back(kHex[c & 15]);
  }
  return id;
}

}  // namespace rf
