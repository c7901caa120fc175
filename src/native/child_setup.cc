// Sandbox side. Everything here runs in the freshly cloned child, before the
// tool runner is exec'd: raw syscalls only, no allocation, no locks.
#include "native/child_setup.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/mount.h>
#include <linux/securebits.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace rf::native {
namespace {

using Kind = MountOp::Kind;

// The steps before and after the mount plan; their order here is the order they run.
constexpr const char* kPreSteps[] = {
    "join cgroup",
    "close inherited fds",
    "wait for parent",
    "become root in user namespace",
    "unshare cgroup namespace",
    "make mounts private",
    "mount root tmpfs",
    "pivot_root",
};
constexpr const char* kPostSteps[] = {
    "detach old root",    "remount root read-only",
    "set hostname",       "bring up lo",
    "set up fds",         "set rlimits",
    "lock securebits",    "drop capability bounding set",
    "set groups",         "switch to sandbox user",
    "clear capabilities", "check the host lives",
    "set no_new_privs",   "load seccomp filter",
    "exec tool runner",
};
constexpr int kPreCount = sizeof kPreSteps / sizeof kPreSteps[0];

// v1: moves this (single-threaded) process into its cgroups, fast (see cgroup.h).
int join_cgroup(const ChildConfig& c) {
  for (int fd : c.join_cgroup_fds) {
    if (fd < 0) continue;
    if (::write(fd, "0", 1) != 1) return errno;
    ::close(fd);
  }
  return 0;
}

int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// Returns 0 or an errno. Every step below has this shape.
int ok_or_errno(long rc) { return rc == 0 ? 0 : errno; }

class Steps {
 public:
  explicit Steps(const int* sync_fd) : sync_fd_(sync_fd) {}

  // Runs `fn`, timing it; on failure reports the step and exits.
  template <class Fn>
  void run(Fn&& fn) {
    const int64_t start = now_ns();
    const int err = fn();
    if (step_ < kMaxSteps) report_.step_ns[step_] = now_ns() - start;
    if (err != 0) fail(err);
    ++step_;
  }

  // Sends the timings; the caller execs next (EOF on the socket then tells the parent).
  void report_success() {
    report_.failed_step = -1;
    report_.step_count = static_cast<uint32_t>(step_ + 1);  // + the exec step itself
    send_report();
  }

  [[noreturn]] void fail(int err) {
    report_.failed_step = step_;
    report_.sys_errno = err;
    report_.step_count = static_cast<uint32_t>(step_ + 1);
    send_report();
    _exit(1);
  }

 private:
  void send_report() {
    while (::send(*sync_fd_, &report_, sizeof report_, MSG_NOSIGNAL) < 0 && errno == EINTR) {
    }
  }

  const int* sync_fd_;  // moves during "set up fds"
  ChildReport report_{};
  int step_ = 0;
};

// ---- pre steps ----

// The clone copied the host's whole fd table: a worker's several fds per live
// sandbox (protocol sockets, pidfds, uid-slot locks), thousands of them in a
// busy worker. All go now, before any limit is lowered (a RLIMIT_NOFILE below
// the highest open fd made "set up fds" fail with EMFILE at ~340 sandboxes),
// and so that no other sandbox's socket stays open in this one. Kept: the
// sync and protocol sockets and the workspace tree, which later steps use.
int close_inherited_fds(const ChildConfig& c) {
  constexpr int kKeep = 2 + ChildConfig::kMaxTrees;
  int keep[kKeep] = {c.sync_fd, c.proto_fd};
  for (int i = 0; i < ChildConfig::kMaxTrees; ++i) keep[2 + i] = c.tree_fds[i];
  // Ascending, negatives (absent) first: an insertion sort of a few.
  for (int i = 1; i < kKeep; ++i) {
    for (int j = i; j > 0 && keep[j - 1] > keep[j]; --j) {
      const int t = keep[j];
      keep[j] = keep[j - 1];
      keep[j - 1] = t;
    }
  }
  unsigned int from = 0;  // the first fd not yet handled
  for (int fd : keep) {
    if (fd < 0 || static_cast<unsigned int>(fd) < from) continue;
    if (static_cast<unsigned int>(fd) > from &&
        ::syscall(SYS_close_range, from, static_cast<unsigned int>(fd) - 1, 0) != 0) {
      return errno;
    }
    from = static_cast<unsigned int>(fd) + 1;
  }
  return ok_or_errno(::syscall(SYS_close_range, from, ~0U, 0));
}

int wait_for_parent(int sync_fd) {
  char go = 0;
  for (;;) {
    const ssize_t n = ::recv(sync_fd, &go, 1, 0);
    if (n == 1) return 0;
    if (n == 0) return ECHILD;  // parent went away
    if (errno != EINTR) return errno;
  }
}

// Credentials change through raw syscalls in this file: glibc's setresuid and
// friends, in a process that had threads, ask every other thread to change too
// (__nptl_setxid) and wait for replies that never come in the cloned child:
// sandboxes created from a multi-threaded worker hung here until set-up timed out.
int become_root() {
  if (::syscall(SYS_setresgid, 0, 0, 0) != 0) return errno;
  return ok_or_errno(::syscall(SYS_setresuid, 0, 0, 0));
}

int mount_root_tmpfs() {
  // Mounted over /tmp of this private mount namespace; the host's /tmp is untouched.
  return ok_or_errno(::mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755"));
}

int pivot_to_new_root() {
  if (::chdir("/tmp") != 0) return errno;
  if (::mkdir(kOldRoot + 1, 0700) != 0) return errno;
  if (::syscall(SYS_pivot_root, ".", kOldRoot + 1) != 0) return errno;
  return ok_or_errno(::chdir("/"));
}

// ---- mount plan ----

// Flags the kernel locks on a mount inherited from a more privileged namespace:
// a remount must repeat them or fail with EPERM.
unsigned long locked_flags(const char* path) {
  struct statvfs sv {};
  if (::statvfs(path, &sv) != 0) return 0;
  unsigned long f = 0;
  if (sv.f_flag & ST_NOSUID) f |= MS_NOSUID;
  if (sv.f_flag & ST_NODEV) f |= MS_NODEV;
  if (sv.f_flag & ST_NOEXEC) f |= MS_NOEXEC;
  if (sv.f_flag & ST_NOATIME) f |= MS_NOATIME;
  if (sv.f_flag & ST_NODIRATIME) f |= MS_NODIRATIME;
  if (sv.f_flag & ST_RELATIME) f |= MS_RELATIME;
  if (sv.f_flag & ST_RDONLY) f |= MS_RDONLY;
  return f;
}

int do_bind(const MountOp& op) {
  if (::mount(op.source.c_str(), op.target.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
    return errno;
  }
  // nosuid everywhere; nodev except on the device node binds; ro when asked.
  unsigned long flags = MS_REMOUNT | MS_BIND | MS_NOSUID | locked_flags(op.target.c_str());
  if (!op.allow_dev) flags |= MS_NODEV;
  if (op.readonly) flags |= MS_RDONLY;
  if (op.noexec) flags |= MS_NOEXEC;
  return ok_or_errno(::mount(nullptr, op.target.c_str(), nullptr, flags, nullptr));
}

int write_whole_file(const MountOp& op) {
  const int fd = ::open(op.target.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, op.mode);
  if (fd < 0) return errno;
  const char* p = op.content.data();
  size_t left = op.content.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return err;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  ::close(fd);
  return 0;
}

int run_op(const MountOp& op, const int* tree_fds) {
  const char* t = op.target.c_str();
  unsigned long common = MS_NOSUID | MS_NODEV | (op.noexec ? MS_NOEXEC : 0);
  switch (op.kind) {
    case Kind::kDir:
      return (::mkdir(t, op.mode) == 0 || errno == EEXIST) ? 0 : errno;
    case Kind::kFile: {
      const int fd = ::open(t, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
      if (fd < 0) return errno;
      ::close(fd);
      return 0;
    }
    case Kind::kWriteFile:
      return write_whole_file(op);
    case Kind::kSymlink:
      return ok_or_errno(::symlink(op.source.c_str(), t));
    case Kind::kBind:
      return do_bind(op);
    case Kind::kTmpfs:
      return ok_or_errno(
          ::mount("tmpfs", t, "tmpfs", common | (op.readonly ? MS_RDONLY : 0), op.data.c_str()));
    case Kind::kProc:
      return ok_or_errno(::mount("proc", t, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr));
    case Kind::kDevpts:
      return ok_or_errno(::mount("devpts", t, "devpts", MS_NOSUID | MS_NOEXEC, op.data.c_str()));
    case Kind::kRemountRo:
      return ok_or_errno(::mount(nullptr, t, nullptr,
                                 MS_REMOUNT | MS_BIND | MS_RDONLY | locked_flags(t), nullptr));
    case Kind::kAttachTree:
      if (op.tree < 0 || op.tree >= ChildConfig::kMaxTrees || tree_fds[op.tree] < 0) return EBADF;
      return ok_or_errno(
          ::syscall(SYS_move_mount, tree_fds[op.tree], "", AT_FDCWD, t, MOVE_MOUNT_F_EMPTY_PATH));
  }
  return EINVAL;
}

int run_plan_op(const MountOp& op, const int* tree_fds) {
  const int err = run_op(op, tree_fds);
  // Optional paths (a /proc file this kernel lacks, say) may be missing.
  if (err == ENOENT && op.optional) return 0;
  return err;
}

// ---- post steps ----

int detach_old_root() {
  if (::umount2(kOldRoot, MNT_DETACH) != 0) return errno;
  return ok_or_errno(::rmdir(kOldRoot));
}

int remount_root_readonly() {
  return ok_or_errno(::mount(nullptr, "/", nullptr,
                             MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr));
}

int set_hostname(const ChildConfig& c) {
  return ok_or_errno(::sethostname(c.hostname.data(), c.hostname.size()));
}

int bring_up_lo() {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  ifreq ifr{};
  std::memcpy(ifr.ifr_name, "lo", 3);
  int err = 0;
  if (::ioctl(fd, SIOCGIFFLAGS, &ifr) != 0) {
    err = errno;
  } else {
    ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP | IFF_RUNNING);
    if (::ioctl(fd, SIOCSIFFLAGS, &ifr) != 0) err = errno;
  }
  ::close(fd);
  return err;
}

int set_one_rlimit(int resource, uint64_t value) {
  const rlimit rl{value, value};
  return ok_or_errno(::setrlimit(resource, &rl));
}

int set_rlimits(const ChildConfig& c) {
  // No core dumps: a crashing tool must not write its memory anywhere.
  if (int e = set_one_rlimit(RLIMIT_CORE, 0)) return e;
  if (int e = set_one_rlimit(RLIMIT_NOFILE, c.rlimit_nofile)) return e;
  if (c.rlimit_fsize != 0) {
    if (int e = set_one_rlimit(RLIMIT_FSIZE, c.rlimit_fsize)) return e;
  }
  return 0;
}

// fd 0-2: /dev/null, 3: the protocol socket, the sync socket (CLOEXEC) above;
// every other fd is closed so nothing of the host leaks in.
int set_up_fds(const ChildConfig& c, int* sync_fd) {
  int sync = *sync_fd;
  if (sync <= 3) {
    sync = ::fcntl(sync, F_DUPFD_CLOEXEC, 10);
    if (sync < 0) return errno;
    *sync_fd = sync;
  }
  if (c.proto_fd != 3 && ::dup2(c.proto_fd, 3) < 0) return errno;
  if (c.proto_fd == 3 && ::fcntl(3, F_SETFD, 0) != 0) return errno;
  const int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull < 0) return errno;
  for (int fd = 0; fd <= 2; ++fd) {
    // 0-2 may be free (closed with the inherited fds): /dev/null can land on
    // one, and dup2 onto itself would leave its CLOEXEC set.
    if (fd == devnull) {
      if (::fcntl(fd, F_SETFD, 0) != 0) return errno;
    } else if (::dup2(devnull, fd) < 0) {
      return errno;
    }
  }
  if (devnull > 3 && devnull != sync) ::close(devnull);
  if (::syscall(SYS_close_range, 4, sync - 1, 0) != 0) return errno;
  return ok_or_errno(::syscall(SYS_close_range, sync + 1, ~0U, 0));
}

int lock_securebits() {
  // Root inside gains nothing from exec, and no later step can undo that.
  const unsigned long bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP_LOCKED |
                             SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
                             SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
  return ok_or_errno(::prctl(PR_SET_SECUREBITS, bits, 0, 0, 0));
}

int drop_bounding_set(const ChildConfig& c) {
  for (int cap = 0; cap <= c.cap_last_cap; ++cap) {
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) return errno;
  }
  return ok_or_errno(::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0));
}

int set_groups(const ChildConfig& c) {
  const gid_t groups[1] = {c.gid};
  return ok_or_errno(::syscall(SYS_setgroups, 1, groups));
}

int switch_user(const ChildConfig& c) {
  if (::syscall(SYS_setresgid, c.gid, c.gid, c.gid) != 0) return errno;
  return ok_or_errno(::syscall(SYS_setresuid, c.uid, c.uid, c.uid));
}

int clear_capabilities() {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  return ok_or_errno(::syscall(SYS_capset, &hdr, data));
}

// The credential change just cleared the parent-death signal, and it stays
// cleared: the kernel sends it when the *thread* that cloned us ends, and a
// worker's threads come and go while its sandboxes live on. From here the
// sandbox ends with the host *process*: its end of the protocol socket closes
// and the runner (PID 1) exits on EOF, which ends the PID namespace. Until the
// runner reads that socket, this check covers a host that died during set-up.
int check_host_lives(int sync_fd) {
  pollfd p{sync_fd, POLLIN, 0};
  if (::poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR))) return ECHILD;
  return 0;
}

}  // namespace

std::vector<std::string> child_step_names(const MountPlan& plan) {
  std::vector<std::string> names(std::begin(kPreSteps), std::end(kPreSteps));
  for (const auto& op : plan.ops) names.push_back(op.describe());
  names.insert(names.end(), std::begin(kPostSteps), std::end(kPostSteps));
  return names;
}

void run_child(const ChildConfig& c) {
  static_assert(kPreCount == 8, "keep kPreSteps in step with the calls below");
  int sync_fd = c.sync_fd;
  // Die with the host during set-up (the cloning thread waits in create() until
  // it is done, so its end means the host's end); cleared with the credentials.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  Steps s(&sync_fd);
  // Before anything is charged or counted, and before the cgroup namespace.
  s.run([&] { return join_cgroup(c); });
  s.run([&] { return close_inherited_fds(c); });
  s.run([&] { return wait_for_parent(sync_fd); });
  s.run([] { return become_root(); });
  // After the parent put us in our cgroup, so the namespace's root is that cgroup.
  s.run([] { return ok_or_errno(::unshare(CLONE_NEWCGROUP)); });
  // Nothing mounted here may propagate back to the host.
  s.run([] { return ok_or_errno(::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr)); });
  s.run([] { return mount_root_tmpfs(); });
  s.run([] { return pivot_to_new_root(); });
  for (const auto& op : c.plan->ops) s.run([&] { return run_plan_op(op, c.tree_fds); });
  s.run([] { return detach_old_root(); });
  s.run([] { return remount_root_readonly(); });
  s.run([&] { return set_hostname(c); });
  s.run([&] { return c.own_network ? bring_up_lo() : 0; });
  // fds before limits: nofile may be lower than the fds the child still holds.
  s.run([&] { return set_up_fds(c, &sync_fd); });
  s.run([&] { return set_rlimits(c); });
  s.run([] { return lock_securebits(); });
  s.run([&] { return drop_bounding_set(c); });
  s.run([&] { return set_groups(c); });
  s.run([&] { return switch_user(c); });
  s.run([] { return clear_capabilities(); });
  s.run([&] { return check_host_lives(sync_fd); });
  // Required for an unprivileged seccomp filter, and blocks setuid binaries.
  s.run([] { return ok_or_errno(::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)); });
  s.run([&] { return host::load_seccomp_filters(*c.seccomp); });
  s.report_success();
  ::execve(kRunnerPathInSandbox, c.runner_argv.data(), c.runner_envp.data());
  s.fail(errno);
}

}  // namespace rf::native
