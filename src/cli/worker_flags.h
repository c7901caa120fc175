// The worker's settings flags on a CLI11 command (`worker start`, `worker
// config`): the flags are worker/settings_flags.h's; this only registers them.
#pragma once

#include <CLI/CLI.hpp>

#include "worker/settings_flags.h"

namespace rf::cli {

// Adds every worker settings flag and --config to `cmd`; `flags` must outlive the parse.
void add_worker_settings_flags(CLI::App* cmd, worker::WorkerFlags* flags);

}  // namespace rf::cli
