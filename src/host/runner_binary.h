// Finding the tool runner on the host, and checking that it can serve: every
// backend injects the same static binary into its sandboxes.
#pragma once

#include <string>

#include "core/result.h"
#include "sandbox/sandbox.h"

namespace rf::host {

// $RINGFENCE_TOOL_RUNNER, else next to the running binary, else
// /usr/libexec/ringfence/ringfence-tool-runner.
Result<std::string> find_runner_binary();

// An absolute path to the runner: `given`, or the one find_runner_binary()
// finds. Whether it runs is found out when a sandbox execs it.
Result<std::string> resolve_runner_binary(const std::string& given);

// The `sandbox doctor` line "tool runner": `path --version` runs and speaks a
// protocol version this build accepts.
HealthCheck runner_health(const std::string& path);

}  // namespace rf::host
