#include "runner/command_child.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "runner/call_domain.h"
#include "runner/self_probe.h"

namespace rf::runner {

namespace {

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

// The signals this process ignores (SIG_IGN), read once before its first command.
bool ignored_signals[NSIG] = {};

void note_ignored_signals() {
  for (int sig = 1; sig < NSIG; ++sig) {
    KernelSigaction sa{};
    ignored_signals[sig] = kernel_sigaction(sig, nullptr, &sa) == 0 && sa.handler == SIG_IGN;
  }
}

// How the command child tells its parent (a supervisor, or the runner) it
// could not exec. A vfork child shares its parent's memory until it execs or exits, so it writes
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
  // In the parent, once the child has exec'd or exited: what it said
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
  // The parent's copies (the child never returns here: it execs or _exits).
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
  // A Landlock domain of the call's own, before the descriptors go (the
  // ruleset's is among them): no other call reaches its memory or environment
  // (runner/call_domain.h). A domain that cannot be entered fails the call.
  if (const int e = enter_call_domain(); e != 0) {
    errno = e;
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
    const int argc = static_cast<int>(a.argv.size()) - 1;  // argv ends with its nullptr
    bool ok = false;
    const ProbeScope scope = probe_scope(argc, a.argv.data(), &ok);
    ::_exit(ok ? self_probe_main(ProbeStart::kForked, scope) : 2);
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

}  // namespace

void prepare_command_starts() {
  note_ignored_signals();
  prepare_call_domains();
}

CommandStart start_command(const ChildArgs& a) {
  FailureChannel ch;
  if (!ch.open(/*vforked=*/!a.self_probe)) return CommandStart{-1, kStageSetup, errno};
  // vfork: no page-table copy; run_command makes only syscalls and then execs
  // or _exits, and this process goes on only after that. The self-probe runs
  // this binary's own code in the child, which allocates: fork.
  const pid_t command = a.self_probe ? ::fork() : ::vfork();
  if (command == 0) run_command(a, &ch);
  if (command < 0) return CommandStart{-1, kStageSetup, errno};
  const ExecFailure f = ch.take();
  return CommandStart{command, f.stage, f.err};
}

}  // namespace rf::runner
