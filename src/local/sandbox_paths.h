// Host side: how a local sandbox's own view (/workspace, /tmp, HOME) maps onto
// its scratch directory on the host. File operations need no mapping: the tool
// runner resolves them inside the scratch directory itself (--root).
#pragma once

#include <map>
#include <string>

#include "core/result.h"

namespace rf::local {

// The host directory a call runs in: "/workspace" or a path below it becomes the
// same path under <scratch>/workspace. Anything else (another absolute path, a
// relative one, a ".." component) is an error: "cwd must be under /workspace in
// a local sandbox".
Result<std::string> host_cwd(const std::string& scratch, const std::string& cwd);

// What every call's environment starts from: PATH and LANG as in every sandbox,
// HOME=<scratch>/workspace, TMPDIR=<scratch>/tmp, and TERM only when `tty`.
// Nothing comes from the worker's own environment.
std::map<std::string, std::string> local_environment(const std::string& scratch, bool tty);

}  // namespace rf::local
