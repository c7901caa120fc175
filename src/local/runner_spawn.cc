#include "local/runner_spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

namespace rf::local {
namespace {

// The child's steps, in order; a failure reports {index, errno} on a pipe.
enum ChildStep : int32_t {
  kStepGroup,
  kStepDeathSignal,
  kStepFds,
  kStepRlimits,
  kStepCwd,
  kStepExec,
};
constexpr const char* kStepNames[] = {
    "set process group", "set parent death signal", "set up fds",
    "set rlimits",       "enter working directory", "exec tool runner",
};

struct ChildFailure {
  int32_t step = 0;
  int32_t err = 0;
};

// Everything the child needs, prepared before fork: after fork the worker may
// hold locks of other threads, so the child makes only syscalls.
struct ChildPlan {
  std::vector<char*> argv;
  char* envp[1] = {nullptr};
  const char* cwd = nullptr;
  int null_fd = -1, sock_fd = -1, report_fd = -1;  // all above 9, close-on-exec
  pid_t parent = 0;
  rlimit nofile{};
};

// Fds above 9, so that putting 0-3 in place cannot overwrite one of them.
Result<UniqueFd> above_stdio(int fd, const char* what) {
  UniqueFd owned(fd);
  if (!owned) return sys_error(std::string("set up fds: ") + what);
  UniqueFd high(::fcntl(owned.get(), F_DUPFD_CLOEXEC, 10));
  if (!high) return sys_error(std::string("set up fds: ") + what);
  return high;
}

[[noreturn]] void fail(const ChildPlan& p, ChildStep step) {
  const ChildFailure f{step, errno};
  (void)!::write(p.report_fd, &f, sizeof f);
  ::_exit(127);
}

void reset_signals() {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &dfl, nullptr);  // EINVAL for some: fine
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

[[noreturn]] void run_child(const ChildPlan& p) {
  if (::setpgid(0, 0) != 0) fail(p, kStepGroup);
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) fail(p, kStepDeathSignal);
  if (::getppid() != p.parent) {  // the worker died before the signal was armed
    errno = ESRCH;
    fail(p, kStepDeathSignal);
  }
  if (::dup2(p.null_fd, 0) < 0 || ::dup2(p.null_fd, 1) < 0 || ::dup2(p.null_fd, 2) < 0 ||
      ::dup2(p.sock_fd, 3) < 0) {
    fail(p, kStepFds);
  }
  // Only 0-3 reach the runner; the report pipe stays until exec closes it.
  const auto report = static_cast<unsigned>(p.report_fd);
  if (::close_range(4, report - 1, 0) != 0 || ::close_range(report + 1, ~0U, 0) != 0) {
    fail(p, kStepFds);
  }
  const rlimit no_core{0, 0};
  if (::setrlimit(RLIMIT_NOFILE, &p.nofile) != 0 || ::setrlimit(RLIMIT_CORE, &no_core) != 0) {
    fail(p, kStepRlimits);
  }
  if (::chdir(p.cwd) != 0) fail(p, kStepCwd);
  reset_signals();
  ::execve(p.argv[0], p.argv.data(), const_cast<char**>(p.envp));
  fail(p, kStepExec);
}

rlimit nofile_limit(uint64_t wanted) {
  rlimit current{};
  ::getrlimit(RLIMIT_NOFILE, &current);
  const rlim_t n = std::min<rlim_t>(static_cast<rlim_t>(wanted), current.rlim_max);
  return rlimit{n, n};
}

// Waits for the child's report: EOF means it exec'd the runner.
Status read_child_report(int report_fd, const std::string& runner_path) {
  ChildFailure f;
  ssize_t n;
  while ((n = ::read(report_fd, &f, sizeof f)) < 0 && errno == EINTR) {
  }
  if (n < 0) return sys_error("exec tool runner: read report");
  if (n == 0) return ok_status();
  if (n != static_cast<ssize_t>(sizeof f) || f.step < 0 || f.step > kStepExec) {
    return make_error("exec tool runner", "garbled report from the child");
  }
  return Error{kStepNames[f.step], f.step == kStepExec ? runner_path : "", f.err};
}

void kill_and_reap(pid_t pid) {
  ::kill(pid, SIGKILL);
  while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

Result<SpawnedRunner> spawn_runner(const RunnerLaunch& launch) {
  int sv[2], rp[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return sys_error("socketpair");
  UniqueFd host(sv[0]);
  auto sock = above_stdio(sv[1], "protocol socket");
  if (!sock) return sock.take_error();
  auto null = above_stdio(::open("/dev/null", O_RDWR | O_CLOEXEC), "/dev/null");
  if (!null) return null.take_error();
  if (::pipe2(rp, O_CLOEXEC) != 0) return sys_error("set up fds: report pipe");
  UniqueFd report_r(rp[0]);
  auto report_w = above_stdio(rp[1], "report pipe");
  if (!report_w) return report_w.take_error();

  std::string arg0 = launch.runner_path, fd_flag = "--fd", fd3 = "3", root_flag = "--root";
  std::string root = launch.root;
  ChildPlan plan;
  plan.argv = {arg0.data(), fd_flag.data(), fd3.data(), root_flag.data(), root.data(), nullptr};
  plan.cwd = launch.cwd.c_str();
  plan.null_fd = null->get();
  plan.sock_fd = sock->get();
  plan.report_fd = report_w->get();
  plan.parent = ::getpid();
  plan.nofile = nofile_limit(launch.nofile);

  const pid_t pid = ::fork();
  if (pid < 0) return sys_error("fork");
  if (pid == 0) run_child(plan);
  report_w->reset();
  sock->reset();
  (void)::setpgid(pid, pid);  // also from here: no window in which it is in ours
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  if (!pidfd) {
    const Error e = sys_error("pidfd_open");
    kill_and_reap(pid);
    return e;
  }
  if (auto s = read_child_report(report_r.get(), launch.runner_path); !s) {
    kill_and_reap(pid);
    return s.take_error();
  }
  return SpawnedRunner{pid, std::move(pidfd), std::move(host)};
}

}  // namespace rf::local
