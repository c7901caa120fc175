#include "runner/supervisor.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "runner/call_handoff.h"
#include "runner/self_probe.h"

namespace rf::runner {

// Children of `pid` (every thread's), from /proc/<pid>/task/<tid>/children.
bool children_of(pid_t pid, std::vector<pid_t>* out) {
  const std::string task = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = ::opendir(task.c_str());
  if (d == nullptr) return false;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const std::string path = task + "/" + e->d_name + "/children";
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    std::string text;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
    ::close(fd);
    const char* p = text.c_str();
    while (*p != '\0') {
      char* end = nullptr;
      const long child = std::strtol(p, &end, 10);
      if (end == p) break;
      if (child > 0) out->push_back(static_cast<pid_t>(child));
      p = end;
    }
  }
  ::closedir(d);
  return true;
}

// Parents before their children: a killed parent forks no more, and children
// it had reparent to a subreaper and are found on its next round.
void kill_tree(pid_t pid) {
  std::vector<pid_t> todo{pid};
  while (!todo.empty()) {
    const pid_t p = todo.back();
    todo.pop_back();
    ::kill(p, SIGKILL);
    children_of(p, &todo);
  }
}

namespace {

int64_t micros(const timeval& tv) { return int64_t{tv.tv_sec} * 1'000'000 + tv.tv_usec; }

int64_t now_us() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000 + ts.tv_nsec / 1000;
}

// ---- the command child ----

// The kernel's own sigaction, through the raw syscall: glibc's refuses the
// signals it reserves (32 and 33), which a sanitizer build's runner has
// ignored; every one a command gets must be clean.
struct KernelSigaction {
  void (*handler)(int);
  unsigned long flags;
  void (*restorer)();
  uint64_t mask;
};

int kernel_sigaction(int sig, const KernelSigaction* act, KernelSigaction* old) {
  return static_cast<int>(::syscall(SYS_rt_sigaction, sig, act, old, sizeof(uint64_t)));
}

// The signals this process ignores (SIG_IGN), read once when it starts serving.
bool ignored_signals[NSIG] = {};

void note_ignored_signals() {
  for (int sig = 1; sig < NSIG; ++sig) {
    KernelSigaction sa{};
    ignored_signals[sig] = kernel_sigaction(sig, nullptr, &sa) == 0 && sa.handler == SIG_IGN;
  }
}

// How the command child tells the supervisor it could not exec. A vfork
// child shares the supervisor's memory until it execs or exits, so it writes
// the failure there, as glibc's posix_spawn does: no pipe to make, read and
// close per call (4 system calls). ThreadSanitizer turns vfork into fork, and
// the self-probe's child is forked, so for them a close-on-exec pipe carries
// the failure instead.
#if defined(__SANITIZE_THREAD__)
constexpr bool kVforkSharesMemory = false;
#else
constexpr bool kVforkSharesMemory = true;
#endif

struct FailureChannel {
  bool shares_memory = false;
  volatile ExecFailure shared{kStageNone, 0};  // written by the child (vfork)
  int pipe[2] = {-1, -1};                      // or sent down this (fork)

  bool open(bool vforked) {
    shares_memory = kVforkSharesMemory && vforked;
    return shares_memory || ::pipe2(pipe, O_CLOEXEC) == 0;
  }
  // In the supervisor, once the child has exec'd or exited: what it said
  // (kStageNone when it exec'd).
  ExecFailure take() {
    ExecFailure f{kStageNone, 0};
    if (shares_memory) {
      f = ExecFailure{shared.stage, shared.err};
    } else {
      close_end(1);
      ssize_t n;
      while ((n = ::read(pipe[0], &f, sizeof f)) < 0 && errno == EINTR) {
      }
      if (n != static_cast<ssize_t>(sizeof f)) f = ExecFailure{kStageNone, 0};  // EOF: it exec'd
    }
    return f;
  }
  void close_end(int i) {
    if (pipe[i] >= 0) ::close(std::exchange(pipe[i], -1));
  }
  // The supervisor's copies (the child never returns here: it execs or _exits).
  ~FailureChannel() {
    close_end(0);
    close_end(1);
  }
};

[[noreturn]] void fail_exec(FailureChannel* ch, int32_t stage) {
  if (ch->shares_memory) {
    ch->shared.err = errno;
    ch->shared.stage = stage;
  } else {
    const ExecFailure f{stage, errno};
    (void)!::write(ch->pipe[1], &f, sizeof f);
  }
  ::_exit(127);
}

[[noreturn]] void run_command(const ChildArgs& a, FailureChannel* ch) {
  // The call's own process group (signals reach its whole job). On a pty, a
  // session of its own too, whose controlling tty the pty becomes. Without
  // one, no session: setsid made a scheduler autogroup per call (1% of all
  // CPU at 1,700 calls/s), and a command that leads no session can never
  // take a terminal it opens as its controlling tty.
  if (a.pty ? ::setsid() < 0 : ::setpgid(0, 0) != 0) fail_exec(ch, kStageSetup);
  if (a.pty && ::ioctl(a.in, TIOCSCTTY, 0) != 0) fail_exec(ch, kStageSetup);
  if (::dup2(a.in, 0) < 0 || ::dup2(a.out, 1) < 0 || ::dup2(a.err, 2) < 0) {
    fail_exec(ch, kStageSetup);
  }
  // The runner ignores SIGPIPE and blocks SIGCHLD/SIGTERM: a command starts
  // clean. Handlers go at exec by themselves; what is ignored stays, so only
  // that is reset (one syscall a call instead of 64).
  const KernelSigaction dfl{};  // SIG_DFL, no flags, nothing blocked
  for (int sig = 1; sig < NSIG; ++sig) {
    if (ignored_signals[sig]) kernel_sigaction(sig, &dfl, nullptr);
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  // Only 0, 1 and 2 reach the command (a failure pipe is close-on-exec: it
  // stays for its write, and goes at exec by itself).
  const int keep = ch->pipe[1];
  if ((keep > 3 && ::close_range(3, static_cast<unsigned>(keep) - 1, 0) != 0) ||
      ::close_range(static_cast<unsigned>(std::max(keep, 2)) + 1, ~0U, 0) != 0) {
    fail_exec(ch, kStageSetup);
  }
  if (::chdir(a.cwd) != 0) fail_exec(ch, kStageCwd);
  if (a.self_probe) {
    // This binary's self-probe, here instead of exec'ing the binary again
    // (runner/self_probe.h, "In a fork"). The pipe goes as exec would close it.
    ch->close_end(1);
    environ = const_cast<char**>(a.envp.data());
    ::_exit(self_probe_main(ProbeStart::kForked));
  }
  int err = ENOENT;
  for (const char* path : a.candidates) {
    ::execve(path, a.argv.data(), a.envp.data());
    if (errno == EACCES) {
      err = EACCES;  // like execvp: remember it, but try the rest of PATH
    } else if (errno != ENOENT && errno != ENOTDIR) {
      err = errno;
      break;
    }
  }
  errno = err;
  fail_exec(ch, kStageExec);
}

// ---- the supervisor ----

void close_all_but(std::vector<int> keep) {
  std::sort(keep.begin(), keep.end());
  unsigned next = 3;
  for (int fd : keep) {
    const auto u = static_cast<unsigned>(fd);
    if (fd < 0 || u < next) continue;
    if (u > next) ::close_range(next, u - 1, 0);
    next = u + 1;
  }
  ::close_range(next, ~0U, 0);
}

// SIGKILLs every process below the supervisor (see kill_tree).
void kill_descendants(pid_t command) {
  std::vector<pid_t> children;
  if (!children_of(::getpid(), &children)) {
    // No /proc: the command's process group is the best we can reach.
    if (command > 0) ::kill(-command, SIGKILL);
    return;
  }
  for (pid_t child : children) kill_tree(child);
}

void record_command(Report* r, int status, const rusage& ru, int64_t start_us) {
  r->wait_status = status;
  r->wall_us = now_us() - start_us;
  r->user_us = micros(ru.ru_utime);
  r->sys_us = micros(ru.ru_stime);
  r->max_rss_kb = ru.ru_maxrss;
}

// SIGCHLD, blocked in the supervisor and read from this signalfd (made once
// when it starts serving: not three system calls per call); -1 if it could
// not be made, and the wait polls.
int chld_fd = -1;

void watch_children() {
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &chld, nullptr);
  chld_fd = ::signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
}

// Waits for the command, killing the tree early if the runner's end of
// `sock` reaches EOF (it shut it, or died). True if nothing is left below the
// supervisor (wait4 said ECHILD).
bool supervise(pid_t command, int sock, int64_t start_us, Report* r) {
  for (;;) {
    pollfd fds[2] = {{chld_fd, POLLIN, 0}, {sock, POLLIN, 0}};
    if (::poll(fds, 2, chld_fd < 0 ? 50 : -1) < 0 && errno != EINTR) return false;
    if (fds[1].revents != 0) {
      // The runner asked (timeout, output cap, shutdown) or died: end the call
      // now. It sends nothing during a call, so this is its EOF, and it stays:
      // the next receive_call reads it and the supervisor exits.
      r->killed = 1;
      kill_descendants(command);
      sock = -1;  // poll ignores negative fds
    }
    // SIGCHLD does not queue: one read empties it, and waking once more for a
    // child of this round that wait4 below already reaps costs nothing.
    signalfd_siginfo si[4];
    if (fds[0].revents != 0) (void)!::read(chld_fd, si, sizeof si);
    bool done = false;
    int status = 0;
    rusage ru{};
    pid_t pid;
    while ((pid = ::wait4(-1, &status, WNOHANG, &ru)) > 0) {
      if (pid == command) {
        record_command(r, status, ru, start_us);
        done = true;
      }
    }
    if (pid < 0 && errno == ECHILD) return true;
    if (done) return false;
  }
}

// Kills and reaps until nothing is left below the supervisor.
void reap_everything(pid_t command) {
  for (;;) {
    kill_descendants(command);
    if (::wait4(-1, nullptr, 0, nullptr) < 0 && errno != EINTR) return;  // ECHILD: all gone
  }
}

// Forks the command and waits until it has exec'd; returns its pid, or -1 with
// the failure in `r`. The call's stdio goes with the command.
pid_t start_command(ReceivedCall& call, Report* r) {
  const ChildArgs a = call.args();
  FailureChannel ch;
  if (!ch.open(/*vforked=*/!a.self_probe)) {
    r->exec_stage = kStageSetup;
    r->exec_errno = errno;
    return -1;
  }
  // vfork: no page-table copy; run_command makes only syscalls and then execs
  // or _exits, and this process goes on only after that. The self-probe runs
  // this binary's own code in the child, which allocates: fork.
  const pid_t command = a.self_probe ? ::fork() : ::vfork();
  if (command == 0) run_command(a, &ch);
  const int fork_errno = errno;
  // The command holds its own copies now: its stdout reaches EOF with it.
  call.in.reset();
  call.out.reset();
  call.err.reset();
  const ExecFailure f = command < 0 ? ExecFailure{kStageSetup, fork_errno} : ch.take();
  r->exec_stage = f.stage;
  r->exec_errno = f.err;
  return command;
}

// A record for the runner. MSG_NOSIGNAL: a runner gone is no signal here.
void report(int sock, const Report& r) { (void)!::send(sock, &r, sizeof r, MSG_NOSIGNAL); }

// One call, start to end: kStarted once the command runs, kDone once nothing
// of it is left.
void supervise_call(ReceivedCall& call, int sock) {
  Report r;
  r.kind = kDone;
  const int64_t start_us = now_us();
  const pid_t command = start_command(call, &r);
  if (command > 0 && r.exec_stage == kStageNone) {
    Report started;
    started.kind = kStarted;
    started.pid = command;
    report(sock, started);
  }
  bool none_left = command > 0 && supervise(command, sock, start_us, &r);
  // Whatever the command left alive is our child now (orphans reparent to the
  // subreaper as their parent exits): none, and the /proc walk is not needed.
  if (!none_left) none_left = ::wait4(-1, nullptr, WNOHANG, nullptr) < 0 && errno == ECHILD;
  if (!none_left) reap_everything(command);
  report(sock, r);
}

}  // namespace

[[noreturn]] void serve_calls(int sock) {
  close_all_but({sock});
  // Subreaper: whatever a command leaves behind (daemonised, setsid) reparents
  // to us instead of PID 1, so it can be found and killed before its call ends.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  note_ignored_signals();
  watch_children();
  for (;;) {
    // Waiting in poll, not in recvmsg: a blocked recvmsg sleeps on the
    // socket's wait queue unkeyed, and the runner reading this supervisor's
    // kDone wakes that queue (the kernel's write-space wake-up for our side),
    // a wake-up and a context switch for nothing per call. poll's wait
    // entries only wake for what they asked.
    pollfd p{sock, POLLIN, 0};
    while (::poll(&p, 1, -1) < 0 && errno == EINTR) {
    }
    auto call = receive_call(sock);
    // The runner closed our socket (or it broke): no call is running, so
    // nothing is left below us.
    if (!call || !*call) ::_exit(0);
    // The runner waits for this before it lets the call's descriptors go.
    if (::write(sock, &kCallAck, 1) != 1) ::_exit(0);
    supervise_call(**call, sock);
  }
}

}  // namespace rf::runner
