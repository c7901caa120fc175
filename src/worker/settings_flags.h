// The worker's settings as CLI flags, shared by `worker start` and `worker config`:
//   --config FILE --state-dir DIR --project-environment ENV --project P
//   --sandbox-mode --sandbox-backend --sandbox-fallback-backends a,b --sandbox-image
//   --sandbox-network --sandbox-allow --proxy-resolve, a --sandbox-<limit> per
//   limit of sandbox/limits.h (--sandbox-mem...), --sandbox-idle-timeout,
//   --pool NAME --pool-target N --pool-max N
// Only flags that were given on the command line make it into the flag layer (a
// flag left out is not "flag", whatever its default would be).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "worker/settings.h"

namespace rf::worker {

// The text of each flag that was given, keyed by the flag ("--sandbox-mem").
struct WorkerFlags {
  std::map<std::string, std::string> given;
  std::optional<std::string> config;  // --config FILE
};

// One worker settings flag: its name and help. The CLI registers each
// (cli/worker_flags.h) and records the text given into WorkerFlags::given.
struct SettingFlag {
  std::string flag;
  std::string help;
  bool list = false;  // repeatable: the CLI joins the values given with ','
};
std::vector<SettingFlag> setting_flags();

// Parses the given flags into a layer; errors name the flag, for example
// `--sandbox-mem: expected a size such as 512m, got "lots"`.
Result<SettingsLayer> flag_layer(const WorkerFlags& flags);

// Everything a worker command does with its flags: the flag layer, the config
// file (--config, or ~/.ringfence/worker.yaml when it exists), the merge, then
// validation.
Result<WorkerSettings> resolve_worker_settings(const WorkerFlags& flags, const std::string& home);

}  // namespace rf::worker
