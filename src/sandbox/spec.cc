#include "sandbox/spec.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "core/units.h"
#include "net/egress_policy.h"

namespace rf {

namespace {

bool valid_env_name(const std::string& k) {
  if (k.empty() || (k[0] >= '0' && k[0] <= '9')) return false;
  for (char c : k) {
    if (!(c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) {
      return false;
    }
  }
  return true;
}

bool valid_id(const std::string& id) {
  if (id.empty() || id.size() > 63) return false;
  for (char c : id) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return id.front() != '-' && id.back() != '-';
}

}  // namespace

Status validate_spec(const SandboxSpec& s) {
  if (!s.id.empty() && !valid_id(s.id)) {
    return make_error("id",
                      "\"" + s.id + "\" must be 1-63 of [a-z0-9-], not starting or ending with -");
  }
  const bool docker = s.backend == "docker" || s.backend == "remotedocker";
  if (s.backend != "local" && s.backend != "native" && !docker) {
    return make_error("backend", "unknown backend \"" + s.backend +
                                     "\" (available: docker, local, native, remotedocker)");
  }
  if (!docker && s.image != "host") {
    return make_error("image", "unknown image \"" + s.image + "\" (the " + s.backend +
                                   " backend has only: host)");
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
    if (!valid_env_name(k)) return make_error("env", "bad variable name \"" + k + "\"");
    if (v.find('\0') != std::string::npos) return make_error("env." + k, "contains a NUL byte");
  }
  const Limits& l = s.limits;
  if (!(l.cpus >= 0.01 && l.cpus <= 1024)) {
    return make_error("limits.cpus",
                      "must be between 0.01 and 1024, got " + std::to_string(l.cpus));
  }
  if (l.memory_bytes < (8ull << 20)) {
    return make_error("limits.memory", "must be at least 8m, got " + format_size(l.memory_bytes));
  }
  if (l.pids < 8 || l.pids > 1'000'000) {
    return make_error("limits.pids",
                      "must be between 8 and 1000000, got " + std::to_string(l.pids));
  }
  if (l.disk_bytes < (1ull << 20)) {
    return make_error("limits.disk", "must be at least 1m, got " + format_size(l.disk_bytes));
  }
  if (l.timeout.count() <= 0) return make_error("limits.timeout", "must be positive");
  if (l.output_bytes < 1024 || l.output_bytes > (1ull << 32)) {
    return make_error("limits.output",
                      "must be between 1k and 4g, got " + format_size(l.output_bytes));
  }
  if (l.nofile < 16 || l.nofile > (1u << 20)) {
    return make_error("limits.nofile", "must be between 16 and 1048576");
  }
  if (l.egress_connections < 1 || l.egress_connections > 65536) {
    return make_error("limits.egress_connections", "must be between 1 and 65536");
  }
  if (s.network != "none" && s.network != "proxy" && s.network != "host") {
    return make_error(
        "network", "unknown network policy \"" + s.network + "\" (available: none, proxy, host)");
  }
  if (!s.allow.empty() && s.network != "proxy") {
    return make_error("allow",
                      "rules apply only with network proxy (network is " + s.network + ")");
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
  if (s.seccomp != "default") {
    return make_error("seccomp",
                      "unknown seccomp profile \"" + s.seccomp + "\" (available: default)");
  }
  return ok_status();
}

Result<SandboxSpec> parse_spec_json(const std::string& text) {
  using nlohmann::json;
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return make_error("spec", "not valid JSON");
  if (!j.is_object()) return make_error("spec", "expected a JSON object");
  SandboxSpec s;
  static const std::set<std::string> kKeys = {"id",     "backend", "image", "workspace", "env",
                                              "limits", "network", "allow", "seccomp",   "labels"};
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
  RF_TRY(str("backend", &s.backend));
  RF_TRY(str("image", &s.image));
  RF_TRY(str("workspace", &s.workspace_dir));
  RF_TRY(str("network", &s.network));
  RF_TRY(str("seccomp", &s.seccomp));
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
      auto wrap = [&](const Error& e) { return make_error(field, e.to_string()); };
      if (it.key() == "cpus") {
        auto d = parse_decimal(*t);
        if (!d) return wrap(d.error());
        s.limits.cpus = *d;
      } else if (it.key() == "memory" || it.key() == "disk" || it.key() == "output" ||
                 it.key() == "egress_bytes") {
        auto b = parse_size(*t);
        if (!b) return wrap(b.error());
        (it.key() == "memory"         ? s.limits.memory_bytes
         : it.key() == "disk"         ? s.limits.disk_bytes
         : it.key() == "egress_bytes" ? s.limits.egress_bytes
                                      : s.limits.output_bytes) = *b;
      } else if (it.key() == "pids" || it.key() == "nofile" || it.key() == "egress_connections") {
        if (!v.is_number_unsigned()) return make_error(field, "expected a positive integer");
        (it.key() == "pids"     ? s.limits.pids
         : it.key() == "nofile" ? s.limits.nofile
                                : s.limits.egress_connections) = v.get<uint64_t>();
      } else if (it.key() == "timeout") {
        auto d = parse_duration(*t);
        if (!d) return wrap(d.error());
        s.limits.timeout = *d;
      } else {
        return make_error(field, "unknown field");
      }
    }
  }
  return s;
}

std::string spec_to_json(const SandboxSpec& s) {
  nlohmann::json j = {{"id", s.id},
                      {"backend", s.backend},
                      {"image", s.image},
                      {"workspace", s.workspace_dir},
                      {"env", s.env},
                      {"network", s.network},
                      {"allow", s.allow},
                      {"seccomp", s.seccomp},
                      {"labels", s.labels},
                      {"limits",
                       {{"cpus", s.limits.cpus},
                        {"memory", format_size(s.limits.memory_bytes)},
                        {"pids", s.limits.pids},
                        {"disk", format_size(s.limits.disk_bytes)},
                        {"timeout", format_duration(s.limits.timeout)},
                        {"output", format_size(s.limits.output_bytes)},
                        {"nofile", s.limits.nofile},
                        {"egress_connections", s.limits.egress_connections},
                        {"egress_bytes", format_size(s.limits.egress_bytes)}}}};
  return j.dump();
}

std::map<std::string, std::string> base_environment(bool tty) {
  std::map<std::string, std::string> env = {
      {"PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
      {"HOME", "/workspace"},
      {"LANG", "C.UTF-8"},
  };
  if (tty) env["TERM"] = "xterm-256color";
  return env;
}

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
