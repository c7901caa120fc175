// The worker's settings and their precedence. Every setting is a Resolved<T>: its
// value and where the value came from. Layers (the flags given, the config file)
// are partial; merge_settings() picks, for each setting, the first of
//   CLI flag > worker config file > project environment default > built-in default
// (only the sandbox mode has a project environment default: production → per_run,
// staging → per_tool, development → none). validate_settings() then rejects what
// cannot run, naming the flag or the file:line: key the bad value came from.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "sandbox/spec.h"
#include "store/labels.h"

namespace rf::worker {

enum class SandboxMode { kNone, kPerTool, kPerRun, kPerWorker };
// kNone: no project environment was set.
enum class ProjectEnvironment { kNone, kProduction, kStaging, kDevelopment };

std::string to_string(SandboxMode mode);
std::string to_string(ProjectEnvironment env);  // kNone: "(none)"

// A value and its source: "flag --sandbox-mode", "config /path/worker.yaml:7",
// "project environment production" or "default".
template <class T>
struct Resolved {
  T value{};
  std::string source = "default";
};

template <class T>
using Maybe = std::optional<Resolved<T>>;

inline constexpr std::string_view kDefaultSource = "default";
std::string flag_source(std::string_view flag);              // "flag --sandbox-mem"
std::string config_source(std::string_view path, int line);  // "config /p/worker.yaml:7"
std::string environment_source(ProjectEnvironment env);      // "project environment staging"

// Where an error about a setting points: the flag ("--sandbox-mem"), the config
// line and key ("/p/worker.yaml:7: sandbox.mem"), or the key alone.
std::string where_of(std::string_view source, std::string_view key);

// The sandbox limits (sandbox/limits.h) and where each came from.
struct ResolvedLimits {
  Limits value;
  std::map<std::string, std::string, std::less<>> sources;  // by limit name; absent: default
  const std::string& source_of(std::string_view name) const;
};

// One partial layer of settings: what the flags or the config file said.
struct SettingsLayer {
  Maybe<ProjectEnvironment> project_environment;
  Maybe<std::string> project;
  Maybe<std::string> state_dir;
  Maybe<std::string> store;
  Maybe<std::string> host_id;
  Maybe<store::Labels> labels;
  Maybe<SandboxMode> mode;
  Maybe<BackendKind> backend;
  Maybe<std::string> docker_host;
  Maybe<std::vector<BackendKind>> fallback_backends;
  Maybe<std::string> image;
  Maybe<NetworkPolicy> network;
  Maybe<std::vector<std::string>> allow;
  Maybe<std::vector<std::string>> proxy_resolve;
  Maybe<std::string> egress_ca_file;
  Maybe<bool> allow_host_network;
  Maybe<bool> allow_identity_without_sandbox;
  Maybe<std::string> jit_policy;
  // Limit texts by limit name, each already known to parse.
  std::map<std::string, Resolved<std::string>, std::less<>> limits;
  Maybe<std::chrono::milliseconds> idle_timeout;
  Maybe<std::string> pool_name;
  Maybe<uint64_t> pool_target;
  Maybe<uint64_t> pool_max;
};

struct WorkerSettings {
  Resolved<std::string> config_file;  // empty value: no config file was read
  Resolved<ProjectEnvironment> project_environment;
  Resolved<std::string> project;  // per_worker: the one project this worker serves
  Resolved<std::string> state_dir;
  // The store: empty, the SQLite file in state_dir; else a SQLite file or a
  // postgres:// URI (docs/store.md). Use store_target().
  Resolved<std::string> store;
  // Its place in a fleet (issue 16): the host it runs on ("" = the hostname)
  // and the labels calls and steps may require of it (`--label gpu=true`).
  Resolved<std::string> host_id;
  Resolved<store::Labels> labels;
  Resolved<SandboxMode> mode;
  Resolved<BackendKind> backend;
  Resolved<std::string> docker_host;  // docker backends: the daemon's URL; empty: $DOCKER_HOST
  Resolved<std::vector<BackendKind>> fallback_backends;  // tried in order, keeping the mode
  Resolved<std::string> image;
  Resolved<NetworkPolicy> network;
  Resolved<std::vector<std::string>> allow;  // network proxy: egress rules (net/egress_policy.h)
  // network proxy: NAME=ADDR, names the proxy maps to addresses without DNS
  // (the addresses still pass the policy).
  Resolved<std::vector<std::string>> proxy_resolve;
  // network proxy: the CAs ringfence-egress-tls verifies the gateway's and the
  // proxy delivery's upstreams against; empty: the system's.
  Resolved<std::string> egress_ca_file;
  Resolved<bool> allow_host_network;  // lets a production project use network host
  // lets identity-scoped calls run in sandbox mode none (never for production)
  Resolved<bool> allow_identity_without_sandbox;
  // identity.jit_policy / --jit-policy: the JIT credential policy file
  // (identity/jit_policy.h); empty: every JIT request is denied.
  Resolved<std::string> jit_policy;
  ResolvedLimits limits;                             // per sandbox; timeout and output per call
  Resolved<std::chrono::milliseconds> idle_timeout;  // per_run sandboxes
  Resolved<std::string> pool_name;
  Resolved<uint64_t> pool_target;  // warm sandboxes kept ready
  Resolved<uint64_t> pool_max;

  // The spec of one sandbox with these settings (backend, image, network, limits).
  SandboxSpec sandbox_spec() const;
  // What Store::open takes: `store`, or <state_dir>/ringfence.db.
  std::string store_target() const;
  // One line per setting, "key: value (source)", for `worker config --explain`.
  std::vector<std::string> explain() const;
};

// The built-in defaults, all with source "default". The state dir is
// $RINGFENCE_STATE_DIR (what `ringfence --state-dir DIR COMMAND` sets), else
// `home`'s ~/.ringfence/state.
WorkerSettings default_settings(const std::string& home);

// Precedence, highest first: flags, config, the project environment's default
// (mode only), built-in default. `config_file` is the path the config layer was
// read from with its source, or an empty value when none was read.
WorkerSettings merge_settings(const SettingsLayer& flags, const SettingsLayer& config,
                              Resolved<std::string> config_file, const std::string& home);

// Rejects settings that cannot run; the error names the flag or file:line: key.
Status validate_settings(const WorkerSettings& settings);

// Value parsers shared by the flag and config layers. Errors carry only a
// message (empty `where`) such as `expected a size such as 512m, got "lots"`;
// the caller prefixes the flag or file:line: key.
// The shape of every parse_ function below; the config file and the flags
// both take one per setting.
template <class T>
using SettingParser = Result<T> (*)(std::string_view);

Result<SandboxMode> parse_sandbox_mode(std::string_view text);
Result<ProjectEnvironment> parse_project_environment(std::string_view text);
Result<BackendKind> parse_backend(std::string_view text);
Result<NetworkPolicy> parse_network(std::string_view text);
// NAME=ADDR, as the egress proxy's resolver override takes it.
Result<std::string> parse_proxy_resolve(std::string_view text);
// A limit's text, checked as the table's parser reads it.
Status check_limit_text(const LimitField& field, std::string_view text);
Result<std::string> parse_text(std::string_view text);  // any non-empty text (image, paths)
// An absolute SQLite file path, or a postgres:// (postgresql://) URI.
Result<std::string> parse_store(std::string_view text);
Result<std::string> parse_name(std::string_view text);  // [A-Za-z0-9._-]+ (pool, host id)
// A project's name as every door takes it (policy::check_project_name).
Result<std::string> parse_project_name(std::string_view text);
// KEY=VALUE[,KEY=VALUE...] (store/labels.h); a key given twice is refused.
Result<store::Labels> parse_labels(std::string_view text);
Result<uint64_t> parse_count(std::string_view text);
Result<std::chrono::milliseconds> parse_duration_setting(std::string_view text);
Result<bool> parse_bool(std::string_view text);  // true/false, yes/no, on/off

}  // namespace rf::worker
