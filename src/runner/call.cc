#include "runner/call.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/statvfs.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

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

constexpr size_t kChunk = 64 * 1024;
constexpr auto kGrace = std::chrono::milliseconds(500);

// Where starting the command failed.
enum ExecStage : int32_t { kStageNone = 0, kStageSetup = 1, kStageCwd = 2, kStageExec = 3 };

// What the command child writes to its close-on-exec pipe when it cannot exec.
struct ExecFailure {
  int32_t stage;
  int32_t err;
};

// The supervisor's records on the report pipe, each one write (< PIPE_BUF, so
// atomic): kStarted once the command runs, kDone as its last act.
enum ReportKind : int32_t { kStarted = 1, kDone = 2 };
struct Report {
  int32_t kind = 0;
  int32_t pid = 0;
  int32_t wait_status = 0;
  int32_t exec_stage = 0;
  int32_t exec_errno = 0;
  int32_t killed = 0;  // the kill request came before the command ended
  int64_t wall_us = 0, user_us = 0, sys_us = 0, max_rss_kb = 0;
};

// Prepared before fork, so the children only make syscalls.
struct ChildArgs {
  int in = -1, out = -1, err = -1;  // the command's stdio (the pty slave three times)
  bool pty = false;
  int report = -1, ctl = -1;
  std::vector<char*> argv, envp;
  std::vector<const char*> candidates;
  const char* cwd = "/";
};

int64_t micros(const timeval& tv) { return int64_t{tv.tv_sec} * 1'000'000 + tv.tv_usec; }

int64_t now_us() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000 + ts.tv_nsec / 1000;
}

// ---- the command child ----

[[noreturn]] void fail_exec(int errfd, int32_t stage) {
  const ExecFailure f{stage, errno};
  (void)!::write(errfd, &f, sizeof f);
  ::_exit(127);
}

[[noreturn]] void run_command(const ChildArgs& a, int errfd) {
  // A new session: the call's own process group, and a pty can be its controlling tty.
  if (::setsid() < 0) fail_exec(errfd, kStageSetup);
  if (a.pty && ::ioctl(a.in, TIOCSCTTY, 0) != 0) fail_exec(errfd, kStageSetup);
  if (::dup2(a.in, 0) < 0 || ::dup2(a.out, 1) < 0 || ::dup2(a.err, 2) < 0) {
    fail_exec(errfd, kStageSetup);
  }
  // The runner ignores SIGPIPE and blocks SIGCHLD/SIGTERM: a command starts clean.
  for (int sig = 1; sig < NSIG; ++sig) ::signal(sig, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  // Only 0, 1 and 2 reach the command (errfd is close-on-exec and goes at exec).
  if ((errfd > 3 && ::close_range(3, static_cast<unsigned>(errfd) - 1, 0) != 0) ||
      ::close_range(static_cast<unsigned>(errfd) + 1, ~0U, 0) != 0) {
    fail_exec(errfd, kStageSetup);
  }
  if (::chdir(a.cwd) != 0) fail_exec(errfd, kStageCwd);
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
  fail_exec(errfd, kStageExec);
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

// Waits for the command, killing the tree early if the control pipe closes.
void supervise(pid_t command, int ctl, int64_t start_us, Report* r) {
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &chld, nullptr);
  const int sigfd = ::signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  for (bool done = false; !done;) {
    pollfd fds[2] = {{sigfd, POLLIN, 0}, {ctl, POLLIN, 0}};
    if (::poll(fds, 2, sigfd < 0 ? 50 : -1) < 0 && errno != EINTR) break;
    if (fds[1].revents != 0) {
      // The runner asked (timeout, output cap, shutdown) or died: end the call now.
      r->killed = 1;
      kill_descendants(command);
      ctl = -1;  // poll ignores negative fds
    }
    signalfd_siginfo si;
    while (sigfd >= 0 && ::read(sigfd, &si, sizeof si) == sizeof si) {
    }
    int status = 0;
    rusage ru{};
    pid_t pid;
    while ((pid = ::wait4(-1, &status, WNOHANG, &ru)) > 0) {
      if (pid == command) {
        record_command(r, status, ru, start_us);
        done = true;
      }
    }
    if (pid < 0 && errno == ECHILD) done = true;
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
// the failure in `r`.
pid_t start_command(const ChildArgs& a, Report* r) {
  int errpipe[2];
  if (::pipe2(errpipe, O_CLOEXEC) != 0) {
    r->exec_stage = kStageSetup;
    r->exec_errno = errno;
    return -1;
  }
  // vfork: no page-table copy; run_command makes only syscalls and then execs or _exits.
  const pid_t command = ::vfork();
  if (command == 0) {
    ::close(errpipe[0]);
    run_command(a, errpipe[1]);
  }
  const int fork_errno = errno;
  ::close(errpipe[1]);
  ::close(a.in);  // the command holds its own copies now
  if (a.out != a.in) ::close(a.out);
  if (a.err != a.in) ::close(a.err);
  ExecFailure f{kStageSetup, fork_errno};
  ssize_t n = command < 0 ? sizeof f : 0;
  while (command > 0 && (n = ::read(errpipe[0], &f, sizeof f)) < 0 && errno == EINTR) {
  }
  ::close(errpipe[0]);
  if (n != static_cast<ssize_t>(sizeof f)) return command;  // EOF: exec succeeded
  r->exec_stage = f.stage;
  r->exec_errno = f.err;
  return command;
}

[[noreturn]] void run_supervisor(const ChildArgs& a) {
  close_all_but({a.in, a.out, a.err, a.report, a.ctl});
  // Subreaper: whatever the command leaves behind (daemonised, setsid) reparents to
  // us instead of PID 1, so it can be found and killed before the call ends.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  Report r;
  r.kind = kDone;
  const int64_t start_us = now_us();
  const pid_t command = start_command(a, &r);
  if (command > 0 && r.exec_stage == kStageNone) {
    Report started;
    started.kind = kStarted;
    started.pid = command;
    (void)!::write(a.report, &started, sizeof started);
  }
  if (command > 0) supervise(command, a.ctl, start_us, &r);
  reap_everything(command);
  (void)!::write(a.report, &r, sizeof r);
  ::_exit(0);
}

void set_nonblocking(int fd) {
  if (fd >= 0) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

// The child's ends of a call's descriptors; closed in the runner after fork.
struct ChildEnds {
  UniqueFd in_r, out_w, err_w;  // pipes
  UniqueFd slave;               // or the pty slave
  UniqueFd report_w, ctl_r;
};

Status open_pty(const proto::ExecRequest& req, UniqueFd* master, ChildEnds* ends) {
  // The pty master belongs to the runner: the command never gets a host tty.
  master->reset(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!*master) return sys_error("exec: open /dev/ptmx");
  if (::grantpt(master->get()) != 0 || ::unlockpt(master->get()) != 0) {
    return sys_error("exec: unlockpt");
  }
  // TIOCGPTPEER opens the slave from the master, with no /dev/pts path to race on.
  ends->slave.reset(::ioctl(master->get(), TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!ends->slave) return sys_error("exec: open pty slave");
  winsize ws{};
  ws.ws_row = static_cast<unsigned short>(req.rows);
  ws.ws_col = static_cast<unsigned short>(req.cols);
  if (::ioctl(master->get(), TIOCSWINSZ, &ws) != 0) return sys_error("exec: set pty size");
  return ok_status();
}

Status open_pipes(UniqueFd* in_w, UniqueFd* out_r, UniqueFd* err_r, ChildEnds* ends) {
  int p[3][2];
  for (auto& pair : p) {
    if (::pipe2(pair, O_CLOEXEC) != 0) return sys_error("exec: pipe");
  }
  ends->in_r.reset(p[0][0]);
  in_w->reset(p[0][1]);
  out_r->reset(p[1][0]);
  ends->out_w.reset(p[1][1]);
  err_r->reset(p[2][0]);
  ends->err_w.reset(p[2][1]);
  return ok_status();
}

Status arm(int timerfd, std::chrono::milliseconds after) {
  itimerspec its{};
  its.it_value.tv_sec = after.count() / 1000;
  its.it_value.tv_nsec = (after.count() % 1000) * 1'000'000;
  if (::timerfd_settime(timerfd, 0, &its, nullptr) != 0) return sys_error("exec: timerfd_settime");
  return ok_status();
}

// A one-shot timer, armed.
Result<UniqueFd> make_timer(std::chrono::milliseconds after) {
  UniqueFd fd(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
  if (!fd) return sys_error("exec: timerfd_create");
  RF_TRY(arm(fd.get(), after));
  return fd;
}

// Pointers into `plan`, which outlives the fork in both processes.
ChildArgs child_args(CallPlan& plan, const ChildEnds& ends) {
  ChildArgs a;
  a.pty = plan.req.pty;
  a.in = a.pty ? ends.slave.get() : ends.in_r.get();
  a.out = a.pty ? ends.slave.get() : ends.out_w.get();
  a.err = a.pty ? ends.slave.get() : ends.err_w.get();
  a.report = ends.report_w.get();
  a.ctl = ends.ctl_r.get();
  for (auto& s : plan.req.argv) a.argv.push_back(s.data());
  a.argv.push_back(nullptr);
  for (auto& s : plan.env) a.envp.push_back(s.data());
  a.envp.push_back(nullptr);
  for (const auto& s : plan.candidates) a.candidates.push_back(s.c_str());
  a.cwd = plan.req.cwd.c_str();
  return a;
}

// The text of a failed start: "CMD: command not found", "cwd /x: ...".
std::string start_failure(const CallPlan& plan, int stage, int err) {
  const std::string& name = plan.req.argv[0];
  if (stage == kStageExec && err == ENOENT && plan.searched) return name + ": command not found";
  if (stage == kStageCwd) return "cwd " + plan.req.cwd + ": " + std::strerror(err);
  if (stage == kStageSetup) return "start " + name + ": " + std::strerror(err);
  return name + ": " + std::strerror(err);
}

std::string wait_text(int status) {
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

}  // namespace

proto::ExitStatus command_not_found(const std::string& name) {
  proto::ExitStatus e;
  e.exit_code = 127;
  e.exec_errno = ENOENT;
  e.error = name + ": command not found";
  return e;
}

Call::Call(Loop& loop, CallPlan plan)
    : loop_(loop), plan_(std::move(plan)), started_at_(std::chrono::steady_clock::now()) {}

Call::~Call() {
  for (UniqueFd* fd : {&out_, &err_, &pty_, &in_, &report_, &timer_}) release(*fd);
  ctl_.reset();  // if the supervisor still runs, this ends the call's tree
}

void Call::release(UniqueFd& fd) {
  // Unregister first: a forked child may still hold a copy, keeping the
  // registration (and its events) alive after close.
  if (fd) loop_.watch(fd.get(), id(), FdKind::kStdout, 0);
  fd.reset();
}

Result<std::unique_ptr<Call>> Call::start(Loop& loop, CallPlan plan, std::string stdin_data,
                                          bool stdin_complete) {
  std::unique_ptr<Call> call(new Call(loop, std::move(plan)));
  RF_TRY(call->spawn(std::move(stdin_data), stdin_complete));
  return call;
}

Status Call::spawn(std::string stdin_data, bool stdin_complete) {
  const auto& req = plan_.req;
  ChildEnds ends;
  RF_TRY(req.pty ? open_pty(req, &pty_, &ends) : open_pipes(&in_, &out_, &err_, &ends));
  int rp[2], cp[2];
  if (::pipe2(rp, O_CLOEXEC) != 0) return sys_error("exec: pipe");
  report_.reset(rp[0]);
  ends.report_w.reset(rp[1]);
  if (::pipe2(cp, O_CLOEXEC) != 0) return sys_error("exec: pipe");
  ends.ctl_r.reset(cp[0]);
  ctl_.reset(cp[1]);
  if (req.timeout_ms > 0) {
    auto timer = make_timer(std::chrono::milliseconds(req.timeout_ms));
    if (!timer) return timer.take_error();
    timer_ = std::move(*timer);
  }
  const ChildArgs a = child_args(plan_, ends);
  // fork, not vfork: the runner is single-threaded, so the child may allocate.
  const pid_t pid = ::fork();
  if (pid < 0) return sys_error("exec: fork");
  if (pid == 0) run_supervisor(a);
  supervisor_ = pid;

  for (int fd : {out_.get(), err_.get(), in_.get(), pty_.get(), report_.get()}) set_nonblocking(fd);
  loop_.watch(report_.get(), id(), FdKind::kReport, EPOLLIN);
  if (timer_) loop_.watch(timer_.get(), id(), FdKind::kTimer, EPOLLIN);
  update_watches();
  add_stdin(stdin_data);
  if (stdin_complete) close_stdin();
  return ok_status();
}

void Call::update_watches() {
  const uint32_t in = loop_.output_paused() ? 0u : uint32_t{EPOLLIN};
  const uint32_t out = stdin_off_ < stdin_buf_.size() ? uint32_t{EPOLLOUT} : 0u;
  if (out_) loop_.watch(out_.get(), id(), FdKind::kStdout, in);
  if (err_) loop_.watch(err_.get(), id(), FdKind::kStderr, in);
  if (pty_ && !pty_eof_) loop_.watch(pty_.get(), id(), FdKind::kStdout, in | out);
  if (in_) loop_.watch(in_.get(), id(), FdKind::kStdin, out);
}

UniqueFd& Call::output_slot(FdKind kind) {
  if (pty_) return pty_;
  return kind == FdKind::kStderr ? err_ : out_;
}

void Call::on_event(FdKind kind, uint32_t events) {
  switch (kind) {
    case FdKind::kStdout:
    case FdKind::kStderr:
      if (pty_ && (events & EPOLLOUT)) flush_stdin();
      if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) read_output(kind);
      break;
    case FdKind::kStdin:
      flush_stdin();
      break;
    case FdKind::kTimer:
      on_timer();
      break;
    case FdKind::kReport:
      read_report();
      break;
  }
}

void Call::read_output(FdKind kind) {
  UniqueFd& fd = output_slot(kind);
  if (!fd || (pty_ && pty_eof_)) return;
  char buf[kChunk];
  const ssize_t n = ::read(fd.get(), buf, sizeof buf);
  if (n > 0) return forward(kind, std::string_view(buf, static_cast<size_t>(n)));
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  at_eof(kind);  // 0, or EIO from a pty master once the last slave fd closed
}

void Call::forward(FdKind kind, std::string_view data) {
  if (truncated_) return;  // drained and dropped until the tree is gone
  const auto type = kind == FdKind::kStderr ? proto::MsgType::kStderr : proto::MsgType::kStdout;
  const int64_t limit = plan_.req.output_limit;
  if (limit > 0 && output_bytes_ + static_cast<int64_t>(data.size()) > limit) {
    loop_.send(type, id(), {}, data.substr(0, static_cast<size_t>(limit - output_bytes_)));
    output_bytes_ = limit;
    truncated_ = true;
    loop_.send(type, id(), {},
               "\n[ringfence: output truncated at " + std::to_string(limit) + " bytes]\n");
    kill("output");
    return;
  }
  output_bytes_ += static_cast<int64_t>(data.size());
  loop_.send(type, id(), {}, data);
}

void Call::at_eof(FdKind kind) {
  if (pty_) {
    // Unwatched but kept open until the call ends: closing the master hangs up
    // the terminal, which would SIGHUP a command still on its way out.
    loop_.watch(pty_.get(), id(), FdKind::kStdout, 0);
    pty_eof_ = true;
    stdin_buf_.clear();
    stdin_off_ = 0;
    stdin_closed_ = true;
    out_eof_ = err_eof_ = true;
  } else if (kind == FdKind::kStderr) {
    release(err_);
    err_eof_ = true;
  } else {
    release(out_);
    out_eof_ = true;
  }
  maybe_finish();
}

void Call::read_report() {
  while (report_) {
    char buf[512];
    const ssize_t n = ::read(report_.get(), buf, sizeof buf);
    if (n > 0) {
      report_buf_.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) release(report_);
    break;
  }
  while (report_buf_.size() >= sizeof(Report)) {
    Report r;
    std::memcpy(&r, report_buf_.data(), sizeof r);
    report_buf_.erase(0, sizeof r);
    if (r.kind == kStarted) {
      command_ = r.pid;
      loop_.send(proto::MsgType::kStarted, id(), proto::to_json(proto::Started{r.pid}));
    } else if (r.kind == kDone) {
      have_done_ = true;
      done_ = Done{r.wait_status, r.exec_stage, r.exec_errno, r.killed != 0,
                   r.wall_us,     r.user_us,    r.sys_us,     r.max_rss_kb};
    }
  }
}

void Call::on_supervisor_exit(int wait_status) {
  supervisor_status_ = wait_status;
  read_report();
  if (!have_done_) {
    // The supervisor was killed (by a process of the sandbox: same uid). Its tree
    // may live on: kill the command's session, and stop waiting for EOF soon.
    if (command_ > 0) ::kill(-command_, SIGKILL);
    grace_ = true;
    Status armed = timer_ ? arm(timer_.get(), kGrace) : ok_status();
    if (!timer_) {
      auto timer = make_timer(kGrace);
      if (timer) {
        timer_ = std::move(*timer);
        loop_.watch(timer_.get(), id(), FdKind::kTimer, EPOLLIN);
      } else {
        armed = timer.take_error();
      }
    }
    if (!armed) {
      out_eof_ = err_eof_ = true;  // cannot wait: finish now
    }
  }
  maybe_finish();
}

void Call::on_timer() {
  uint64_t ticks;
  (void)!::read(timer_.get(), &ticks, sizeof ticks);
  if (!grace_) return kill("timeout");
  for (FdKind k : {FdKind::kStdout, FdKind::kStderr}) {
    if (output_slot(k) && !(pty_ && pty_eof_)) at_eof(k);
  }
  out_eof_ = err_eof_ = true;
  maybe_finish();
}

void Call::kill(const char* reason) {
  if (kill_reason_.empty()) kill_reason_ = reason;
  ctl_.reset();  // the supervisor sees EOF and kills everything below it
}

Status Call::signal(int sig) {
  if (command_ <= 0) return make_error("signal", "the call has no running command");
  // The command leads its own session, so its process group is the call's job.
  if (::kill(-command_, sig) != 0 && errno != ESRCH) return sys_error("signal");
  return ok_status();
}

Status Call::resize(int rows, int cols) {
  if (!pty_) return make_error("resize", "the call has no pty");
  winsize ws{};
  ws.ws_row = static_cast<unsigned short>(rows);
  ws.ws_col = static_cast<unsigned short>(cols);
  if (::ioctl(pty_.get(), TIOCSWINSZ, &ws) != 0) return sys_error("resize");
  return ok_status();
}

void Call::add_stdin(std::string_view data) {
  if (stdin_closed_ || stdin_close_wanted_ || data.empty()) return;
  stdin_buf_.append(data);
  flush_stdin();
}

void Call::close_stdin() {
  stdin_close_wanted_ = true;
  flush_stdin();
}

void Call::drop_stdin() {
  stdin_buf_.clear();
  stdin_off_ = 0;
  stdin_closed_ = true;
  release(in_);
}

void Call::flush_stdin() {
  const int fd = pty_ ? pty_.get() : in_.get();
  if (fd < 0 || stdin_closed_ || pty_eof_) {
    stdin_buf_.clear();
    stdin_off_ = 0;
    return;
  }
  for (;;) {
    while (stdin_off_ < stdin_buf_.size()) {
      const ssize_t n = ::write(fd, stdin_buf_.data() + stdin_off_, stdin_buf_.size() - stdin_off_);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) break;
      if (n <= 0) {
        // EPIPE (the command closed its stdin; SIGPIPE is ignored) or EIO: drop the rest.
        drop_stdin();
        return update_watches();
      }
      stdin_off_ += static_cast<size_t>(n);
      pty_at_line_start_ = stdin_buf_[stdin_off_ - 1] == '\n';
    }
    if (stdin_off_ < stdin_buf_.size()) break;
    stdin_buf_.clear();
    stdin_off_ = 0;
    if (!stdin_close_wanted_) break;
    if (!pty_) {
      drop_stdin();
      break;
    }
    if (pty_eof_sent_) break;
    // A terminal has no end of input but VEOF: ^D at a line start (twice mid-line).
    pty_eof_sent_ = true;
    stdin_buf_ = pty_at_line_start_ ? "\x04" : "\x04\x04";
  }
  update_watches();
}

bool Call::disk_full() const {
  for (const auto& path : plan_.disk_paths) {
    struct statvfs st {};
    if (::statvfs(path.c_str(), &st) == 0 && st.f_bavail == 0) return true;
  }
  return false;
}

proto::ExitStatus Call::exit_status() const {
  proto::ExitStatus e;
  if (!have_done_) {
    e.exit_code = 128 + SIGKILL;
    e.signal = SIGKILL;
    e.error = "call supervisor " + wait_text(supervisor_status_.value_or(0)) +
              " before the command ended";
    e.wall_us = std::chrono::duration_cast<std::chrono::microseconds>(
                    std::chrono::steady_clock::now() - started_at_)
                    .count();
  } else {
    const int st = done_.wait_status;
    if (done_.exec_stage != kStageNone) {
      e.exec_errno = done_.exec_errno;
      const bool missing = done_.exec_stage == kStageExec && done_.exec_errno == ENOENT;
      e.exit_code = missing ? 127 : 126;
      e.error = start_failure(plan_, done_.exec_stage, done_.exec_errno);
    } else if (WIFSIGNALED(st)) {
      e.signal = WTERMSIG(st);
      e.exit_code = 128 + e.signal;
    } else {
      e.exit_code = WEXITSTATUS(st);
    }
    e.wall_us = done_.wall_us;
    e.user_us = done_.user_us;
    e.sys_us = done_.sys_us;
    e.max_rss_kb = done_.max_rss_kb;
  }
  if (kill_reason_ == "timeout" && (!have_done_ || done_.killed)) {
    e.timed_out = true;
    e.limit = "timeout";
    e.signal = SIGKILL;
    e.exit_code = 128 + SIGKILL;
  }
  if (truncated_) {
    e.output_truncated = true;
    if (e.limit.empty()) e.limit = "output";
  }
  if (e.limit.empty() && e.exit_code != 0 && disk_full()) e.limit = "disk";
  return e;
}

void Call::maybe_finish() {
  if (finished_ || !supervisor_status_ || !out_eof_ || !err_eof_) return;
  finished_ = true;
  loop_.send(proto::MsgType::kExit, id(), proto::to_json(exit_status()));
  drop_stdin();
  for (UniqueFd* fd : {&report_, &timer_, &pty_}) release(*fd);
  ctl_.reset();
}

}  // namespace rf::runner
