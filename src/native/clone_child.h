// Host side of the native clone: making the child that runs child_setup.h's
// steps, in its new namespaces, and the stack it runs on while it shares the
// host's memory.
#pragma once

#include <sys/types.h>

#include <cstddef>

#include "native/child_setup.h"

namespace rf::native {

// The child's stack while it shares the host's memory (CLONE_VM; under
// ThreadSanitizer, on its own copy), until it execs the runner. Unmapped only once the child has
// exec'd or died.
class ChildStack {
 public:
  static constexpr size_t kSize = 256 * 1024;
  ChildStack();
  ~ChildStack();
  ChildStack(const ChildStack&) = delete;
  ChildStack& operator=(const ChildStack&) = delete;
  void* top() const;

 private:
  void* base_ = nullptr;
};

// Clones the child into new user, mount, pid, ipc, uts (and, with
// config.own_network, net) namespaces, with a pidfd in *pidfd. With
// `cgroup_fd` >= 0 (v2) the child starts in that cgroup (clone3
// CLONE_INTO_CGROUP); without it, it shares the host's memory on `stack` until
// it execs. Returns the child's pid (the child itself never returns), or -1
// with errno.
// Under ThreadSanitizer the child is a copy made by libc's clone() (see
// clone_child.cc), which ignores `cgroup_fd`: the caller moves it in.
pid_t clone_child(const ChildConfig& config, int cgroup_fd, ChildStack& stack, int* pidfd);

// Whether clone_child starts the child in the cgroup of a `cgroup_fd` >= 0.
#if defined(__SANITIZE_THREAD__)
inline constexpr bool kClonesIntoCgroup = false;
#else
inline constexpr bool kClonesIntoCgroup = true;
#endif

}  // namespace rf::native
