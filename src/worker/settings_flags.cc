#include "worker/settings_flags.h"

#include <functional>
#include <vector>

#include "net/egress_policy.h"
#include "worker/config_file.h"

namespace rf::worker {
namespace {

using Apply =
    std::function<Status(std::string_view text, const std::string& source, SettingsLayer*)>;

struct FlagDef {
  std::string flag;
  std::string help;
  Apply apply;
};

template <class T>
using Parser = Result<T> (*)(std::string_view);

template <class T>
FlagDef def(std::string flag, std::string help, Parser<T> parse, Maybe<T> SettingsLayer::*member) {
  return {std::move(flag), std::move(help),
          [=](std::string_view text, const std::string& source, SettingsLayer* layer) -> Status {
            auto value = parse(text);
            if (!value) return value.take_error();
            layer->*member = Resolved<T>{std::move(*value), source};
            return ok_status();
          }};
}

// "a,b" → [a, b]; "" → [] (no fallbacks, overriding the config file).
Status apply_backends(std::string_view text, const std::string& source, SettingsLayer* layer) {
  std::vector<std::string> backends;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    auto backend = parse_backend(text.substr(0, comma));
    if (!backend) return backend.take_error();
    backends.push_back(*backend);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
  }
  layer->fallback_backends = Resolved<std::vector<std::string>>{std::move(backends), source};
  return ok_status();
}

// "a,b" → [a, b] egress rules; "" → [] (overriding the config file).
Status apply_allow(std::string_view text, const std::string& source, SettingsLayer* layer) {
  std::vector<std::string> rules;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    std::string rule(text.substr(0, comma));
    if (auto p = net::EgressPolicy::parse({rule}); !p) return p.take_error();
    rules.push_back(std::move(rule));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
  }
  layer->allow = Resolved<std::vector<std::string>>{std::move(rules), source};
  return ok_status();
}

const std::vector<FlagDef>& flag_defs() {
  static const std::vector<FlagDef> defs = {
      def("--project-environment", "production, staging or development", parse_project_environment,
          &SettingsLayer::project_environment),
      def("--project", "The one project a per_worker worker serves", parse_name,
          &SettingsLayer::project),
      def("--state-dir", "State directory (default ~/.ringfence/state)", parse_text,
          &SettingsLayer::state_dir),
      def("--sandbox-mode", "none, per_tool, per_run or per_worker", parse_sandbox_mode,
          &SettingsLayer::mode),
      def("--sandbox-backend", "native, docker, remotedocker or local", parse_backend,
          &SettingsLayer::backend),
      def("--docker-host",
          "docker backends: the daemon, unix:///path, tcp://HOST:PORT or ssh://USER@HOST",
          parse_text, &SettingsLayer::docker_host),
      {"--sandbox-fallback-backends", "Backends to try, in order, when the backend is unhealthy",
       apply_backends},
      def("--sandbox-image", "Image (host: the host's /usr, read-only)", parse_text,
          &SettingsLayer::image),
      def("--sandbox-network", "Network policy: none, proxy or host", parse_text,
          &SettingsLayer::network),
      {"--sandbox-allow",
       "With network proxy: hosts sandboxes may reach, comma-separated (docs/network.md)",
       apply_allow},
      def("--sandbox-cpu", "CPUs per sandbox", parse_cpu, &SettingsLayer::cpu),
      def("--sandbox-mem", "Memory per sandbox", parse_size_setting, &SettingsLayer::mem),
      def("--sandbox-pids", "Process limit per sandbox", parse_count, &SettingsLayer::pids),
      def("--sandbox-disk", "Size of /workspace and of /tmp", parse_size_setting,
          &SettingsLayer::disk),
      def("--sandbox-timeout", "Per-call timeout", parse_duration_setting, &SettingsLayer::timeout),
      def("--sandbox-idle-timeout", "Idle timeout of per_run sandboxes", parse_duration_setting,
          &SettingsLayer::idle_timeout),
      def("--pool", "Pool name", parse_name, &SettingsLayer::pool_name),
      def("--pool-target", "Warm sandboxes to keep ready", parse_count,
          &SettingsLayer::pool_target),
      def("--pool-max", "Most sandboxes in the pool", parse_count, &SettingsLayer::pool_max),
  };
  return defs;
}

}  // namespace

void add_worker_settings_flags(CLI::App* cmd, WorkerFlags* flags) {
  cmd->add_option_function<std::string>(
      "--config", [flags](const std::string& path) { flags->config = path; },
      "Worker config file (default ~/.ringfence/worker.yaml when it exists)");
  for (const FlagDef& d : flag_defs()) {
    cmd->add_option_function<std::string>(
        d.flag, [flags, flag = d.flag](const std::string& text) { flags->given[flag] = text; },
        d.help);
  }
}

Result<SettingsLayer> flag_layer(const WorkerFlags& flags) {
  SettingsLayer layer;
  for (const FlagDef& d : flag_defs()) {
    const auto it = flags.given.find(d.flag);
    if (it == flags.given.end()) continue;
    Status st = d.apply(it->second, flag_source(d.flag), &layer);
    if (!st.ok()) return make_error(d.flag, st.error().message);
  }
  return layer;
}

Result<WorkerSettings> resolve_worker_settings(const WorkerFlags& flags, const std::string& home) {
  auto flag_settings = flag_layer(flags);
  if (!flag_settings) return flag_settings.take_error();
  auto config_file = locate_config_file(flags.config, home);
  if (!config_file) return config_file.take_error();
  SettingsLayer config;
  if (!config_file->value.empty()) {
    auto loaded = load_config_file(config_file->value);
    if (!loaded) return loaded.take_error();
    config = std::move(*loaded);
  }
  WorkerSettings settings = merge_settings(*flag_settings, config, *config_file, home);
  RF_TRY(validate_settings(settings));
  return settings;
}

}  // namespace rf::worker
