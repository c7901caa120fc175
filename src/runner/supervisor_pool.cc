#include "runner/supervisor_pool.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include "core/proc_stat.h"
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
    idle_.emplace_back(*pid, std::chrono::steady_clock::now());
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
  // A second without an answer: one stopped, traced or asleep is given up;
  // one that is only waiting for a CPU or in the kernel (a sandbox at its cpu
  // or memory limit, a busy host: seen in the 64-client load test) is waited
  // for, up to kAckGiveUpMs.
  char state = '?';  // unknown
  int waited = 0;
  while (waited < kAckGiveUpMs) {
    pollfd p{sock, POLLIN, 0};
    int ready;
    while ((ready = ::poll(&p, 1, kAckTimeoutMs)) < 0 && errno == EINTR) {
    }
    if (ready == 1) {
      char ack = 0;
      if (::read(sock, &ack, 1) == 1 && ack == kCallAck) return ok_status();
      return make_error("exec: hand the call to supervisor " + std::to_string(pid), "it ended");
    }
    waited += kAckTimeoutMs;
    const auto st = read_proc_stat(pid);
    state = st ? st->state : '?';
    if (state != 'R' && state != 'D') break;
  }
  return make_error("exec: hand the call to supervisor " + std::to_string(pid),
                    "no answer within " + std::to_string(waited) + " ms (state " +
                        (state == '?' ? std::string("unknown") : std::string(1, state)) + ")");
}

Result<pid_t> SupervisorPool::start(const ChildArgs& a) {
  while (!idle_.empty()) {
    const pid_t pid = idle_.back().first;
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
  idle_.emplace_back(pid, std::chrono::steady_clock::now());
}

void SupervisorPool::let_go(pid_t pid) {
  std::erase_if(idle_, [pid](const auto& i) { return i.first == pid; });
  sockets_.erase(pid);
}

bool SupervisorPool::reaped(pid_t pid) {
  std::erase_if(idle_, [pid](const auto& i) { return i.first == pid; });
  return sockets_.erase(pid) != 0;
}

void SupervisorPool::let_go_idle_since(std::chrono::steady_clock::time_point cutoff) {
  // Oldest first: the ones idle longest are at the front.
  while (!idle_.empty() && idle_.front().second < cutoff) {
    sockets_.erase(idle_.front().first);  // EOF: it exits
    idle_.erase(idle_.begin());
  }
}

std::vector<pid_t> SupervisorPool::close_all() {
  std::vector<pid_t> pids;
  for (const auto& [pid, fd] : sockets_) pids.push_back(pid);
  sockets_.clear();
  idle_.clear();
  return pids;
}

}  // namespace rf::runner
