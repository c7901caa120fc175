// The sandbox side of native set-up: what the cloned child does, as a flat,
// ordered list of small steps, from "wait for parent" to "exec tool runner".
// The host prepares a ChildConfig before clone; the child only reads it,
// allocates nothing and makes only async-signal-safe calls (the worker that
// clones is multi-threaded). A failed step is reported to the parent as
// {step index, errno} over a SOCK_SEQPACKET socket; EOF on that CLOEXEC socket
// after a success report means the runner was exec'd.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "host/seccomp_profile.h"
#include "native/mount_plan.h"

namespace rf::native {

inline constexpr int kMaxSteps = 160;

struct ChildConfig {
  const MountPlan* plan = nullptr;
  const host::SeccompFilters* seccomp = nullptr;
  int sync_fd = -1;   // SOCK_SEQPACKET to the parent, CLOEXEC
  int proto_fd = -1;  // becomes fd 3 of the tool runner
  // cgroup v1: open `tasks` files the child writes "0" to (see Cgroup::self_attach_files).
  int join_cgroup_fds[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
  // From host::make_idmapped_tree, for kAttachTree: [0] the workspace, then the
  // volumes in order; -1 where none.
  static constexpr int kMaxTrees = 1 + 8;  // sandbox/spec.h kMaxVolumeMounts
  int tree_fds[kMaxTrees] = {-1, -1, -1, -1, -1, -1, -1, -1, -1};
  std::string hostname;
  bool own_network = true;  // a new network namespace (its lo brought up); false: the host's
  uid_t uid = 1000;         // the sandbox user, inside the user namespace
  gid_t gid = 1000;
  int cap_last_cap = 40;
  uint64_t rlimit_nofile = 1024;
  uint64_t rlimit_fsize = 0;
  std::vector<char*> runner_argv;  // NULL-terminated
  std::vector<char*> runner_envp;  // NULL-terminated (empty environment)
};

// What the child sends the parent: once on failure, or once just before exec.
struct ChildReport {
  int32_t failed_step = -1;  // -1: all steps done, exec follows
  int32_t sys_errno = 0;
  uint32_t step_count = 0;
  uint32_t reserved = 0;
  int64_t step_ns[kMaxSteps] = {};
};

// The step names in order; a report's indexes point into this list.
std::vector<std::string> child_step_names(const MountPlan& plan);

// Runs every step and execs the tool runner; never returns.
[[noreturn]] void run_child(const ChildConfig& config);

}  // namespace rf::native
