#include "worker/settings.h"

#include <array>
#include <cstdlib>
#include <sstream>
#include <type_traits>
#include <utility>

#include "core/units.h"
#include "net/resolve_override.h"
#include "policy/principal.h"
#include "store/db.h"

namespace rf::worker {
namespace {

constexpr std::array<std::pair<SandboxMode, const char*>, 4> kModes = {{
    {SandboxMode::kNone, "none"},
    {SandboxMode::kPerTool, "per_tool"},
    {SandboxMode::kPerRun, "per_run"},
    {SandboxMode::kPerWorker, "per_worker"},
}};

constexpr std::array<std::pair<ProjectEnvironment, const char*>, 3> kEnvironments = {{
    {ProjectEnvironment::kProduction, "production"},
    {ProjectEnvironment::kStaging, "staging"},
    {ProjectEnvironment::kDevelopment, "development"},
}};

std::string in_quotes(std::string_view text) { return "\"" + std::string(text) + "\""; }

template <class Table>
std::string allowed_names(const Table& table) {
  std::string out;
  for (const auto& entry : table) out += (out.empty() ? "" : ", ") + std::string(entry.second);
  return out;
}

Error expected(std::string_view what, std::string_view text) {
  return make_error("", "expected " + std::string(what) + ", got " + in_quotes(text));
}

// The project environment's default sandbox mode, if it has one.
std::optional<SandboxMode> environment_mode(ProjectEnvironment env) {
  switch (env) {
    case ProjectEnvironment::kProduction:
      return SandboxMode::kPerRun;
    case ProjectEnvironment::kStaging:
      return SandboxMode::kPerTool;
    case ProjectEnvironment::kDevelopment:
      return SandboxMode::kNone;
    case ProjectEnvironment::kNone:
      break;
  }
  return std::nullopt;
}

template <class T>
void pick(Resolved<T>* out, const Maybe<T>& flag, const Maybe<T>& config) {
  if (flag) {
    *out = *flag;
  } else if (config) {
    *out = *config;
  }
}

std::string expand_home(const std::string& path, const std::string& home) {
  if (path == "~") return home;
  if (path.starts_with("~/")) return home + path.substr(1);
  return path;
}

template <class T>
std::string format_list(const std::vector<T>& items) {
  std::string out = "[";
  for (const auto& item : items) out += (out.size() > 1 ? ", " : "") + std::string(item);
  return out + "]";
}

std::vector<std::string> names(const std::vector<BackendKind>& kinds) {
  std::vector<std::string> out;
  for (BackendKind k : kinds) out.emplace_back(to_string(k));
  return out;
}

std::string or_none(const std::string& value) { return value.empty() ? "(none)" : value; }

template <class T>
std::string line(std::string_view key, const std::string& value, const Resolved<T>& r) {
  // Appended piecewise: GCC 12's -Warray-bounds misfires on the chained
  // operator+ form when inlined under -fsanitize=thread.
  std::string out(key);
  out.append(": ").append(value).append(" (").append(r.source).append(")");
  return out;
}

// validate_spec's field names, mapped back to the settings they came from.
Error spec_error(const WorkerSettings& s, const Error& e) {
  auto at = [&](const std::string& source, std::string_view key) {
    return make_error(where_of(source, key), e.message);
  };
  if (const LimitField* f = limit_of_spec_error(e)) {
    return at(s.limits.source_of(f->name), f->config_key());
  }
  if (e.where == "image") return at(s.image.source, "sandbox.image");
  if (e.where == "network") return at(s.network.source, "sandbox.network");
  if (e.where == "allow") return at(s.allow.source, "sandbox.allow");
  return e;
}

// The limits, image and network through SandboxSpec's own rules. Only the native
// backend's images are known here; other backends check their images themselves.
Status validate_sandbox(const WorkerSettings& s) {
  SandboxSpec spec = s.sandbox_spec();
  if (is_docker(spec.backend) && spec.image == "host") {
    return make_error(where_of(s.image.source, "sandbox.image"),
                      "the " + std::string(to_string(spec.backend)) +
                          " backend needs a docker image (--sandbox-image NAME); \"host\" is the "
                          "native backend's");
  }
  if (spec.backend == BackendKind::kRemoteDocker && s.docker_host.value.empty()) {
    return make_error(where_of(s.backend.source, "sandbox.backend"),
                      "remotedocker needs --docker-host tcp://HOST:PORT or ssh://USER@HOST");
  }
  if (spec.backend != BackendKind::kNative) spec.image = SandboxSpec{}.image;
  spec.backend = SandboxSpec{}.backend;
  Status st = validate_spec(spec);
  if (!st.ok()) return spec_error(s, st.error());
  for (size_t i = 0; i < s.proxy_resolve.value.size(); ++i) {
    if (auto bad = parse_proxy_resolve(s.proxy_resolve.value[i]); !bad) {
      return make_error(
          where_of(s.proxy_resolve.source, "sandbox.proxy_resolve[" + std::to_string(i) + "]"),
          bad.error().message);
    }
  }
  return ok_status();
}

Status validate_pool(const WorkerSettings& s) {
  if (s.pool_max.value < 1) {
    return make_error(where_of(s.pool_max.source, "pool.max"), "must be at least 1, got 0");
  }
  if (s.pool_target.value > s.pool_max.value) {
    return make_error(where_of(s.pool_target.source, "pool.target"),
                      "must not exceed pool.max (" + std::to_string(s.pool_max.value) + "), got " +
                          std::to_string(s.pool_target.value));
  }
  return ok_status();
}

}  // namespace

std::string to_string(SandboxMode mode) {
  for (const auto& [m, name] : kModes) {
    if (m == mode) return name;
  }
  return "?";
}

std::string to_string(ProjectEnvironment env) {
  for (const auto& [e, name] : kEnvironments) {
    if (e == env) return name;
  }
  return "(none)";
}

std::string flag_source(std::string_view flag) { return "flag " + std::string(flag); }

std::string config_source(std::string_view path, int line) {
  return "config " + std::string(path) + ":" + std::to_string(line);
}

std::string environment_source(ProjectEnvironment env) {
  return "project environment " + to_string(env);
}

std::string where_of(std::string_view source, std::string_view key) {
  if (source.starts_with("flag ")) return std::string(source.substr(5));
  if (source.starts_with("config ")) return std::string(source.substr(7)) + ": " + std::string(key);
  return std::string(key);
}

Result<SandboxMode> parse_sandbox_mode(std::string_view text) {
  for (const auto& [mode, name] : kModes) {
    if (text == name) return mode;
  }
  return make_error(
      "", "unknown sandbox mode " + in_quotes(text) + " (allowed: " + allowed_names(kModes) + ")");
}

Result<ProjectEnvironment> parse_project_environment(std::string_view text) {
  for (const auto& [env, name] : kEnvironments) {
    if (text == name) return env;
  }
  return make_error("", "unknown project environment " + in_quotes(text) +
                            " (allowed: " + allowed_names(kEnvironments) + ")");
}

Result<BackendKind> parse_backend(std::string_view text) { return parse_backend_kind(text); }

Result<NetworkPolicy> parse_network(std::string_view text) { return parse_network_policy(text); }

Result<std::string> parse_proxy_resolve(std::string_view text) {
  if (text.find(',') != std::string_view::npos || text.find('=') == std::string_view::npos) {
    return expected("NAME=ADDR such as api.test=127.0.0.1", text);
  }
  if (auto parsed = net::parse_resolve_override(text); !parsed) {
    return make_error("", parsed.error().to_string());
  }
  return std::string(text);
}

Status check_limit_text(const LimitField& field, std::string_view text) {
  Limits scratch;
  return field.set(scratch, text);
}

Result<std::string> parse_text(std::string_view text) {
  if (text.empty()) return make_error("", "must not be empty");
  return std::string(text);
}

Result<store::Labels> parse_labels(std::string_view text) {
  store::Labels labels;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    auto label = store::parse_label(text.substr(0, comma));
    if (!label) return label.take_error();
    if (!labels.emplace(label->first, label->second).second)
      return make_error("", "the label " + label->first + " is given twice");
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
  }
  RF_TRY(store::check_labels(labels));
  return labels;
}

Result<std::string> parse_store(std::string_view text) {
  if (store::is_postgres_uri(text) || store::sqlite_path(text).starts_with("/"))
    return std::string(text);
  // Shown without a password, should it be a URI of another scheme.
  return expected("an absolute SQLite file path (PATH or sqlite:PATH) or a postgres:// URI",
                  store::engine::redact_uri(text));
}

Result<std::string> parse_name(std::string_view text) {
  bool ok = !text.empty();
  for (char c : text) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '.' || c == '_' || c == '-');
  }
  if (!ok) return expected("a name of letters, digits, '.', '_' and '-'", text);
  return std::string(text);
}

Result<std::string> parse_project_name(std::string_view text) {
  if (!policy::check_project_name(text))
    return expected(
        "a project name, 1 to 64 of letters, digits, '.', '_' and '-', not starting "
        "with '.'",
        text);
  return std::string(text);
}

Result<uint64_t> parse_count(std::string_view text) {
  auto n = parse_whole_number(text);
  if (!n) return expected("a whole number", text);
  return *n;
}

Result<std::chrono::milliseconds> parse_duration_setting(std::string_view text) {
  auto d = parse_duration(text);
  if (!d) return expected("a duration such as 30s", text);
  return *d;
}

Result<bool> parse_bool(std::string_view text) {
  if (text == "true" || text == "yes" || text == "on") return true;
  if (text == "false" || text == "no" || text == "off") return false;
  return expected("true or false", text);
}

WorkerSettings default_settings(const std::string& home) {
  const SandboxSpec spec;
  WorkerSettings s;
  s.project_environment.value = ProjectEnvironment::kNone;
  if (const char* env = std::getenv("RINGFENCE_STATE_DIR"); env != nullptr && *env != '\0') {
    s.state_dir = {env, "environment RINGFENCE_STATE_DIR"};
  } else {
    s.state_dir.value = home + "/.ringfence/state";
  }
  s.mode.value = SandboxMode::kNone;
  s.backend.value = spec.backend;
  s.image.value = spec.image;
  s.network.value = spec.network;
  s.limits.value = spec.limits;
  s.idle_timeout.value = std::chrono::minutes(10);
  s.pool_name.value = "default";
  s.pool_target.value = 0;
  s.pool_max.value = 4;
  return s;
}

WorkerSettings merge_settings(const SettingsLayer& flags, const SettingsLayer& config,
                              Resolved<std::string> config_file, const std::string& home) {
  WorkerSettings s = default_settings(home);
  s.config_file = std::move(config_file);
  pick(&s.project_environment, flags.project_environment, config.project_environment);
  if (auto mode = environment_mode(s.project_environment.value)) {
    s.mode = {*mode, environment_source(s.project_environment.value)};
  }
  pick(&s.mode, flags.mode, config.mode);
  pick(&s.project, flags.project, config.project);
  pick(&s.state_dir, flags.state_dir, config.state_dir);
  s.state_dir.value = expand_home(s.state_dir.value, home);
  pick(&s.store, flags.store, config.store);
  pick(&s.host_id, flags.host_id, config.host_id);
  pick(&s.labels, flags.labels, config.labels);
  pick(&s.backend, flags.backend, config.backend);
  pick(&s.docker_host, flags.docker_host, config.docker_host);
  pick(&s.fallback_backends, flags.fallback_backends, config.fallback_backends);
  pick(&s.image, flags.image, config.image);
  pick(&s.network, flags.network, config.network);
  pick(&s.allow, flags.allow, config.allow);
  pick(&s.proxy_resolve, flags.proxy_resolve, config.proxy_resolve);
  pick(&s.egress_ca_file, flags.egress_ca_file, config.egress_ca_file);
  pick(&s.allow_host_network, flags.allow_host_network, config.allow_host_network);
  pick(&s.allow_identity_without_sandbox, flags.allow_identity_without_sandbox,
       config.allow_identity_without_sandbox);
  pick(&s.jit_policy, flags.jit_policy, config.jit_policy);
  for (const LimitField& f : limit_fields()) {
    const auto given = flags.limits.find(f.name);
    const auto written = config.limits.find(f.name);
    const Resolved<std::string>* text = given != flags.limits.end()      ? &given->second
                                        : written != config.limits.end() ? &written->second
                                                                         : nullptr;
    if (text == nullptr) continue;
    // The layers hold only texts that parse (flag_layer, parse_config_yaml).
    if (f.set(s.limits.value, text->value)) s.limits.sources[std::string(f.name)] = text->source;
  }
  pick(&s.idle_timeout, flags.idle_timeout, config.idle_timeout);
  pick(&s.pool_name, flags.pool_name, config.pool_name);
  pick(&s.pool_target, flags.pool_target, config.pool_target);
  pick(&s.pool_max, flags.pool_max, config.pool_max);
  return s;
}

Status validate_settings(const WorkerSettings& s) {
  if (s.mode.value == SandboxMode::kPerWorker && s.project.value.empty()) {
    return make_error(where_of(s.mode.source, "sandbox.mode"),
                      "per_worker needs a project (--project, or project: in the config file)");
  }
  if (!s.state_dir.value.starts_with("/")) {
    return make_error(where_of(s.state_dir.source, "state_dir"),
                      "must be an absolute path, got " + in_quotes(s.state_dir.value));
  }
  // Any process on the host can read another's argv: a password stays out.
  if (s.store.source.starts_with("flag") && store::holds_password(s.store.value)) {
    return make_error(where_of(s.store.source, "store"),
                      "the URI holds a password, which any process can read in argv; put it "
                      "in the config file (store:) or in libpq's PGPASSFILE");
  }
  if (s.idle_timeout.value.count() <= 0) {
    return make_error(where_of(s.idle_timeout.source, "sandbox.idle_timeout"), "must be positive");
  }
  RF_TRY(validate_sandbox(s));
  if (s.network.value == NetworkPolicy::kHost &&
      s.project_environment.value == ProjectEnvironment::kProduction &&
      !s.allow_host_network.value) {
    return make_error(
        where_of(s.network.source, "sandbox.network"),
        "host is refused for production projects (the host's network has no egress policy); "
        "set sandbox.allow_host_network: true in the config file to allow it");
  }
  return validate_pool(s);
}

SandboxSpec WorkerSettings::sandbox_spec() const {
  SandboxSpec spec;
  spec.backend = backend.value;
  spec.image = image.value;
  spec.network = network.value;
  spec.allow = allow.value;
  spec.limits = limits.value;
  return spec;
}

std::string WorkerSettings::store_target() const {
  return store.value.empty() ? state_dir.value + "/ringfence.db" : store.value;
}

const std::string& ResolvedLimits::source_of(std::string_view name) const {
  static const std::string kDefault(kDefaultSource);
  const auto it = sources.find(name);
  return it == sources.end() ? kDefault : it->second;
}

std::vector<std::string> WorkerSettings::explain() const {
  std::vector<std::string> out = {
      line("config file", or_none(config_file.value), config_file),
      line("project_environment", to_string(project_environment.value), project_environment),
      line("project", or_none(project.value), project),
      line("state_dir", state_dir.value, state_dir),
      line("store", store::engine::redact_uri(store_target()), store),
      line("host_id", host_id.value.empty() ? "(the hostname)" : host_id.value, host_id),
      line("labels", store::labels_text(labels.value), labels),
      line("sandbox.mode", to_string(mode.value), mode),
      line("sandbox.backend", std::string(to_string(backend.value)), backend),
      line("sandbox.docker_host", or_none(docker_host.value), docker_host),
      line("sandbox.fallback_backends", format_list(names(fallback_backends.value)),
           fallback_backends),
      line("sandbox.image", image.value, image),
      line("sandbox.network", std::string(to_string(network.value)), network),
      line("sandbox.allow", format_list(allow.value), allow),
      line("sandbox.proxy_resolve", format_list(proxy_resolve.value), proxy_resolve),
      line("sandbox.egress_ca_file", or_none(egress_ca_file.value), egress_ca_file),
      line("sandbox.allow_host_network", allow_host_network.value ? "true" : "false",
           allow_host_network),
      line("sandbox.allow_identity_without_sandbox",
           allow_identity_without_sandbox.value ? "true" : "false", allow_identity_without_sandbox),
  };
  for (const LimitField& f : limit_fields()) {
    out.push_back(f.config_key() + ": " + f.get(limits.value) + " (" + limits.source_of(f.name) +
                  ")");
  }
  for (auto l : {line("sandbox.idle_timeout", format_duration(idle_timeout.value), idle_timeout),
                 line("pool.name", pool_name.value, pool_name),
                 line("pool.target", std::to_string(pool_target.value), pool_target),
                 line("pool.max", std::to_string(pool_max.value), pool_max)}) {
    out.push_back(std::move(l));
  }
  if (!jit_policy.value.empty())
    out.push_back(line("identity.jit_policy", jit_policy.value, jit_policy));
  return out;
}

}  // namespace rf::worker
