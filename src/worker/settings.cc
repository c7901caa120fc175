#include "worker/settings.h"

#include <array>
#include <sstream>
#include <type_traits>
#include <utility>

#include "core/units.h"

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

constexpr std::array<const char*, 4> kBackends = {"native", "docker", "remotedocker", "local"};

std::string quoted(std::string_view text) { return "\"" + std::string(text) + "\""; }

template <class Table>
std::string allowed_names(const Table& table) {
  std::string out;
  for (const auto& entry : table) {
    if (!out.empty()) out += ", ";
    if constexpr (std::is_same_v<std::decay_t<decltype(entry)>, const char*>) {
      out += entry;
    } else {
      out += entry.second;
    }
  }
  return out;
}

Error expected(std::string_view what, std::string_view text) {
  return make_error("", "expected " + std::string(what) + ", got " + quoted(text));
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

std::string format_cpu(double cpus) {
  std::ostringstream out;
  out << cpus;
  return out.str();
}

std::string format_list(const std::vector<std::string>& items) {
  std::string out = "[";
  for (const auto& item : items) out += (out.size() > 1 ? ", " : "") + item;
  return out + "]";
}

std::string or_none(const std::string& value) { return value.empty() ? "(none)" : value; }

template <class T>
std::string line(std::string_view key, const std::string& value, const Resolved<T>& r) {
  return std::string(key) + ": " + value + " (" + r.source + ")";
}

// validate_spec's field names, mapped back to the settings they came from.
Error spec_error(const WorkerSettings& s, const Error& e) {
  auto at = [&](const std::string& source, std::string_view key) {
    return make_error(where_of(source, key), e.message);
  };
  if (e.where == "limits.cpus") return at(s.cpu.source, "sandbox.cpu");
  if (e.where == "limits.memory") return at(s.mem.source, "sandbox.mem");
  if (e.where == "limits.pids") return at(s.pids.source, "sandbox.pids");
  if (e.where == "limits.disk") return at(s.disk.source, "sandbox.disk");
  if (e.where == "limits.timeout") return at(s.timeout.source, "sandbox.timeout");
  if (e.where == "image") return at(s.image.source, "sandbox.image");
  if (e.where == "network") return at(s.network.source, "sandbox.network");
  if (e.where == "allow") return at(s.allow.source, "sandbox.allow");
  return e;
}

// The limits, image and network through SandboxSpec's own rules. Only the native
// backend's images are known here; other backends check their images themselves.
Status validate_sandbox(const WorkerSettings& s) {
  SandboxSpec spec = s.sandbox_spec();
  const bool docker = spec.backend == "docker" || spec.backend == "remotedocker";
  if (docker && spec.image == "host") {
    return make_error(where_of(s.image.source, "sandbox.image"),
                      "the " + spec.backend +
                          " backend needs a docker image (--sandbox-image NAME); \"host\" is the "
                          "native backend's");
  }
  if (spec.backend == "remotedocker" && s.docker_host.value.empty()) {
    return make_error(where_of(s.backend.source, "sandbox.backend"),
                      "remotedocker needs --docker-host tcp://HOST:PORT or ssh://USER@HOST");
  }
  if (spec.backend != "native") spec.image = SandboxSpec{}.image;
  spec.backend = SandboxSpec{}.backend;
  Status st = validate_spec(spec);
  if (!st.ok()) return spec_error(s, st.error());
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
      "", "unknown sandbox mode " + quoted(text) + " (allowed: " + allowed_names(kModes) + ")");
}

Result<ProjectEnvironment> parse_project_environment(std::string_view text) {
  for (const auto& [env, name] : kEnvironments) {
    if (text == name) return env;
  }
  return make_error("", "unknown project environment " + quoted(text) +
                            " (allowed: " + allowed_names(kEnvironments) + ")");
}

Result<std::string> parse_backend(std::string_view text) {
  for (const char* name : kBackends) {
    if (text == name) return std::string(text);
  }
  return make_error(
      "", "unknown backend " + quoted(text) + " (allowed: " + allowed_names(kBackends) + ")");
}

Result<std::string> parse_text(std::string_view text) {
  if (text.empty()) return make_error("", "must not be empty");
  return std::string(text);
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

Result<double> parse_cpu(std::string_view text) {
  auto n = parse_decimal(text);
  if (!n) return expected("a number of cpus such as 1.5", text);
  return *n;
}

Result<uint64_t> parse_size_setting(std::string_view text) {
  auto n = parse_size(text);
  if (!n) return expected("a size such as 512m", text);
  return *n;
}

Result<uint64_t> parse_count(std::string_view text) {
  bool ok = !text.empty() && text.size() <= 18;
  uint64_t n = 0;
  for (char c : text) {
    ok = ok && c >= '0' && c <= '9';
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  if (!ok) return expected("a whole number", text);
  return n;
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
  s.state_dir.value = home + "/.ringfence/state";
  s.mode.value = SandboxMode::kNone;
  s.backend.value = spec.backend;
  s.image.value = spec.image;
  s.network.value = spec.network;
  s.cpu.value = spec.limits.cpus;
  s.mem.value = spec.limits.memory_bytes;
  s.pids.value = spec.limits.pids;
  s.disk.value = spec.limits.disk_bytes;
  s.timeout.value = spec.limits.timeout;
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
  pick(&s.backend, flags.backend, config.backend);
  pick(&s.docker_host, flags.docker_host, config.docker_host);
  pick(&s.fallback_backends, flags.fallback_backends, config.fallback_backends);
  pick(&s.image, flags.image, config.image);
  pick(&s.network, flags.network, config.network);
  pick(&s.allow, flags.allow, config.allow);
  pick(&s.allow_host_network, flags.allow_host_network, config.allow_host_network);
  pick(&s.cpu, flags.cpu, config.cpu);
  pick(&s.mem, flags.mem, config.mem);
  pick(&s.pids, flags.pids, config.pids);
  pick(&s.disk, flags.disk, config.disk);
  pick(&s.timeout, flags.timeout, config.timeout);
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
                      "must be an absolute path, got " + quoted(s.state_dir.value));
  }
  if (s.idle_timeout.value.count() <= 0) {
    return make_error(where_of(s.idle_timeout.source, "sandbox.idle_timeout"), "must be positive");
  }
  RF_TRY(validate_sandbox(s));
  if (s.network.value == "host" && s.project_environment.value == ProjectEnvironment::kProduction &&
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
  spec.limits.cpus = cpu.value;
  spec.limits.memory_bytes = mem.value;
  spec.limits.pids = pids.value;
  spec.limits.disk_bytes = disk.value;
  spec.limits.timeout = timeout.value;
  return spec;
}

std::vector<std::string> WorkerSettings::explain() const {
  return {
      line("config file", or_none(config_file.value), config_file),
      line("project_environment", to_string(project_environment.value), project_environment),
      line("project", or_none(project.value), project),
      line("state_dir", state_dir.value, state_dir),
      line("sandbox.mode", to_string(mode.value), mode),
      line("sandbox.backend", backend.value, backend),
      line("sandbox.docker_host", or_none(docker_host.value), docker_host),
      line("sandbox.fallback_backends", format_list(fallback_backends.value), fallback_backends),
      line("sandbox.image", image.value, image),
      line("sandbox.network", network.value, network),
      line("sandbox.allow", format_list(allow.value), allow),
      line("sandbox.allow_host_network", allow_host_network.value ? "true" : "false",
           allow_host_network),
      line("sandbox.cpu", format_cpu(cpu.value), cpu),
      line("sandbox.mem", format_size(mem.value), mem),
      line("sandbox.pids", std::to_string(pids.value), pids),
      line("sandbox.disk", format_size(disk.value), disk),
      line("sandbox.timeout", format_duration(timeout.value), timeout),
      line("sandbox.idle_timeout", format_duration(idle_timeout.value), idle_timeout),
      line("pool.name", pool_name.value, pool_name),
      line("pool.target", std::to_string(pool_target.value), pool_target),
      line("pool.max", std::to_string(pool_max.value), pool_max),
  };
}

}  // namespace rf::worker
