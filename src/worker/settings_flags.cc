#include "worker/settings_flags.h"

#include <functional>
#include <vector>

#include "net/egress_policy.h"
#include "worker/config_file.h"

namespace rf::worker {
namespace {

using SetFromFlag =
    std::function<Status(std::string_view text, const std::string& source, SettingsLayer*)>;

struct FlagDef {
  std::string flag;
  std::string help;
  SetFromFlag apply;
  bool list = false;  // comma-separated, and repeatable (the CLI joins repeats with ',')
};

template <class T>
FlagDef def(std::string flag, std::string help, SettingParser<T> parse,
            Maybe<T> SettingsLayer::*member) {
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
  std::vector<BackendKind> backends;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    auto backend = parse_backend(text.substr(0, comma));
    if (!backend) return backend.take_error();
    backends.push_back(*backend);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
  }
  layer->fallback_backends = Resolved<std::vector<BackendKind>>{std::move(backends), source};
  return ok_status();
}

// "a=1.2.3.4,b=::1" → [a=1.2.3.4, b=::1]; "" → [] (overriding the config file).
Status apply_resolve(std::string_view text, const std::string& source, SettingsLayer* layer) {
  std::vector<std::string> entries;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    auto entry = parse_proxy_resolve(text.substr(0, comma));
    if (!entry) return entry.take_error();
    entries.push_back(*entry);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
  }
  layer->proxy_resolve = Resolved<std::vector<std::string>>{std::move(entries), source};
  return ok_status();
}

// One flag per sandbox limit (sandbox/limits.h): --sandbox-mem and friends.
FlagDef limit_flag(const LimitField& f) {
  return {f.worker_flag(), std::string(f.help),
          [&f](std::string_view text, const std::string& source, SettingsLayer* layer) -> Status {
            RF_TRY(check_limit_text(f, text));
            layer->limits[std::string(f.name)] = Resolved<std::string>{std::string(text), source};
            return ok_status();
          }};
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

std::vector<FlagDef> make_flag_defs() {
  std::vector<FlagDef> defs = {
      def("--project-environment", "production, staging or development", parse_project_environment,
          &SettingsLayer::project_environment),
      def("--project", "The one project a per_worker worker serves", parse_project_name,
          &SettingsLayer::project),
      def("--state-dir", "State directory (default ~/.ringfence/state)", parse_text,
          &SettingsLayer::state_dir),
      def("--store",
          "The store: a SQLite file (default <state-dir>/ringfence.db) or a postgres:// URI "
          "(its password in PGPASSFILE, never here)",
          parse_store, &SettingsLayer::store),
      def("--host-id", "This worker's host in the fleet (default: the hostname)", parse_name,
          &SettingsLayer::host_id),
      {"--label",
       "A label calls and steps may require of this worker, KEY=VALUE (repeatable or "
       "comma-separated)",
       [](std::string_view text, const std::string& source, SettingsLayer* layer) -> Status {
         auto labels = parse_labels(text);
         if (!labels) return labels.take_error();
         layer->labels = Resolved<store::Labels>{std::move(*labels), source};
         return ok_status();
       },
       true},
      def("--sandbox-mode", "none, per_tool, per_run or per_worker", parse_sandbox_mode,
          &SettingsLayer::mode),
      def("--jit-policy", "The JIT credential policy file (YAML); without one, rf-cred is denied",
          parse_text, &SettingsLayer::jit_policy),
      def("--sandbox-backend", "native, docker, remotedocker or local", parse_backend,
          &SettingsLayer::backend),
      def("--docker-host",
          "docker backends: the daemon, unix:///path, tcp://HOST:PORT or ssh://USER@HOST",
          parse_text, &SettingsLayer::docker_host),
      {"--sandbox-fallback-backends", "Backends to try, in order, when the backend is unhealthy",
       apply_backends, true},
      def("--sandbox-image", "Image (host: the host's /usr, read-only)", parse_text,
          &SettingsLayer::image),
      def("--sandbox-network", "Network policy: none, proxy or host", parse_network,
          &SettingsLayer::network),
      {"--sandbox-allow",
       "With network proxy: hosts sandboxes may reach (repeatable or comma-separated; "
       "docs/network.md)",
       apply_allow, true},
      {"--proxy-resolve",
       "With network proxy: the proxy maps NAME to ADDR without DNS; ADDR still passes the policy "
       "(NAME=ADDR, repeatable or comma-separated)",
       apply_resolve, true},
      def("--egress-ca-file",
          "With network proxy: the CAs the gateway and proxy deliveries verify upstreams "
          "against (default: the system's)",
          parse_text, &SettingsLayer::egress_ca_file),
  };
  for (const LimitField& f : limit_fields()) defs.push_back(limit_flag(f));
  for (auto d :
       {def("--sandbox-idle-timeout", "Idle timeout of per_run sandboxes", parse_duration_setting,
            &SettingsLayer::idle_timeout),
        def("--pool", "Pool name", parse_name, &SettingsLayer::pool_name),
        def("--pool-target", "Warm sandboxes to keep ready", parse_count,
            &SettingsLayer::pool_target),
        def("--pool-max", "Most sandboxes in the pool", parse_count, &SettingsLayer::pool_max)}) {
    defs.push_back(std::move(d));
  }
  return defs;
}

const std::vector<FlagDef>& flag_defs() {
  static const std::vector<FlagDef> defs = make_flag_defs();
  return defs;
}

}  // namespace

std::vector<SettingFlag> setting_flags() {
  std::vector<SettingFlag> out;
  for (const FlagDef& d : flag_defs()) out.push_back({d.flag, d.help, d.list});
  return out;
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
