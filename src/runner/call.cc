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
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "runner/command_child.h"
#include "runner/supervisor.h"

namespace rf::runner {

namespace {

constexpr size_t kChunk = 64 * 1024;
constexpr auto kGrace = std::chrono::milliseconds(500);

// For descriptors this call just made (no other status flags to keep; F_SETFL
// leaves the access mode alone): one fcntl, not a get and a set.
void set_nonblocking(int fd) {
  if (fd >= 0) ::fcntl(fd, F_SETFL, O_NONBLOCK);
}

// The child's ends of a call's descriptors; closed in the runner after fork.
struct ChildEnds {
  UniqueFd in_r, out_w, err_w;  // pipes
  UniqueFd slave;               // or the pty slave
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

// The runner's /dev/null, opened once (-1 if it cannot be): the stdin of a
// call whose input is complete and empty, as `docker exec` without -i gives.
// No pipe for it: two fewer descriptors to make, pass and close per call.
int dev_null() {
  static const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  return fd;
}

// stdout and stderr, and stdin unless `no_input`.
Status open_pipes(bool no_input, UniqueFd* in_w, UniqueFd* out_r, UniqueFd* err_r,
                  ChildEnds* ends) {
  int p[3][2];
  for (int i = no_input ? 1 : 0; i < 3; ++i) {
    if (::pipe2(p[i], O_CLOEXEC) != 0) return sys_error("exec: pipe");
  }
  if (!no_input) {
    ends->in_r.reset(p[0][0]);
    in_w->reset(p[0][1]);
  }
  out_r->reset(p[1][0]);
  ends->out_w.reset(p[1][1]);
  err_r->reset(p[2][0]);
  ends->err_w.reset(p[2][1]);
  return ok_status();
}

// Pointers into `plan`, which outlives the fork in both processes.
ChildArgs child_args(CallPlan& plan, const ChildEnds& ends) {
  ChildArgs a;
  a.pty = plan.req.pty;
  a.self_probe = plan.self_probe;
  a.in = a.pty ? ends.slave.get() : ends.in_r ? ends.in_r.get() : dev_null();
  a.out = a.pty ? ends.slave.get() : ends.out_w.get();
  a.err = a.pty ? ends.slave.get() : ends.err_w.get();
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

Call::Call(Loop& loop, SupervisorPool& pool, CallPlan plan)
    : loop_(loop),
      pool_(pool),
      plan_(std::move(plan)),
      started_at_(std::chrono::steady_clock::now()) {}

Call::~Call() {
  for (UniqueFd* fd : {&out_, &err_, &pty_, &in_}) release(*fd);
  loop_.disarm(id());
  // A supervisor still busy with us sees its socket close: it ends the call's
  // tree and exits, never handed another call while this one may be ending.
  if (supervisor_ > 0) pool_.let_go(supervisor_);
  // A command of our own still running goes now (the runner reaps it).
  if (running_command() > 0) {
    ::kill(-command_, SIGKILL);
    kill_tree(command_);
  }
}

// An output pipe at EOF: every write end is closed, and its read end was
// never passed on (close-on-exec, not in any handoff).
void Call::close_at_eof(UniqueFd& fd) {
  loop_.forget(fd.get());
  fd.reset();
}

void Call::release(UniqueFd& fd) {
  // Unregister first: a forked child may still hold a copy, keeping the
  // registration (and its events) alive after close.
  if (fd) loop_.watch(fd.get(), id(), FdKind::kStdout, 0);
  fd.reset();
}

Result<std::unique_ptr<Call>> Call::start(Loop& loop, SupervisorPool& pool, CallPlan plan,
                                          std::string stdin_data, bool stdin_complete) {
  std::unique_ptr<Call> call(new Call(loop, pool, std::move(plan)));
  RF_TRY(call->spawn(std::move(stdin_data), stdin_complete));
  return call;
}

Status Call::spawn(std::string stdin_data, bool stdin_complete) {
  const auto& req = plan_.req;
  ChildEnds ends;
  const bool no_input = stdin_complete && stdin_data.empty() && dev_null() >= 0;
  RF_TRY(req.pty ? open_pty(req, &pty_, &ends) : open_pipes(no_input, &in_, &out_, &err_, &ends));
  if (plan_.direct) {
    start_direct(child_args(plan_, ends));
  } else {
    // Its Reports come back on the supervisor's socket, which the loop watches
    // for as long as the supervisor lives (SupervisorPool::Watch).
    auto pid = pool_.start(child_args(plan_, ends), id());
    if (!pid) return pid.take_error();
    supervisor_ = *pid;
  }
  // `ends` close here: the command (or its supervisor) has its own copies.

  for (int fd : {out_.get(), err_.get(), in_.get(), pty_.get()}) set_nonblocking(fd);
  if (req.timeout_ms > 0) loop_.arm(id(), std::chrono::milliseconds(req.timeout_ms));
  update_watches();
  add_stdin(stdin_data);
  if (stdin_complete) close_stdin();
  return ok_status();
}

void Call::start_direct(const ChildArgs& a) {
  const CommandStart s = start_command(a);
  done_.exec_stage = s.stage;
  done_.exec_errno = s.err;
  if (s.pid < 0) {
    have_done_ = true;  // no process was made: nothing to wait for
  } else {
    command_ = s.pid;  // reaped by the runner (Runner::reap_children) even if it failed to exec
    if (s.stage == kStageNone && plan_.req.started) {
      loop_.send(proto::MsgType::kStarted, id(), proto::to_json(proto::Started{s.pid}));
    }
  }
  output_watched_ = true;  // output flows from the start: STARTED went first
}

void Call::on_command_exit(int wait_status, const rusage& ru) {
  command_ended_ = true;
  done_.wait_status = wait_status;
  done_.killed = !kill_reason_.empty();
  done_.wall_us = std::chrono::duration_cast<std::chrono::microseconds>(
                      std::chrono::steady_clock::now() - started_at_)
                      .count();
  done_.user_us = int64_t{ru.ru_utime.tv_sec} * 1'000'000 + ru.ru_utime.tv_usec;
  done_.sys_us = int64_t{ru.ru_stime.tv_sec} * 1'000'000 + ru.ru_stime.tv_usec;
  done_.max_rss_kb = ru.ru_maxrss;
}

void Call::on_leftovers_gone() {
  have_done_ = true;
  maybe_finish();
}

DirectCall Call::as_direct() const {
  DirectCall c;
  c.id = id();
  c.pgid = command_;
  c.command_ended = command_ended_ || command_ <= 0;
  return c;
}

std::vector<ino_t> Call::output_pipes() const {
  std::vector<ino_t> out;
  for (const UniqueFd* fd : {&out_, &err_}) {
    struct stat st {};
    if (*fd && ::fstat(fd->get(), &st) == 0) out.push_back(st.st_ino);
  }
  return out;
}

bool Call::output_open() const {
  // Output waits in its pipe until the supervisor has said the command started
  // (or can no longer say it), so STARTED always reaches the host before the
  // first byte the command wrote. A direct command's STARTED goes as it is
  // forked (start_direct).
  return command_ > 0 || have_done_ || report_eof_ || supervisor_status_.has_value();
}

void Call::update_watches() {
  const uint32_t in = loop_.output_paused() || !output_open() ? 0u : uint32_t{EPOLLIN};
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
    // On stderr whichever stream overflowed: a binary stdout (an archive, an
    // image) stays the bytes the command wrote, cut, with nothing added.
    loop_.send(proto::MsgType::kStderr, id(), {},
               std::string(proto::kOutputTruncatedMark) + std::to_string(limit) + " bytes]\n");
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
    close_at_eof(err_);
    err_eof_ = true;
  } else {
    close_at_eof(out_);
    out_eof_ = true;
  }
  maybe_finish();
}

void Call::read_report() {
  // Only while the supervisor is ours: after kDone its socket carries the
  // next call's.
  const int sock = have_done_ || report_eof_ ? -1 : pool_.socket_of(supervisor_);
  while (sock >= 0) {
    char buf[512];
    const ssize_t n = ::recv(sock, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      report_buf_.append(buf, static_cast<size_t>(n));
      // A short read emptied the socket; more wakes the loop again.
      if (n < static_cast<ssize_t>(sizeof buf)) break;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 || (n < 0 && errno != EAGAIN)) {
      report_eof_ = true;  // it is gone: what it reported is all there is
      pool_.hung_up(supervisor_);
    }
    break;
  }
  while (report_buf_.size() >= sizeof(Report)) {
    Report r;
    std::memcpy(&r, report_buf_.data(), sizeof r);
    report_buf_.erase(0, sizeof r);
    if (r.kind == kStarted) {
      command_ = r.pid;
      if (plan_.req.started) {
        loop_.send(proto::MsgType::kStarted, id(), proto::to_json(proto::Started{r.pid}));
      }
    } else if (r.kind == kDone) {
      // Nothing of the call is left: its supervisor may take the next one.
      have_done_ = true;
      if (supervisor_ > 0) pool_.finished(std::exchange(supervisor_, 0));
      done_ = Done{r.wait_status, r.exec_stage, r.exec_errno, r.killed != 0,
                   r.wall_us,     r.user_us,    r.sys_us,     r.max_rss_kb};
    }
  }
  // Watch the output once it may flow (one epoll update per call, not per report).
  if (!finished_ && !output_watched_ && output_open()) {
    output_watched_ = true;
    update_watches();
  }
  maybe_finish();
}

void Call::on_supervisor_exit(int wait_status) {
  supervisor_status_ = wait_status;
  read_report();
  if (!have_done_) {
    // The supervisor was killed (by a process of the sandbox: same uid). Its
    // tree may live on: reparented to the runner, which kills it
    // (Runner::kill_orphans). Not by the command's process group: the
    // supervisor may have reaped the command before it died, and that group
    // id may then be anyone's (the local backend shares the host's pids).
    // Stop waiting for EOF soon.
    grace_ = true;
    loop_.arm(id(), kGrace);
  }
  maybe_finish();
}

void Call::on_deadline() {
  if (!grace_) return kill("timeout");
  for (FdKind k : {FdKind::kStdout, FdKind::kStderr}) {
    if (output_slot(k) && !(pty_ && pty_eof_)) at_eof(k);
  }
  out_eof_ = err_eof_ = true;
  maybe_finish();
}

void Call::kill(const char* reason) {
  if (kill_reason_.empty()) kill_reason_ = reason;
  // The supervisor sees EOF and kills everything below it.
  if (supervisor_ > 0) pool_.stop_call(supervisor_);
  // A command of our own: its group and its tree now; its orphans as the
  // runner reaps it (runner/orphans.h).
  if (running_command() > 0) {
    ::kill(-command_, SIGKILL);
    kill_tree(command_);
  }
}

Status Call::signal(int sig) {
  if (command_ <= 0 || command_ended_) {
    return make_error("signal", "the call has no running command");
  }
  // The command leads its own process group: the call's job.
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
  if (finished_ || (!have_done_ && !supervisor_status_) || !out_eof_ || !err_eof_) return;
  finished_ = true;
  loop_.send(proto::MsgType::kExit, id(), proto::to_json(exit_status()));
  drop_stdin();
  release(pty_);
  loop_.disarm(id());
}

}  // namespace rf::runner
