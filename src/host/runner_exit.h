// Host side: how the death of a sandbox's tool runner is told, the same for
// every backend: "sandbox ended: tool runner (pid 42) killed by signal 9 (Killed)".
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <string>

#include "core/result.h"

namespace rf::host {

// "exited with status N" or "killed by signal N (Name)", from waitid's siginfo.
std::string describe_wait_status(const siginfo_t& si);

// The error every call gets once the runner (host pid `pid`) has ended.
Error runner_ended_error(pid_t pid, const siginfo_t& si);

}  // namespace rf::host
