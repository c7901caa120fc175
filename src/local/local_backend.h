// The local backend (host side), sandbox mode `none`: for local development and
// trusted single-tenant use. No container: each sandbox is the tool runner run
// as a plain child process of the worker (same user, no namespaces, no seccomp)
// in a scratch directory of its own, <scratch_root>/<id> (mode 0700, with
// workspace/ and tmp/), with a scrubbed environment.
//
// What holds: commands run with cwd <scratch>/workspace and exactly PATH,
// HOME=<scratch>/workspace, TMPDIR=<scratch>/tmp, LANG, the spec's env and the
// call's env (TERM too on a pty), nothing from the worker's environment; file
// operations resolve inside the scratch directory, symlinks included; per-call
// timeouts and output caps; RLIMIT_NOFILE; every process of a call is killed
// when it ends; destroy() kills the runner's process group and removes the
// scratch directory without following symlinks out of it.
//
// What does NOT hold: memory, pids, cpu and disk limits (no cgroups, no tmpfs),
// network policy (the host's network), the read-only root, user separation. A
// command can read and write whatever the worker's user can. See docs/backends.md.
#pragma once

#include <memory>
#include <string>

#include "sandbox/sandbox.h"

namespace rf::local {

struct LocalOptions {
  std::string runner_path;   // empty: host::find_runner_binary()
  std::string scratch_root;  // empty: default_scratch_root(), $TMPDIR or /tmp + /ringfence-local
};

// Finds the runner and prepares the scratch root (created if missing; refused
// if it is a symlink, not ours, or writable by others).
Result<std::unique_ptr<Backend>> make_local_backend(const LocalOptions& options);

// Adds "local" to the backend registry.
void register_local_backend();

}  // namespace rf::local
