#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <span>

#include "core/unique_fd.h"
#include "host/seccomp_profile.h"

namespace rf::host {
namespace {

// Docker's default allowlist for a container without extra capabilities (x86_64
// names only), minus io_uring_*, ptrace, process_vm_*, name_to_handle_at, adjtimex,
// clock_adjtime and modify_ldt: big kernel attack surface, not needed by tools.
// socket, socketpair and personality are allowed per argument (see below).
constexpr const char* kAllowedSyscalls[] = {
    // Files and directories.
    "access", "cachestat", "chdir", "chmod", "chown", "close", "close_range", "copy_file_range",
    "creat", "dup", "dup2", "dup3", "faccessat", "faccessat2", "fadvise64", "fallocate", "fchdir",
    "fchmod", "fchmodat", "fchmodat2", "fchown", "fchownat", "fcntl", "fdatasync", "flock", "fstat",
    "fstatfs", "fsync", "ftruncate", "futimesat", "getcwd", "getdents", "getdents64", "lchown",
    "link", "linkat", "lseek", "lstat", "mkdir", "mkdirat", "mknod", "mknodat", "newfstatat",
    "open", "openat", "openat2", "pread64", "preadv", "preadv2", "pwrite64", "pwritev", "pwritev2",
    "read", "readahead", "readlink", "readlinkat", "readv", "rename", "renameat", "renameat2",
    "rmdir", "sendfile", "splice", "stat", "statfs", "statx", "symlink", "symlinkat", "sync",
    "sync_file_range", "syncfs", "tee", "truncate", "umask", "unlink", "unlinkat", "utime",
    "utimensat", "utimes", "vmsplice", "write", "writev",
    // Extended attributes.
    "fgetxattr", "flistxattr", "fremovexattr", "fsetxattr", "getxattr", "lgetxattr", "listxattr",
    "llistxattr", "lremovexattr", "lsetxattr", "removexattr", "setxattr",
    // File notification (fanotify_init itself stays denied).
    "fanotify_mark", "inotify_add_watch", "inotify_init", "inotify_init1", "inotify_rm_watch",
    // Polling and event fds.
    "epoll_create", "epoll_create1", "epoll_ctl", "epoll_pwait", "epoll_pwait2", "epoll_wait",
    "eventfd", "eventfd2", "pipe", "pipe2", "poll", "ppoll", "pselect6", "select", "signalfd",
    "signalfd4", "timerfd_create", "timerfd_gettime", "timerfd_settime",
    // Sockets (socket and socketpair themselves are allowed per family).
    "accept", "accept4", "bind", "connect", "getpeername", "getsockname", "getsockopt", "listen",
    "recvfrom", "recvmmsg", "recvmsg", "sendmmsg", "sendmsg", "sendto", "setsockopt", "shutdown",
    // Terminal and device control (filter 2 removes TIOCSTI and TIOCLINUX).
    "ioctl",
    // Memory.
    "brk", "madvise", "map_shadow_stack", "membarrier", "memfd_create", "memfd_secret", "mincore",
    "mlock", "mlock2", "mlockall", "mmap", "mprotect", "mremap", "mseal", "msync", "munlock",
    "munlockall", "munmap", "pkey_alloc", "pkey_free", "pkey_mprotect", "remap_file_pages",
    // Processes (filter 2 restricts clone and clone3).
    "arch_prctl", "clone", "clone3", "execve", "execveat", "exit", "exit_group", "fork",
    "get_robust_list", "get_thread_area", "getpgid", "getpgrp", "getpid", "getppid", "getpriority",
    "getrlimit", "getrusage", "getsid", "gettid", "ioprio_get", "ioprio_set", "prctl", "prlimit64",
    "process_mrelease", "restart_syscall", "rseq", "set_robust_list", "set_thread_area",
    "set_tid_address", "setpgid", "setpriority", "setrlimit", "setsid", "vfork", "wait4", "waitid",
    // Credentials (changing them still needs capabilities the sandbox does not have).
    "capget", "capset", "getegid", "geteuid", "getgid", "getgroups", "getresgid", "getresuid",
    "getuid", "setfsgid", "setfsuid", "setgid", "setgroups", "setregid", "setresgid", "setresuid",
    "setreuid", "setuid",
    // Signals.
    "kill", "pause", "pidfd_open", "pidfd_send_signal", "rt_sigaction", "rt_sigpending",
    "rt_sigprocmask", "rt_sigqueueinfo", "rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait",
    "rt_tgsigqueueinfo", "sigaltstack", "tgkill", "tkill",
    // Threads, futexes and scheduling.
    "futex", "futex_requeue", "futex_wait", "futex_waitv", "futex_wake", "getcpu",
    "sched_get_priority_max", "sched_get_priority_min", "sched_getaffinity", "sched_getattr",
    "sched_getparam", "sched_getscheduler", "sched_rr_get_interval", "sched_setaffinity",
    "sched_setattr", "sched_setparam", "sched_setscheduler", "sched_yield",
    // Time (reading it and timers; setting the clock stays denied).
    "alarm", "clock_getres", "clock_gettime", "clock_nanosleep", "getitimer", "gettimeofday",
    "nanosleep", "setitimer", "time", "timer_create", "timer_delete", "timer_getoverrun",
    "timer_gettime", "timer_settime", "times",
    // System V and POSIX IPC (scoped to the sandbox's IPC namespace).
    "mq_getsetattr", "mq_notify", "mq_open", "mq_timedreceive", "mq_timedsend", "mq_unlink",
    "msgctl", "msgget", "msgrcv", "msgsnd", "semctl", "semget", "semop", "semtimedop", "shmat",
    "shmctl", "shmdt", "shmget",
    // Asynchronous I/O (the old AIO interface, not io_uring).
    "io_cancel", "io_destroy", "io_getevents", "io_pgetevents", "io_setup", "io_submit",
    // Miscellaneous.
    "getrandom", "landlock_add_rule", "landlock_create_ruleset", "landlock_restrict_self",
    "seccomp", "sysinfo", "uname"};
// (mseal, and any name this libseccomp does not know, is skipped: it stays denied.)

// Socket families a tool needs; AF_ALG, AF_VSOCK, AF_PACKET and the rest are rarely used,
// poorly audited kernel code or reach outside the sandbox (vsock), so they are denied.
constexpr uint64_t kAllowedSocketFamilies[] = {AF_UNIX, AF_INET, AF_INET6, AF_NETLINK};

// Docker's safe personalities: Linux, PER_LINUX32, UNAME26, both, and the 0xffffffff
// query; anything else (ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC...) weakens hardening.
constexpr uint64_t kAllowedPersonalities[] = {0x0, 0x8, 0x20000, 0x20008, 0xffffffff};

// Creating namespaces exposes kernel code written for root (user namespaces above all).
// CLONE_NEWTIME (0x80) sits in clone()'s exit-signal byte, where no valid signal sets it.
constexpr uint64_t kNamespaceCloneFlags[] = {CLONE_NEWNS,     CLONE_NEWUTS, CLONE_NEWIPC,
                                             CLONE_NEWUSER,   CLONE_NEWPID, CLONE_NEWNET,
                                             CLONE_NEWCGROUP, CLONE_NEWTIME};

// Terminal input injection (TIOCSTI) and console control (TIOCLINUX) reach past the
// sandbox through an inherited terminal.
constexpr uint64_t kDeniedIoctls[] = {TIOCSTI, TIOCLINUX};

struct FilterDeleter {
  void operator()(void* ctx) const { seccomp_release(ctx); }
};
using Filter = std::unique_ptr<void, FilterDeleter>;

struct CompiledProfile {
  Filter allowlist;
  Filter arg_rules;
};

// libseccomp returns -errno.
Status check(int rc, const std::string& step) {
  if (rc < 0) return Error{"seccomp", step, -rc};
  return ok_status();
}

Status add_rule(void* ctx, uint32_t action, int nr, std::initializer_list<scmp_arg_cmp> args) {
  const int rc =
      seccomp_rule_add_array(ctx, action, nr, static_cast<unsigned>(args.size()), args.begin());
  return check(rc, "add rule for syscall " + std::to_string(nr));
}

Result<Filter> new_filter(uint32_t default_action) {
  // The rules below use x86_64 numbers and argument layouts and were reviewed only there.
  if (seccomp_arch_native() != SCMP_ARCH_X86_64) {
    return make_error("seccomp", "the default profile supports only x86_64");
  }
  Filter ctx(seccomp_init(default_action));  // native arch only
  if (!ctx) return make_error("seccomp", "seccomp_init failed");
  // i386 (int 0x80) and x32 syscalls have other numbers and would slip past the rules.
  RF_TRY(check(seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS),
               "set bad-arch action"));
  // The caller sets no_new_privs itself, just before loading.
  RF_TRY(check(seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_NNP, 0), "clear NNP"));
  // A binary search over ~290 syscalls instead of a linear scan on every syscall.
  RF_TRY(check(seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_OPTIMIZE, 2), "set optimize"));
  return ctx;
}

Status allow_named_syscalls(void* ctx) {
  for (const char* name : kAllowedSyscalls) {
    const int nr = seccomp_syscall_resolve_name(name);
    // Unknown to this libseccomp (a newer syscall) or absent on x86_64: stays denied.
    if (nr < 0) continue;
    RF_TRY(add_rule(ctx, SCMP_ACT_ALLOW, nr, {}));
  }
  return ok_status();
}

// One rule per allowed value: libseccomp ORs separate rules but ANDs comparisons.
// The match is on all 64 bits, so a value with stray high bits is refused (fails closed).
Status allow_arg0_values(void* ctx, int nr, std::span<const uint64_t> values) {
  for (const uint64_t value : values) {
    RF_TRY(add_rule(ctx, SCMP_ACT_ALLOW, nr, {{0, SCMP_CMP_EQ, value, 0}}));
  }
  return ok_status();
}

Result<Filter> build_allowlist() {
  // Anything not listed fails with EPERM, which tools handle better than a kill.
  auto ctx = new_filter(SCMP_ACT_ERRNO(EPERM));
  if (!ctx) return ctx.take_error();
  RF_TRY(allow_named_syscalls(ctx->get()));
  RF_TRY(allow_arg0_values(ctx->get(), SCMP_SYS(socket), kAllowedSocketFamilies));
  RF_TRY(allow_arg0_values(ctx->get(), SCMP_SYS(socketpair), kAllowedSocketFamilies));
  RF_TRY(allow_arg0_values(ctx->get(), SCMP_SYS(personality), kAllowedPersonalities));
  return ctx;
}

Status deny_terminal_ioctls(void* ctx) {
  for (const uint64_t cmd : kDeniedIoctls) {
    // The kernel truncates cmd to 32 bits, so 0x1_00005412 is TIOCSTI too: mask it.
    RF_TRY(add_rule(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl),
                    {{1, SCMP_CMP_MASKED_EQ, 0xffffffff, cmd}}));
  }
  return ok_status();
}

Status deny_namespace_clones(void* ctx) {
  for (const uint64_t flag : kNamespaceCloneFlags) {
    RF_TRY(add_rule(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone),
                    {{0, SCMP_CMP_MASKED_EQ, flag, flag}}));
  }
  // clone3 passes its flags in memory seccomp cannot read; ENOSYS makes libc fall back
  // to clone, whose flags the rules above check.
  return add_rule(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), {});
}

Result<Filter> build_arg_rules() {
  auto ctx = new_filter(SCMP_ACT_ALLOW);  // filter 1 already denies everything else
  if (!ctx) return ctx.take_error();
  RF_TRY(deny_terminal_ioctls(ctx->get()));
  RF_TRY(deny_namespace_clones(ctx->get()));
  return ctx;
}

Result<CompiledProfile> compile_profile(const std::string& name) {
  if (name != "default") {
    return make_error("seccomp", "unknown profile \"" + name + "\" (available: default)");
  }
  auto allowlist = build_allowlist();
  if (!allowlist) return allowlist.take_error();
  auto arg_rules = build_arg_rules();
  if (!arg_rules) return arg_rules.take_error();
  return CompiledProfile{std::move(*allowlist), std::move(*arg_rules)};
}

Result<std::string> read_all_from_start(int fd) {
  std::string out;
  char buf[8192];
  for (off_t offset = 0;;) {
    const ssize_t n = ::pread(fd, buf, sizeof buf, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sys_error("seccomp: read export");
    if (n == 0) return out;
    out.append(buf, static_cast<size_t>(n));
    offset += n;
  }
}

// libseccomp 2.5 exports only to a file descriptor, so go through a memfd.
Result<std::string> export_filter(int (*exporter)(const scmp_filter_ctx, int), void* ctx) {
  UniqueFd fd(::memfd_create("rf-seccomp-export", MFD_CLOEXEC));
  if (!fd) return sys_error("seccomp: memfd_create");
  RF_TRY(check(exporter(ctx, fd.get()), "export filter"));
  return read_all_from_start(fd.get());
}

Result<std::vector<sock_filter>> export_bpf(void* ctx) {
  auto bytes = export_filter(seccomp_export_bpf, ctx);
  if (!bytes) return bytes.take_error();
  if (bytes->empty() || bytes->size() % sizeof(sock_filter) != 0) {
    return make_error("seccomp", "exported BPF has a bad size: " + std::to_string(bytes->size()));
  }
  std::vector<sock_filter> prog(bytes->size() / sizeof(sock_filter));
  std::memcpy(prog.data(), bytes->data(), bytes->size());
  return prog;
}

}  // namespace

Result<SeccompFilters> compile_seccomp_profile(const std::string& name) {
  auto profile = compile_profile(name);
  if (!profile) return profile.take_error();
  auto allowlist = export_bpf(profile->allowlist.get());
  if (!allowlist) return allowlist.take_error();
  auto arg_rules = export_bpf(profile->arg_rules.get());
  if (!arg_rules) return arg_rules.take_error();
  return SeccompFilters{std::move(*allowlist), std::move(*arg_rules)};
}

Result<std::string> seccomp_profile_text(const std::string& name) {
  auto profile = compile_profile(name);
  if (!profile) return profile.take_error();
  auto allowlist = export_filter(seccomp_export_pfc, profile->allowlist.get());
  if (!allowlist) return allowlist.take_error();
  auto arg_rules = export_filter(seccomp_export_pfc, profile->arg_rules.get());
  if (!arg_rules) return arg_rules.take_error();
  return "# filter 1: allowlist\n" + *allowlist + "# filter 2: argument rules\n" + *arg_rules;
}

}  // namespace rf::host
