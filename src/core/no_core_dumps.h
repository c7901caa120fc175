// Long-lived host processes that hold secrets in memory (the worker: secret
// values, the sealing key, VAULT_TOKEN; serve: the same through its workers)
// must not leave them in a core file. RLIMIT_CORE 0, which their children
// inherit. PR_SET_DUMPABLE 0 would also stop ptrace by the same user, but the
// native engine's set-up child inherits it until its exec and then cannot
// open its own /proc files inside its user namespace; root can ptrace anyway.
#pragma once

#include "core/result.h"

namespace rf {

Status forbid_core_dumps();

}  // namespace rf
