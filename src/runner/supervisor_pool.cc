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
  watch_(ours.get(), pid, true);
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
    // poll, not a blocking read: a read sleeps on the socket's wait queue
    // unkeyed, and the supervisor taking the call in wakes it for nothing
    // (the kernel's write-space wake-up for the runner's side).
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

Result<pid_t> SupervisorPool::start(const ChildArgs& a, uint32_t call_id) {
  while (!idle_.empty()) {
    const pid_t pid = idle_.back().first;
    idle_.pop_back();
    // A process of an earlier call (same uid) may have stopped it while idle.
    ::kill(pid, SIGCONT);
    if (hand_to(pid, a)) {
      busy_[pid] = call_id;
      return pid;
    }
    // Killed (or stopped again) while idle: end it (it is reaped later) and
    // try another.
    ::kill(pid, SIGKILL);
    drop(pid);
  }
  auto pid = fork_one();
  if (!pid) return pid.take_error();
  if (auto handed = hand_to(*pid, a); !handed) {
    ::kill(*pid, SIGKILL);
    drop(*pid);
    return handed.take_error();
  }
  busy_[*pid] = call_id;
  return pid;
}

int SupervisorPool::socket_of(pid_t pid) const {
  auto it = sockets_.find(pid);
  return it == sockets_.end() ? -1 : it->second.get();
}

uint32_t SupervisorPool::on_event(pid_t pid) {
  if (auto it = busy_.find(pid); it != busy_.end()) return it->second;
  // An idle one sends nothing: this is its end (killed by a process of the
  // sandbox). Out of the loop now, not only once it is reaped.
  if (sockets_.count(pid) != 0) drop(pid);
  return 0;
}

void SupervisorPool::hung_up(pid_t pid) {
  if (auto it = sockets_.find(pid); it != sockets_.end()) watch_(it->second.get(), pid, false);
}

void SupervisorPool::stop_call(pid_t pid) {
  auto it = sockets_.find(pid);
  if (it == sockets_.end() || !stopping_.insert(pid).second) return;
  ::shutdown(it->second.get(), SHUT_WR);
}

void SupervisorPool::finished(pid_t pid) {
  busy_.erase(pid);
  if (sockets_.count(pid) == 0) return;
  if (stopping_.count(pid) != 0 || idle_.size() >= max_idle_) return drop(pid);  // EOF: it exits
  idle_.emplace_back(pid, std::chrono::steady_clock::now());
}

void SupervisorPool::let_go(pid_t pid) { drop(pid); }

bool SupervisorPool::reaped(pid_t pid) {
  const bool ours = sockets_.count(pid) != 0;
  drop(pid);
  return ours;
}

void SupervisorPool::drop(pid_t pid) {
  std::erase_if(idle_, [pid](const auto& i) { return i.first == pid; });
  busy_.erase(pid);
  stopping_.erase(pid);
  auto it = sockets_.find(pid);
  if (it == sockets_.end()) return;
  watch_(it->second.get(), pid, false);
  sockets_.erase(it);
}

void SupervisorPool::let_go_idle_since(std::chrono::steady_clock::time_point cutoff) {
  // Oldest first: the ones idle longest are at the front.
  while (!idle_.empty() && idle_.front().second < cutoff) drop(idle_.front().first);
}

std::vector<pid_t> SupervisorPool::close_all() {
  std::vector<pid_t> pids;
  for (const auto& [pid, fd] : sockets_) pids.push_back(pid);
  for (pid_t pid : pids) drop(pid);
  return pids;
}

}  // namespace rf::runner
