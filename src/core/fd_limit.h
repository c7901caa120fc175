// The process's fd limit. A worker holds a few fds per live sandbox (protocol
// socket, pidfd, uid-slot lock), so thousands of sandboxes need more than the
// usual soft limit of 1024; the hard limit is what the operator allows.
#pragma once

#include <sys/resource.h>

#include "core/result.h"

namespace rf {

// Raises the soft RLIMIT_NOFILE to the hard limit; returns the new soft limit.
// Sandboxes are unaffected: each sets its own nofile before its runner starts.
Result<rlim_t> raise_fd_limit();

}  // namespace rf
