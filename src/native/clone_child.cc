#include "native/clone_child.h"

#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace rf::native {
namespace {

constexpr uint64_t kNamespaceFlags =
    CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS;

uint64_t namespaces_of(const ChildConfig& config) {
  return config.own_network ? kNamespaceFlags : kNamespaceFlags & ~uint64_t{CLONE_NEWNET};
}

// clone3 with a pidfd and CLONE_INTO_CGROUP (v2); clone(2) where clone3 is
// missing. Both return twice like fork: 0 in the child.
pid_t clone_into_cgroup(const ChildConfig& config, int cgroup_fd, int* pidfd) {
  const uint64_t namespaces = namespaces_of(config);
  clone_args args{};
  args.flags = namespaces | CLONE_PIDFD | (cgroup_fd >= 0 ? CLONE_INTO_CGROUP : 0);
  args.pidfd = reinterpret_cast<uint64_t>(pidfd);
  args.exit_signal = SIGCHLD;
  args.cgroup = cgroup_fd >= 0 ? static_cast<uint64_t>(cgroup_fd) : 0;
  long pid = ::syscall(SYS_clone3, &args, sizeof args);
  if (pid < 0 && errno == ENOSYS && cgroup_fd < 0) {
    pid =
        ::syscall(SYS_clone, namespaces | CLONE_PIDFD | SIGCHLD, nullptr, pidfd, nullptr, nullptr);
  }
  if (pid == 0) run_child(config);  // sandbox side from here; never returns
  return static_cast<pid_t>(pid);
}

int child_entry(void* config) {
  run_child(*static_cast<const ChildConfig*>(config));  // never returns
  return 127;
}

// Without CLONE_INTO_CGROUP (v1): the child shares the host's memory until it
// execs, as posix_spawn's child does. A fork-style clone of a multi-threaded
// worker copies its page tables, and every write by its other threads while
// the child sets up is a copy-on-write fault with a TLB-shootdown IPI
// (measured: ~20% of the worker's CPU in per_tool). The child touches only its
// own stack and reads the config; run_child allocates nothing.
pid_t clone_sharing_memory(const ChildConfig& config, void* stack_top, int* pidfd) {
  return ::clone(child_entry, stack_top,
                 static_cast<int>(namespaces_of(config) | CLONE_VM | CLONE_PIDFD) | SIGCHLD,
                 const_cast<ChildConfig*>(&config), pidfd);
}

// Under ThreadSanitizer. TSAN keeps its per-thread state behind the thread
// pointer, so a CLONE_VM child would run on the cloning thread's state while
// that thread goes on, and both crash: the child gets a copy of memory. That
// copy must come from libc's clone(), which TSAN intercepts: it takes its
// runtime's locks before the clone and releases them after, and in the child
// of a threaded process it turns its interceptors off. A raw clone3 copied
// whatever lock another thread held at that instant, and the child's first
// intercepted call (close, write, recv...) waited on it forever (CI: a
// sandbox's set-up timed out after 60 s). clone() cannot clone into a cgroup:
// the host moves the child in before it lets it go (kClonesIntoCgroup).
pid_t clone_copying_memory(const ChildConfig& config, void* stack_top, int* pidfd) {
  return ::clone(child_entry, stack_top,
                 static_cast<int>(namespaces_of(config) | CLONE_PIDFD) | SIGCHLD,
                 const_cast<ChildConfig*>(&config), pidfd);
}

}  // namespace

ChildStack::ChildStack() {
  void* p = ::mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK,
                   -1, 0);
  base_ = p == MAP_FAILED ? nullptr : p;
}

ChildStack::~ChildStack() {
  if (base_) ::munmap(base_, kSize);
}

void* ChildStack::top() const { return base_ ? static_cast<char*>(base_) + kSize : nullptr; }

pid_t clone_child(const ChildConfig& config, int cgroup_fd, ChildStack& stack, int* pidfd) {
  if (!kClonesIntoCgroup) {  // ThreadSanitizer
    if (stack.top() == nullptr) {
      errno = ENOMEM;
      return -1;
    }
    return clone_copying_memory(config, stack.top(), pidfd);
  }
  if (cgroup_fd < 0 && stack.top() != nullptr) {
    return clone_sharing_memory(config, stack.top(), pidfd);
  }
  return clone_into_cgroup(config, cgroup_fd, pidfd);
}

}  // namespace rf::native
