#include "runner/supervisor_pool.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include "runner/call_handoff.h"

namespace rf::runner {

Result<pid_t> SupervisorPool::fork_one() {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    return sys_error("exec: socketpair");
  }
  UniqueFd ours(sv[0]), theirs(sv[1]);
  // fork, not vfork: the supervisor lives on and allocates (the runner is
  // single-threaded, so its heap is consistent in the child).
  const pid_t pid = ::fork();
  if (pid < 0) return sys_error("exec: fork");
  if (pid == 0) serve_calls(theirs.get());
  sockets_[pid] = std::move(ours);
  return pid;
}

Status SupervisorPool::prefork(size_t n) {
  for (size_t i = 0; i < n; ++i) {
    auto pid = fork_one();
    if (!pid) return pid.take_error();
    idle_.push_back(*pid);
  }
  return ok_status();
}

Status SupervisorPool::hand_to(pid_t pid, const ChildArgs& a) {
  const int sock = sockets_[pid].get();
  RF_TRY(send_call(sock, a));
  // It says it has the call before it starts the command: a supervisor killed
  // after it was chosen (a call's process may kill the idle ones, and the kill
  // can still be on its way) says nothing, and the call goes to another one
  // with nothing started. Waiting costs one wake-up of an idle process.
  pollfd p{sock, POLLIN, 0};
  int ready;
  while ((ready = ::poll(&p, 1, kAckTimeoutMs)) < 0 && errno == EINTR) {
  }
  char ack = 0;
  if (ready == 1 && ::read(sock, &ack, 1) == 1 && ack == kCallAck) return ok_status();
  return make_error("exec: hand the call to supervisor " + std::to_string(pid),
                    ready == 0 ? "no answer within " + std::to_string(kAckTimeoutMs) + " ms"
                               : std::string("it ended"));
}

Result<pid_t> SupervisorPool::start(const ChildArgs& a) {
  while (!idle_.empty()) {
    const pid_t pid = idle_.back();
    idle_.pop_back();
    // A process of an earlier call (same uid) may have stopped it while idle.
    ::kill(pid, SIGCONT);
    if (hand_to(pid, a)) return pid;
    // Killed (or stopped again) while idle: end it (it is reaped later) and
    // try another.
    ::kill(pid, SIGKILL);
    sockets_.erase(pid);
  }
  auto pid = fork_one();
  if (!pid) return pid.take_error();
  if (auto handed = hand_to(*pid, a); !handed) {
    ::kill(*pid, SIGKILL);
    sockets_.erase(*pid);
    return handed.take_error();
  }
  return pid;
}

void SupervisorPool::finished(pid_t pid) {
  auto it = sockets_.find(pid);
  if (it == sockets_.end()) return;
  if (idle_.size() >= max_idle_) {
    sockets_.erase(it);  // EOF: it exits
    return;
  }
  idle_.push_back(pid);
}

void SupervisorPool::let_go(pid_t pid) {
  std::erase(idle_, pid);
  sockets_.erase(pid);
}

bool SupervisorPool::reaped(pid_t pid) {
  std::erase(idle_, pid);
  return sockets_.erase(pid) != 0;
}

std::vector<pid_t> SupervisorPool::close_all() {
  std::vector<pid_t> pids;
  for (const auto& [pid, fd] : sockets_) pids.push_back(pid);
  sockets_.clear();
  idle_.clear();
  return pids;
}

}  // namespace rf::runner
