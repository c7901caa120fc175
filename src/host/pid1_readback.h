// Host side: what the host reads back of a sandbox's PID 1 on its own
// kernel, from outside, where nothing inside can tamper with it: its
// namespaces and its seccomp programs as the kernel holds them. For the
// boundary report (proof/boundary_facts.h); the native backend reads them as
// the runner starts (NativeSandbox, "read back PID 1"), beside its exec.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/result.h"
#include "sandbox/sandbox.h"

namespace rf::host {

// The namespace inodes of `pid` (0: the calling process), by name (user,
// mnt, pid, net, ipc, uts, cgroup); a namespace that cannot be read is left
// out. The first read of a new namespace makes its inode (about 30 us each
// here); later reads, from anywhere, find it made.
std::map<std::string, uint64_t> namespace_inodes(pid_t pid);

// The bytes of each seccomp program the kernel holds for `pid` (struct
// sock_filter each), in load order (PTRACE_SECCOMP_GET_FILTER's index 0 is
// the oldest): the process is stopped for the read (PTRACE_SEIZE,
// PTRACE_INTERRUPT) and let go. Needs CAP_SYS_PTRACE over it and
// CAP_SYS_ADMIN; the calling thread is its tracer meanwhile. A process in
// the middle of an exec is read once the exec is done.
Result<std::vector<std::string>> read_seccomp_programs(pid_t pid);

// All of the above and PID 1's id maps, and with `shared_files` its status,
// rlimits, mount table and interfaces too (sandbox.h's StartReadback; an
// unreadable file left empty). The programs first: the files are read once
// an exec under way is done.
StartReadback read_back_pid1(pid_t pid, bool shared_files = true);

}  // namespace rf::host
