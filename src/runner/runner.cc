#include "runner/runner.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iterator>
#include <nlohmann/json.hpp>

#include "core/io.h"

namespace rf::runner {
namespace {

using proto::MsgType;

constexpr size_t kPauseAbove = 4u << 20;   // stop reading call output past 4 MiB queued
constexpr size_t kResumeBelow = 1u << 20;  // and start again under 1 MiB
constexpr size_t kReadChunk = 256u << 10;
constexpr const char* kDefaultPath = "/usr/local/bin:/usr/bin:/bin";

// epoll tokens: (call id << 8) | kind. Call id 0 is the whole sandbox.
constexpr uint64_t kSocketToken = 100;
constexpr uint64_t kSignalToken = 101;
constexpr uint64_t kOutputToken = 102;     // --stdio: the output pipe
constexpr uint64_t kIdleToken = 103;       // the idle supervisors' timer
constexpr uint64_t kCallTimerToken = 104;  // the calls' deadlines
// How long a supervisor may stay idle before it is let go (supervisor_pool.h).
constexpr auto kSupervisorIdle = std::chrono::seconds(1);
// The egress bridge's fds: this bit, or the bridge's own tag (below 2^62).
constexpr uint64_t kBridgeBit = uint64_t{1} << 63;
// The credential server's fds: this bit, or the server's own tag (below 2^62).
constexpr uint64_t kCredBit = uint64_t{1} << 62;
// A supervisor's socket: this bit, or its pid.
constexpr uint64_t kSupervisorBit = uint64_t{1} << 61;
// A directory watch's inotify descriptor: this bit, or the watch's id.
constexpr uint64_t kWatchBit = uint64_t{1} << 60;
// A port exchange's socket: this bit, or its id.
constexpr uint64_t kPortBit = uint64_t{1} << 59;
// Events per watch_events frame, well inside kMaxJson.
constexpr size_t kEventsPerFrame = 2000;

uint64_t token(uint32_t call_id, FdKind kind) {
  return (uint64_t{call_id} << 8) | static_cast<uint64_t>(kind);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const auto end = s.find(sep, start);
    out.push_back(s.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return out;
    start = end + 1;
  }
}

// "CapEff:\t000001ffffffffff" -> the hex value of the line named `key` in /proc/self/status.
std::string status_field(const std::string& status, const std::string& key) {
  const auto at = status.find("\n" + key + ":");
  if (at == std::string::npos) return {};
  const auto start = status.find_first_not_of(" \t", at + key.size() + 2);
  if (start == std::string::npos) return {};
  return status.substr(start, status.find('\n', start) - start);
}

proto::ProbeResult probe_self() {
  proto::ProbeResult p;
  p.pid = ::getpid();
  p.uid = static_cast<int>(::getuid());
  p.gid = static_cast<int>(::getgid());
  utsname u{};
  if (::uname(&u) == 0) p.hostname = u.nodename;
  p.no_new_privs = ::prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1;
  if (auto status = rf::read_file("/proc/self/status")) {
    const std::string s = "\n" + *status;
    p.seccomp_mode = std::atoi(status_field(s, "Seccomp").c_str());
    p.cap_eff = std::strtoull(status_field(s, "CapEff").c_str(), nullptr, 16);
    p.cap_prm = std::strtoull(status_field(s, "CapPrm").c_str(), nullptr, 16);
    p.cap_bnd = std::strtoull(status_field(s, "CapBnd").c_str(), nullptr, 16);
    p.cap_amb = std::strtoull(status_field(s, "CapAmb").c_str(), nullptr, 16);
  }
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
      const int fd = std::atoi(e->d_name);
      if (fd != ::dirfd(d)) p.open_fds.push_back(fd);
    }
    ::closedir(d);
    std::sort(p.open_fds.begin(), p.open_fds.end());
  }
  return p;
}

}  // namespace

Result<std::unique_ptr<Runner>> Runner::create(const Options& options) {
  auto files = FileOps::open(options.root);
  if (!files) return files.take_error();
  std::unique_ptr<Runner> r(new Runner(options, std::move(*files)));
  if (options.stdio) {
    // The protocol moves off 0 and 1, which every command would otherwise
    // inherit; they become /dev/null (rule 3: every fd a sandbox gets is named).
    r->sock_.reset(::fcntl(0, F_DUPFD_CLOEXEC, 3));
    r->out_fd_.reset(::fcntl(1, F_DUPFD_CLOEXEC, 3));
    if (!r->sock_ || !r->out_fd_) return sys_error("--stdio: dup");
    UniqueFd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
    if (!null || ::dup2(null.get(), 0) < 0 || ::dup2(null.get(), 1) < 0) {
      return sys_error("--stdio: /dev/null");
    }
  } else {
    r->sock_.reset(options.fd);
  }
  r->pid1_ = ::getpid() == 1;
  if (r->pid1_ && r->orphans_.open()) {
    r->direct_ = true;
    prepare_command_starts();
  }
  if (::stat("/proc/self/exe", &r->self_exe_) != 0) r->self_exe_.st_ino = 0;
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGCHLD, SIGTERM, SIGINT, SIGHUP}) sigaddset(&set, sig);
  // Blocked and read from a signalfd: handled in the loop, never in a handler.
  // (Blocked signals also reach PID 1, which the kernel otherwise shields.)
  if (::sigprocmask(SIG_BLOCK, &set, nullptr) != 0) return sys_error("sigprocmask");
  r->sigfd_.reset(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!r->sigfd_) return sys_error("signalfd");
  r->epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!r->epoll_) return sys_error("epoll_create1");
  r->idle_timer_.reset(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
  if (!r->idle_timer_) return sys_error("timerfd_create");
  r->call_timer_.reset(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
  if (!r->call_timer_) return sys_error("timerfd_create");
  r->watch_token(r->call_timer_.get(), kCallTimerToken, EPOLLIN);
  if (options.egress_bridge) {
    // Listening before the handshake: the first call may connect at once.
    Runner* raw = r.get();
    auto bridge =
        EgressBridge::listen(*options.egress_bridge, [raw](int fd, uint64_t tag, uint32_t events) {
          raw->watch_token(fd, kBridgeBit | tag, events);
        });
    if (!bridge) return bridge.take_error();
    r->bridge_ = std::move(*bridge);
  }
  if (!options.cred_socket.empty()) {
    Runner* raw = r.get();
    auto cred = CredServer::listen(
        options.cred_socket,
        [raw](int fd, uint64_t tag, uint32_t events) {
          raw->watch_token(fd, kCredBit | tag, events);
        },
        [raw](const proto::CredRequest& req) {
          if (raw->host_minor_ < proto::kCredMinor) return false;
          raw->send(MsgType::kCredRequest, 0, proto::to_json(req));
          return true;
        },
        [raw](uint32_t request) {
          // A host before 0.3 knows no such frame: it waits out its timeout.
          if (raw->host_minor_ < proto::kCredWithdrawnMinor) return;
          raw->send(MsgType::kCredWithdrawn, 0, proto::to_json(proto::CredWithdrawn{request}));
        });
    if (!cred) return cred.take_error();
    r->cred_ = std::move(*cred);
  }
  return r;
}

Runner::~Runner() {
  calls_.clear();
  (void)sock_.release();  // fd 3 was given to us; the process exit closes it
}

// ---- handshake ----

Status Runner::read_frames_blocking() {
  char buf[4096];  // the host's hello is small; the rest comes on later reads
  while (!decoder_.has_frame()) {
    pollfd p{sock_.get(), POLLIN, 0};
    if (::poll(&p, 1, -1) < 0) {
      if (errno == EINTR) continue;
      return sys_error("poll");
    }
    const ssize_t n = ::read(sock_.get(), buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) return sys_error("read");
    if (n == 0) return make_error("handshake", "the host closed the connection");
    RF_TRY(decoder_.feed(std::string_view(buf, static_cast<size_t>(n))));
  }
  return ok_status();
}

Status Runner::handshake() {
  proto::Hello ours;
  ours.role = "runner";
  ours.runner_version = RF_VERSION;
  std::string hello;
  proto::append_frame(&hello, MsgType::kHello, 0, proto::to_json(ours));
  RF_TRY(write_all(out_fd(), hello));
  RF_TRY(read_frames_blocking());
  proto::Frame f = decoder_.pop();
  if (f.type != MsgType::kHello) {
    return make_error("handshake", std::string("expected hello, got ") + proto::type_name(f.type));
  }
  auto theirs = proto::parse_hello(f.json);
  if (!theirs) return theirs.take_error();
  RF_TRY(proto::check_compatible(theirs->protocol));
  host_minor_ = proto::parse_version(theirs->protocol)->minor;
  return ok_status();
}

// ---- the loop ----

int Runner::run() {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kSignalToken;
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, sigfd_.get(), &ev);
  // Started before the hello, so that it runs while the host finishes the
  // sandbox's start (runner/self_probe.h, "At the start").
  if (options_.start_probe_env) start_self_probe();
  if (auto s = handshake(); !s) {
    reply_error(0, s.error());
    flush_before_exit();
    return s.error().where.rfind("protocol frame", 0) == 0 ? 2 : 1;
  }
  // Non-blocking from here: a slow host must never stall the loop.
  ::fcntl(sock_.get(), F_SETFL, ::fcntl(sock_.get(), F_GETFL) | O_NONBLOCK);
  if (out_fd_) ::fcntl(out_fd_.get(), F_SETFL, ::fcntl(out_fd_.get(), F_GETFL) | O_NONBLOCK);
  // Its end goes out ahead of any call: a first call that came right behind
  // the hello would otherwise hold this loop (its fork, its exec) while the
  // report waits. What is left of it by now is short (rf_proof_bench).
  if (options_.start_probe_env) await_start_probe();
  flush_out();
  ev.data.u64 = kSocketToken;
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, sock_.get(), &ev);
  sock_events_ = EPOLLIN;
  // Where calls have supervisors: the first call's, forked while the host is
  // still busy with the sandbox's start (when the first exec came behind
  // hello, it is the fork that call needed anyway): a first call 0.1-0.3 ms
  // sooner (rf_proof_bench).
  if (!direct_) (void)supervisors_.prefork(1);
  while (decoder_.has_frame() && !exit_code_) handle(decoder_.pop());  // sent right behind hello

  epoll_event events[64];
  while (!exit_code_) {
    flush_out();
    if (exit_code_) break;
    watch_idle_supervisors();
    const int n = ::epoll_wait(epoll_.get(), events, 64, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      exit_code_ = 1;
      break;
    }
    for (int i = 0; i < n && !exit_code_; ++i) {
      if (events[i].data.u64 == kSocketToken) {
        on_socket(events[i].events);
      } else {
        on_event(events[i]);
      }
    }
  }
  end_all_calls();
  flush_before_exit();
  return *exit_code_;
}

void Runner::on_event(const epoll_event& ev) {
  const uint64_t t = ev.data.u64;
  if (t == kOutputToken) {
    if (ev.events & EPOLLERR) exit_code_ = 0;  // the host closed its end
    flush_out();
  } else if (t == kSignalToken) {
    on_signals();
  } else if (t == kIdleToken) {
    on_idle_timer();
  } else if (t == kCallTimerToken) {
    on_call_timer();
  } else if (t & kBridgeBit) {
    if (bridge_) bridge_->on_event(t & ~kBridgeBit, ev.events);
  } else if (t & kCredBit) {
    if (cred_) cred_->on_event(t & ~kCredBit, ev.events);
  } else if (t & kWatchBit) {
    on_watch(static_cast<uint32_t>(t & ~kWatchBit));
  } else if (t & kPortBit) {
    ports_->on_event(static_cast<uint32_t>(t & ~kPortBit), ev.events);
  } else {
    // A call's descriptor, or its supervisor's socket (the call it is busy with).
    const bool supervisor = (t & kSupervisorBit) != 0;
    const uint32_t id = supervisor ? supervisors_.on_event(static_cast<pid_t>(t & ~kSupervisorBit))
                                   : static_cast<uint32_t>(t >> 8);
    const auto kind = supervisor ? FdKind::kReport : static_cast<FdKind>(t & 0xff);
    if (auto it = calls_.find(id); id != 0 && it != calls_.end()) {
      it->second->on_event(kind, ev.events);
      if (it->second->finished()) calls_.erase(it);
    }
  }
}

void Runner::watch_idle_supervisors() {
  if (idle_timer_armed_ || !supervisors_.has_idle()) return;
  // Ticking while calls come and go costs no syscall per call; a supervisor
  // is let go between 1 and 2 idle seconds.
  itimerspec its{};
  its.it_value.tv_sec = its.it_interval.tv_sec = kSupervisorIdle.count();
  if (::timerfd_settime(idle_timer_.get(), 0, &its, nullptr) != 0) return;
  watch_token(idle_timer_.get(), kIdleToken, EPOLLIN);
  idle_timer_armed_ = true;
}

void Runner::on_idle_timer() {
  uint64_t ticks;
  (void)!::read(idle_timer_.get(), &ticks, sizeof ticks);
  supervisors_.let_go_idle_since(std::chrono::steady_clock::now() - kSupervisorIdle);
  if (supervisors_.has_idle()) return;
  const itimerspec off{};
  ::timerfd_settime(idle_timer_.get(), 0, &off, nullptr);
  watch_token(idle_timer_.get(), kIdleToken, 0);
  idle_timer_armed_ = false;
}

void Runner::arm(uint32_t call_id, std::chrono::milliseconds after) {
  disarm(call_id);
  // At most a century ahead: a time_point past its range would wrap into the past.
  after = std::min<std::chrono::milliseconds>(after, std::chrono::hours(24 * 365 * 100));
  const Deadline d{std::chrono::steady_clock::now() + after, call_id};
  deadlines_.insert(d);
  deadline_of_[call_id] = d;
  if (d.first < call_timer_at_) set_call_timer();
}

void Runner::disarm(uint32_t call_id) {
  // The timerfd stays set: if it fires for this deadline, nothing is due and
  // it is set for the next one.
  const auto it = deadline_of_.find(call_id);
  if (it == deadline_of_.end()) return;
  deadlines_.erase(it->second);
  deadline_of_.erase(it);
}

void Runner::set_call_timer() {
  itimerspec its{};
  call_timer_at_ =
      deadlines_.empty() ? std::chrono::steady_clock::time_point::max() : deadlines_.begin()->first;
  if (!deadlines_.empty()) {
    // steady_clock is CLOCK_MONOTONIC; at least 1 ns, as zero would disarm it.
    const auto ns = std::max<int64_t>(
        1, std::chrono::duration_cast<std::chrono::nanoseconds>(call_timer_at_.time_since_epoch())
               .count());
    its.it_value.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
    its.it_value.tv_nsec = static_cast<long>(ns % 1'000'000'000);
  }
  ::timerfd_settime(call_timer_.get(), TFD_TIMER_ABSTIME, &its, nullptr);
}

void Runner::on_call_timer() {
  uint64_t ticks;
  (void)!::read(call_timer_.get(), &ticks, sizeof ticks);
  call_timer_at_ = std::chrono::steady_clock::time_point::max();  // it fired: unset
  const auto now = std::chrono::steady_clock::now();
  std::vector<uint32_t> due;
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    due.push_back(deadlines_.begin()->second);
    deadline_of_.erase(deadlines_.begin()->second);
    deadlines_.erase(deadlines_.begin());
  }
  for (const uint32_t id : due) {
    const auto it = calls_.find(id);
    if (it == calls_.end()) continue;
    it->second->on_deadline();  // may arm again (the grace after a lost supervisor)
    if (it->second->finished()) calls_.erase(it);
  }
  if (!deadlines_.empty() && deadlines_.begin()->first < call_timer_at_) set_call_timer();
}

void Runner::watch_supervisor(int fd, pid_t pid, bool on) {
  watch_token(fd, kSupervisorBit | static_cast<uint64_t>(pid), on ? uint32_t{EPOLLIN} : 0u);
}

void Runner::watch(int fd, uint32_t call_id, FdKind kind, uint32_t events) {
  watch_token(fd, token(call_id, kind), events);
}

void Runner::forget(int fd) {
  if (fd >= 0 && static_cast<size_t>(fd) < registered_.size())
    registered_[static_cast<size_t>(fd)] = false;
}

void Runner::watch_token(int fd, uint64_t token, uint32_t events) {
  if (fd < 0) return;
  const auto at = static_cast<size_t>(fd);
  if (registered_.size() <= at) registered_.resize(at + 1, false);
  if (events == 0) {
    if (registered_[at]) ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
    registered_[at] = false;
    return;
  }
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = token;
  // The other operation if the record is wrong (a descriptor closed while
  // watched, its number reused): the set is always right.
  const int op = registered_[at] ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
  if (::epoll_ctl(epoll_.get(), op, fd, &ev) != 0 && (errno == ENOENT || errno == EEXIST)) {
    ::epoll_ctl(epoll_.get(), op == EPOLL_CTL_MOD ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, fd, &ev);
  }
  registered_[at] = true;
}

void Runner::send(MsgType type, uint32_t call_id, std::string_view json, std::string_view data) {
  proto::append_frame(&out_, type, call_id, json, data);
  if (!paused_ && out_.size() - out_off_ > kPauseAbove) set_paused(true);
}

void Runner::set_paused(bool paused) {
  paused_ = paused;
  for (auto& [id, call] : calls_) call->update_watches();
  if (ports_) ports_->set_paused(paused);
}

void Runner::flush_out() {
  while (out_off_ < out_.size()) {
    // A pipe cannot send(); SIGPIPE is ignored, so a gone host is an EPIPE.
    const ssize_t n = out_fd_
                          ? ::write(out_fd_.get(), out_.data() + out_off_, out_.size() - out_off_)
                          : ::send(sock_.get(), out_.data() + out_off_, out_.size() - out_off_,
                                   MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    if (n < 0) {
      exit_code_ = 0;  // the host is gone: nobody is left to report to
      out_.clear();
      out_off_ = 0;
      return;
    }
    out_off_ += static_cast<size_t>(n);
  }
  if (out_off_ == out_.size()) {
    out_.clear();
    out_off_ = 0;
  } else if (out_off_ > (1u << 20) && out_off_ * 2 > out_.size()) {
    out_.erase(0, out_off_);
    out_off_ = 0;
  }
  if (paused_ && out_.size() - out_off_ < kResumeBelow) set_paused(false);
  if (out_fd_) {
    watch_output(!out_.empty());
    return;
  }
  const uint32_t want = EPOLLIN | (out_.empty() ? 0u : uint32_t{EPOLLOUT});
  if (want != sock_events_) {
    epoll_event ev{};
    ev.events = want;
    ev.data.u64 = kSocketToken;
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, sock_.get(), &ev);
    sock_events_ = want;
  }
}

void Runner::watch_output(bool want) {
  const bool watching = (sock_events_ & EPOLLOUT) != 0;
  if (want == watching) return;
  watch_token(out_fd_.get(), kOutputToken, want ? uint32_t{EPOLLOUT} : 0u);
  sock_events_ = EPOLLIN | (want ? uint32_t{EPOLLOUT} : 0u);
}

void Runner::on_socket(uint32_t events) {
  if (events & EPOLLOUT) flush_out();
  if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR))) return;
  // Not zero-filled: a page of it is resident only once a read reaches it, and
  // an idle sandbox's runner has read only small frames (thousands of them live).
  static char buf[kReadChunk];
  const ssize_t n = ::read(sock_.get(), buf, sizeof buf);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) {
    exit_code_ = 0;  // EOF (or a reset): the host is done with this sandbox
    return;
  }
  if (auto s = decoder_.feed(std::string_view(buf, static_cast<size_t>(n))); !s) {
    // The stream cannot be resynchronised: say why and stop.
    reply_error(0, s.error());
    exit_code_ = 2;
    return;
  }
  while (decoder_.has_frame() && !exit_code_) handle(decoder_.pop());
}

void Runner::on_signals() {
  // Standard signals do not queue, so a few entries read them all: a short
  // read means the descriptor is empty (no second read for EAGAIN, per call).
  signalfd_siginfo sis[8];
  for (;;) {
    const ssize_t n = ::read(sigfd_.get(), sis, sizeof sis);
    if (n <= 0) break;
    const size_t got = static_cast<size_t>(n) / sizeof sis[0];
    for (size_t i = 0; i < got; ++i) {
      const int sig = static_cast<int>(sis[i].ssi_signo);
      if (sig == SIGCHLD) continue;
      // As PID 1, a signal from inside the sandbox (a visible sender pid) is
      // ignored, as the kernel does for PID 1: only the host may stop the runner.
      if (pid1_ && sis[i].ssi_pid != 0) continue;
      for (auto& [id, call] : calls_) (void)call->signal(sig);
      exit_code_ = 128 + sig;
    }
    if (got < std::size(sis)) break;
  }
  reap_children();
}

void Runner::reap_children() {
  bool settle = false;
  for (;;) {
    // Looked at before it is reaped: while it is a zombie its pid, which is
    // its process group's id, cannot be reused, so the group can be killed by it.
    siginfo_t si{};
    if (::waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid == 0) break;
    const pid_t pid = si.si_pid;
    Call* direct = nullptr;
    for (auto& [id, call] : calls_) {
      if (call->running_command() == pid) direct = call.get();
    }
    // A command of ours: what it started and left in its group goes with it.
    if (direct != nullptr) ::kill(-pid, SIGKILL);
    int status = 0;
    rusage ru{};
    if (::wait4(pid, &status, WNOHANG, &ru) != pid) break;
    if (direct != nullptr) {
      direct->on_command_exit(status, ru);
      settle = true;
      continue;
    }
    // As PID 1 with no supervisors, any other child was an orphan: its own
    // children (if any) have just reparented to us.
    if (direct_) {
      orphans_.reaped(pid);
      settle = true;
      continue;
    }
    // A supervisor died: killed by a process of the sandbox (same uid), or let
    // go. While busy, its call is told (and reads what is left on its socket);
    // idle, it is only forgotten.
    bool supervisor = false;
    for (auto it = calls_.begin(); it != calls_.end(); ++it) {
      if (it->second->supervisor_pid() != pid) continue;
      supervisor = true;
      it->second->on_supervisor_exit(status);
      if (it->second->supervisor_lost()) kill_orphans();
      if (it->second->finished()) calls_.erase(it);
      break;
    }
    if (supervisors_.reaped(pid)) supervisor = true;
    // An orphan died: its own children (a `setsid` started after the sweep,
    // say) have just reparented to us, so sweep again. Killed processes fork no
    // more, so this ends.
    if (!supervisor) kill_orphans();
  }
  if (settle) settle_direct_calls();
}

void Runner::settle_direct_calls() {
  std::vector<DirectCall> live;
  for (const auto& [id, call] : calls_) {
    if (call->direct() && !call->finished()) live.push_back(call->as_direct());
  }
  orphans_.sweep(live, [&](uint32_t id) { return calls_.at(id)->output_pipes(); });
  orphans_.kill_settled(live);
  for (auto it = calls_.begin(); it != calls_.end();) {
    Call& call = *it->second;
    if (call.awaiting_leftovers() && !orphans_.holds(it->first)) call.on_leftovers_gone();
    it = call.finished() ? calls_.erase(it) : std::next(it);
  }
}

void Runner::kill_orphans() {
  std::vector<pid_t> children;
  children_of(::getpid(), &children);
  for (pid_t pid : children) {
    // Our only children are supervisors; anything else escaped a killed one.
    if (!supervisors_.owns(pid)) kill_tree(pid);
  }
}

// ---- messages ----

void Runner::reply_error(uint32_t id, const Error& e) {
  send(MsgType::kError, id, proto::to_json(proto::ErrorMsg{e.where, e.message, e.sys_errno}));
}

void Runner::handle(proto::Frame&& f) {
  switch (f.type) {
    case MsgType::kExec:
      return handle_exec(std::move(f));
    case MsgType::kStdin:
    case MsgType::kStdinClose:
    case MsgType::kSignal:
    case MsgType::kResize:
      return handle_call_frame(f);
    case MsgType::kFileRead:
    case MsgType::kFileWrite:
    case MsgType::kFileList:
    case MsgType::kFileStat:
    case MsgType::kFileMkdir:
    case MsgType::kFileRemove:
    case MsgType::kFileMove:
      return handle_file(std::move(f));
    case MsgType::kFileWatch:
    case MsgType::kFileUnwatch:
      return handle_watch(f);
    case MsgType::kPortExchange:
      return handle_port(std::move(f));
    case MsgType::kPortInput:
      // One that ended already is no error: its port_end was sent.
      return ports_->input(f.call_id, f.data);
    case MsgType::kPortClose:
      return ports_->close(f.call_id);
    case MsgType::kSetEnv:
      return handle_set_env(f);
    case MsgType::kProbe:
      return handle_probe(f);
    case MsgType::kCredAnswer:
      return handle_cred_answer(f);
    case MsgType::kShutdown:
      exit_code_ = 0;
      return;
    case MsgType::kHello:
      return reply_error(f.call_id, make_error("hello", "already greeted"));
    default:
      return reply_error(f.call_id,
                         make_error(proto::type_name(f.type), "not a message the host sends"));
  }
}

void Runner::handle_cred_answer(proto::Frame& f) {
  auto a = proto::parse_cred_answer(f.json);
  if (a && cred_) cred_->answer(*a, f.data);
  // The frame's data held the value: gone from the runner once written on.
  if (!f.data.empty()) ::explicit_bzero(f.data.data(), f.data.size());
  if (!a) reply_error(0, a.error());
}

CallPlan Runner::plan_call(uint32_t id, proto::ExecRequest req) const {
  CallPlan plan;
  plan.id = id;
  std::map<std::string, std::string> env = extra_env_;
  for (const auto& [k, v] : req.env) env[k] = v;  // the request's own env wins
  for (const auto& [k, v] : env) plan.env.push_back(k + "=" + v);
  const std::string& name = req.argv[0];
  if (name.find('/') != std::string::npos) {
    plan.candidates.push_back(name);
  } else if (!name.empty()) {
    plan.searched = true;
    const auto path = env.find("PATH");
    // Checked up to the first that exists (none: "command not found" with no
    // process made); the rest go unchecked: the command child tries them in
    // order after an EACCES, as execvp does, and skips the missing ones.
    bool found = false;
    for (std::string dir : split(path == env.end() ? kDefaultPath : path->second, ':')) {
      if (dir.empty()) dir = ".";
      const std::string candidate = dir + "/" + name;
      const std::string check = dir[0] == '/' ? candidate : req.cwd + "/" + candidate;
      if (found || ::access(check.c_str(), F_OK) == 0) {
        found = true;
        plan.candidates.push_back(candidate);
      }
    }
  }
  plan.self_probe = plan.candidates.size() == 1 && is_own_self_probe(req, plan.candidates[0]);
  plan.direct = direct_;
  const std::string root = options_.root == "/" ? "" : options_.root;
  plan.disk_paths = {root + "/workspace", root + "/tmp"};
  plan.req = std::move(req);
  return plan;
}

// Whether exec'ing `path` with `req`'s argv would run this binary's
// self-probe (main.cc's dispatch): then it runs in the command child's fork
// instead (runner/self_probe.h, "In a fork"), with the same outcome. The
// file must be this very binary, one the command could exec, and not under
// the name rf-cred, which main.cc sends elsewhere.
bool Runner::is_own_self_probe(const proto::ExecRequest& req, const std::string& path) const {
  if (req.argv.size() != 2 || req.argv[1] != "self-probe" || req.pty || self_exe_.st_ino == 0)
    return false;
  const std::string& name = req.argv[0];
  const auto slash = name.rfind('/');
  if (name.compare(slash == std::string::npos ? 0 : slash + 1, std::string::npos, "rf-cred") == 0)
    return false;
  // Relative paths are the command's cwd's, not ours.
  if (path.empty() || path[0] != '/') return false;
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && st.st_dev == self_exe_.st_dev &&
         st.st_ino == self_exe_.st_ino && ::access(path.c_str(), X_OK) == 0;
}

void Runner::start_self_probe() {
  proto::ExecRequest req;
  // Never exec'd: forked (plan.self_probe), as for a call of the self-probe.
  req.argv = {"/proc/self/exe", "self-probe"};
  if (options_.start_probe_inside_only) req.argv.push_back("--inside-only");
  for (const std::string& name : *options_.start_probe_env) req.env[name] = "";
  req.cwd = "/";  // there wherever the runner runs; the probe reads nothing relative to it
  req.timeout_ms = 10000;
  req.started = false;
  CallPlan plan = plan_call(proto::kStartProbeCallId, std::move(req));
  plan.candidates = {"/proc/self/exe"};
  plan.searched = false;
  plan.self_probe = true;
  // Its frames are queued, and go out behind the hello.
  auto call = Call::start(*this, supervisors_, std::move(plan), {}, /*stdin_complete=*/true);
  if (!call) return reply_error(proto::kStartProbeCallId, call.error());
  calls_[proto::kStartProbeCallId] = std::move(*call);
}

void Runner::await_start_probe() {
  // The probe's own timeout ends it (its call's deadline) if it hangs; a
  // signal that ends the runner ends the wait (exit_code_).
  epoll_event events[16];
  while (calls_.count(proto::kStartProbeCallId) != 0 && !exit_code_) {
    const int n = ::epoll_wait(epoll_.get(), events, 16, -1);
    if (n < 0 && errno != EINTR) return;
    for (int i = 0; i < n && !exit_code_; ++i) on_event(events[i]);
  }
}

void Runner::handle_exec(proto::Frame&& f) {
  const uint32_t id = f.call_id;
  if (id == 0) return reply_error(0, make_error("exec", "call id 0 is reserved for the sandbox"));
  if (calls_.count(id) != 0) {
    return reply_error(id,
                       make_error("exec", "call id " + std::to_string(id) + " is already running"));
  }
  auto req = proto::parse_exec(f.json);
  if (!req) return reply_error(id, req.error());
  CallPlan plan = plan_call(id, std::move(*req));
  if (plan.candidates.empty()) {
    send(MsgType::kExit, id, proto::to_json(command_not_found(plan.req.argv[0])));
    return;
  }
  auto call = Call::start(*this, supervisors_, std::move(plan), std::move(f.data),
                          (f.flags & proto::kFlagStdinComplete) != 0);
  if (!call) return reply_error(id, call.error());
  calls_[id] = std::move(*call);
}

void Runner::handle_call_frame(const proto::Frame& f) {
  auto it = calls_.find(f.call_id);
  // A call that has ended: the host may race with its end, so this is not an error.
  if (it == calls_.end()) return;
  Call& call = *it->second;
  const std::string where =
      std::string(proto::type_name(f.type)) + " (call " + std::to_string(f.call_id) + ")";
  // Errors about a running call go out with call id 0: an exec gets exactly one of ERROR or EXIT.
  auto fail = [&](const Error& e) {
    reply_error(0, Error{where + ": " + e.where, e.message, e.sys_errno});
  };
  switch (f.type) {
    case MsgType::kStdin:
      call.add_stdin(f.data);
      break;
    case MsgType::kStdinClose:
      call.close_stdin();
      break;
    case MsgType::kSignal: {
      auto m = proto::parse_signal(f.json);
      if (!m) return fail(m.error());
      if (auto s = call.signal(m->signal); !s) fail(s.error());
      break;
    }
    case MsgType::kResize: {
      auto m = proto::parse_resize(f.json);
      if (!m) return fail(m.error());
      if (auto s = call.resize(m->rows, m->cols); !s) fail(s.error());
      break;
    }
    default:
      break;
  }
  if (call.finished()) calls_.erase(it);
}

void Runner::handle_file(proto::Frame&& f) {
  auto req = proto::parse_file_request(f.json);
  if (!req) return reply_error(f.call_id, req.error());
  switch (f.type) {
    case MsgType::kFileRead: {
      auto d = files_.read(req->path, req->max_bytes);
      if (!d) return reply_error(f.call_id, d.error());
      return send(MsgType::kFileData, f.call_id, proto::to_json(d->info), d->bytes);
    }
    case MsgType::kFileWrite: {
      auto s = files_.write(req->path, f.data, req->mode, req->parents);
      if (!s) return reply_error(f.call_id, s.error());
      return send(MsgType::kOk, f.call_id, "{}");
    }
    case MsgType::kFileList: {
      auto entries = files_.list(req->path);
      if (!entries) return reply_error(f.call_id, entries.error());
      return send(MsgType::kFileEntries, f.call_id, proto::to_json(*entries));
    }
    case MsgType::kFileMkdir:
    case MsgType::kFileRemove:
    case MsgType::kFileMove: {
      if (f.type == MsgType::kFileMove && req->to.empty()) {
        return reply_error(f.call_id, make_error("file.to", "file_move needs the new path"));
      }
      Status s = f.type == MsgType::kFileMkdir    ? files_.mkdir(req->path, req->parents)
                 : f.type == MsgType::kFileRemove ? files_.remove(req->path, req->recursive)
                                                  : files_.move(req->path, req->to);
      if (!s) return reply_error(f.call_id, s.error());
      return send(MsgType::kOk, f.call_id, "{}");
    }
    default: {
      auto info = files_.stat(req->path);
      if (!info) return reply_error(f.call_id, info.error());
      return send(MsgType::kFileInfo, f.call_id, proto::to_json(*info));
    }
  }
}

Runner::Runner(Options options, FileOps files)
    : options_(std::move(options)),
      files_(std::move(files)),
      supervisors_([this](int fd, pid_t pid, bool on) { watch_supervisor(fd, pid, on); }) {
  ports_ = std::make_unique<PortExchanges>(
      [this](int fd, uint32_t id, uint32_t events) { watch_token(fd, kPortBit | id, events); },
      [this](uint32_t id, std::string_view bytes) { send(MsgType::kPortData, id, "", bytes); },
      [this](uint32_t id, const std::string& error) {
        send(MsgType::kPortEnd, id, nlohmann::json{{"error", error}}.dump());
      });
}

void Runner::handle_port(proto::Frame&& f) {
  const uint32_t id = f.call_id;
  const auto j = nlohmann::json::parse(f.json, nullptr, false);
  if (!j.is_object() || !j.contains("port") || !j["port"].is_number_integer()) {
    return reply_error(id, make_error("port_exchange.port", "expected a port from 1 to 65535"));
  }
  if (id == 0 || ports_->has(id) || calls_.count(id) != 0 || watches_.count(id) != 0) {
    return reply_error(id, make_error("port_exchange", "id " + std::to_string(id) + " is in use"));
  }
  size_t max = PortExchanges::kMaxAnswer;
  if (j.contains("max")) {
    if (!j["max"].is_number_unsigned()) {
      return reply_error(id, make_error("port_exchange.max", "expected a number of bytes"));
    }
    max = j["max"].get<size_t>();
  }
  if (auto s = ports_->start(id, j["port"].get<int>(), std::move(f.data), max); !s) {
    return reply_error(id, s.error());
  }
}

void Runner::handle_watch(const proto::Frame& f) {
  const uint32_t id = f.call_id;
  if (f.type == MsgType::kFileUnwatch) {
    // One that already ended (its directory went) is no error: its end was sent.
    if (watches_.count(id) != 0) end_watch(id, "unwatched");
    return;
  }
  auto req = proto::parse_file_request(f.json);
  if (!req) return reply_error(id, req.error());
  const std::string where = "file_watch " + req->path;
  if (id == 0) return reply_error(0, make_error(where, "id 0 is reserved for the sandbox"));
  if (watches_.count(id) != 0 || calls_.count(id) != 0) {
    return reply_error(id, make_error(where, "id " + std::to_string(id) + " is in use"));
  }
  if (watches_.size() >= kMaxWatches) {
    return reply_error(id, make_error(where, "the sandbox has " + std::to_string(kMaxWatches) +
                                                 " watches, the most it keeps"));
  }
  auto w = DirWatch::start(files_, req->path, req->recursive);
  if (!w) return reply_error(id, w.error());
  watch_token((*w)->fd(), kWatchBit | id, EPOLLIN);
  watches_[id] = std::move(*w);
  send(MsgType::kOk, id, "{}");
}

void Runner::on_watch(uint32_t id) {
  auto it = watches_.find(id);
  if (it == watches_.end()) return;
  std::string why;
  auto events = it->second->read(files_, &why);
  for (size_t at = 0; at < events.size(); at += kEventsPerFrame) {
    const auto end =
        events.begin() + static_cast<long>(std::min(events.size(), at + kEventsPerFrame));
    send(
        MsgType::kWatchEvents, id,
        proto::to_json(std::vector<proto::FileEvent>(events.begin() + static_cast<long>(at), end)));
  }
  if (!why.empty()) end_watch(id, why);
}

void Runner::end_watch(uint32_t id, const std::string& why) {
  auto it = watches_.find(id);
  if (it == watches_.end()) return;
  watch_token(it->second->fd(), 0, 0);
  watches_.erase(it);
  send(MsgType::kWatchEnd, id, nlohmann::json{{"reason", why}}.dump());
}

void Runner::handle_set_env(const proto::Frame& f) {
  auto m = proto::parse_set_env(f.json);
  if (!m) return reply_error(f.call_id, m.error());
  for (const auto& [k, v] : m->set) extra_env_[k] = v;
  for (const auto& k : m->unset) extra_env_.erase(k);
  send(MsgType::kOk, f.call_id, "{}");
}

void Runner::handle_probe(const proto::Frame& f) {
  send(MsgType::kProbeResult, f.call_id, proto::to_json(probe_self()));
}

// ---- the end ----

void Runner::end_all_calls() {
  for (auto& [id, call] : calls_) call->kill("shutdown");
  if (direct_) orphans_.kill_all();
  // Each supervisor kills its call's tree and exits (its socket is closed);
  // wait a little so none outlives us when we are not PID 1 (as PID 1, our
  // exit ends the whole namespace anyway).
  std::vector<pid_t> supervisors = supervisors_.close_all();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (!supervisors.empty() && std::chrono::steady_clock::now() < deadline) {
    std::erase_if(supervisors, [](pid_t pid) { return ::waitpid(pid, nullptr, WNOHANG) != 0; });
    if (!supervisors.empty()) ::usleep(2000);
  }
  calls_.clear();
}

void Runner::flush_before_exit() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (out_off_ < out_.size() && std::chrono::steady_clock::now() < deadline) {
    pollfd p{out_fd(), POLLOUT, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const ssize_t n = out_fd_
                          ? ::write(out_fd_.get(), out_.data() + out_off_, out_.size() - out_off_)
                          : ::send(sock_.get(), out_.data() + out_off_, out_.size() - out_off_,
                                   MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) break;
    out_off_ += static_cast<size_t>(n);
  }
}

}  // namespace rf::runner
