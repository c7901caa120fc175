#include "runner/supervisor.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "runner/call_handoff.h"
#include "runner/command_child.h"

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

// Starts the command (runner/command_child.h); its pid, or -1 with the
// failure in `r`. The call's stdio goes with the command.
pid_t start_call_command(ReceivedCall& call, Report* r) {
  const CommandStart s = start_command(call.args());
  // The command holds its own copies now: its stdout reaches EOF with it.
  call.in.reset();
  call.out.reset();
  call.err.reset();
  r->exec_stage = s.stage;
  r->exec_errno = s.err;
  return s.pid;
}

// A record for the runner. MSG_NOSIGNAL: a runner gone is no signal here.
void report(int sock, const Report& r) { (void)!::send(sock, &r, sizeof r, MSG_NOSIGNAL); }

// One call, start to end: kStarted once the command runs, kDone once nothing
// of it is left.
void supervise_call(ReceivedCall& call, int sock) {
  Report r;
  r.kind = kDone;
  const int64_t start_us = now_us();
  const pid_t command = start_call_command(call, &r);
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
  prepare_command_starts();
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
