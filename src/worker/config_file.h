// The worker config file (~/.ringfence/worker.yaml, or --config FILE), parsed with
// yaml-cpp into a partial settings layer; the format is in docs/worker.md. Every
// error names the file, the line and the key, for example
//   /etc/rf/worker.yaml:7: sandbox.cpus: unknown key (did you mean "cpu"?)
//   /etc/rf/worker.yaml:3: sandbox.mem: expected a size such as 512m, got "lots"
// and a YAML syntax error the line and column the parser stopped at.
#pragma once

#include <optional>
#include <string>

#include "core/result.h"
#include "worker/settings.h"

namespace rf::worker {

// The user's home directory: $HOME, else the passwd entry, else "/".
std::string home_directory();

// ~/.ringfence/worker.yaml
std::string default_config_path(const std::string& home);

// The config file to read and its source: `given` (--config) must exist; without
// it, the default path when it exists. An empty value: no config file.
Result<Resolved<std::string>> locate_config_file(const std::optional<std::string>& given,
                                                 const std::string& home);

// Parses the text of a config file; `path` is used in sources and errors only.
Result<SettingsLayer> parse_config_yaml(const std::string& text, const std::string& path);

// Reads and parses `path`.
Result<SettingsLayer> load_config_file(const std::string& path);

// The settings written in the config file format (unset project settings left
// out); parse_config_yaml reads them back to the same values.
std::string settings_to_yaml(const WorkerSettings& settings);

}  // namespace rf::worker
