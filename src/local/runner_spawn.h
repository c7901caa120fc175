// Host side: starts the tool runner as a plain child process of the worker, for
// the local backend: no namespaces, no seccomp, the worker's own user. The
// runner gets fd 3 (its end of a socketpair), 0-2 on /dev/null and no other fd,
// an empty environment, default signal dispositions and an empty signal mask,
// its own process group, and PR_SET_PDEATHSIG(SIGKILL). The kernel sends that
// signal when the *thread* that spawned it ends, not only the process: spawn
// from a thread that lives as long as the sandbox.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "core/result.h"
#include "core/unique_fd.h"

namespace rf::local {

struct RunnerLaunch {
  std::string runner_path;  // the ringfence-tool-runner binary
  std::string root;         // --root: what its file operations treat as "/"
  std::string cwd;          // its working directory
  uint64_t nofile = 1024;   // RLIMIT_NOFILE; never raised above the worker's hard limit
};

struct SpawnedRunner {
  pid_t pid = 0;     // also the id of its process group
  UniqueFd pidfd;    // to wait for it and read how it ended without races
  UniqueFd host_fd;  // our end of the protocol socket
};

// Forks and execs the runner; returns once it has exec'd. An error's `where` is
// the step that failed ("set parent death signal", "exec tool runner", ...),
// so callers can report `sandbox setup failed at step "<where>"`.
Result<SpawnedRunner> spawn_runner(const RunnerLaunch& launch);

}  // namespace rf::local
