// The runner's call supervisors (runner/supervisor.h), kept between calls.
// Forking a supervisor per call cost a copy of the runner's page tables and
// their teardown (~0.2-0.3 ms of a 1.5 ms call here); a supervisor now serves
// calls one after another over its socket (runner/call_handoff.h), and a new
// one is forked only when every one is busy. Each still runs one call at a
// time and reports kDone only once nothing of that call is left, so a call's
// tree and its leftovers are exactly the processes below its supervisor.
// One idle for a second is let go (Runner: a 1 s timer while any is idle): a
// kept process cost each live sandbox ~120 KiB of host memory (issue 10's
// density bench), which is worth it only while calls keep coming.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "core/result.h"
#include "core/unique_fd.h"
#include "runner/supervisor.h"

namespace rf::runner {

class SupervisorPool {
 public:
  // Puts a supervisor's socket in the runner's event loop (`on`) or takes it
  // out: its Reports come back on it (runner/call_handoff.h). Watched from
  // fork to close, so a call costs no epoll_ctl for them.
  using Watch = std::function<void(int fd, pid_t pid, bool on)>;

  // Keeps at most `max_idle` idle supervisors; more are let go as calls end.
  explicit SupervisorPool(Watch watch, size_t max_idle = 8)
      : watch_(std::move(watch)), max_idle_(max_idle) {}

  // Hands `a` (call `call_id`) to an idle supervisor, or to a new one; returns its pid.
  Result<pid_t> start(const ChildArgs& a, uint32_t call_id);
  // Supervisor `pid`'s socket, where its call's Reports are read; -1 if none.
  int socket_of(pid_t pid) const;
  // Supervisor `pid`'s socket is readable: the id of the call it is busy
  // with, or 0 when idle (then it is dying: EOF; it is let go).
  uint32_t on_event(pid_t pid);
  // Supervisor `pid`'s socket reached its end while busy (it is dying): out
  // of the loop, which would otherwise wake for it until it is reaped.
  void hung_up(pid_t pid);
  // Asks supervisor `pid` to end its call's tree now: shuts the runner's side
  // of its socket, which it reads as EOF. It still reports kDone, and then
  // exits instead of taking another call.
  void stop_call(pid_t pid);
  // The call of supervisor `pid` is over (its kDone was read): it is idle again.
  void finished(pid_t pid);
  // Supervisor `pid`'s call was abandoned before its kDone: closes its socket,
  // so it exits once it has ended that call.
  void let_go(pid_t pid);
  // Supervisor `pid` was reaped: forgets it. False if it was not ours.
  bool reaped(pid_t pid);
  // Is `pid` one of ours (idle or busy)?
  bool owns(pid_t pid) const { return sockets_.count(pid) != 0; }
  // Forks `n` idle supervisors ahead of the calls that will need them.
  Status prefork(size_t n);
  // Closes every socket: each supervisor exits once its call (if any) has
  // ended. Returns their pids.
  std::vector<pid_t> close_all();
  // Lets go of the supervisors idle since before `cutoff`.
  void let_go_idle_since(std::chrono::steady_clock::time_point cutoff);
  bool has_idle() const { return !idle_.empty(); }

 private:
  Result<pid_t> fork_one();
  // Sends the call and waits for the supervisor to say it has it.
  Status hand_to(pid_t pid, const ChildArgs& a);
  // Unwatches and closes supervisor `pid`'s socket and forgets it.
  void drop(pid_t pid);
  static constexpr int kAckTimeoutMs = 1000;
  static constexpr int kAckGiveUpMs = 30000;  // for one running but starved of CPU

  Watch watch_;
  size_t max_idle_;
  std::map<pid_t, UniqueFd> sockets_;  // every supervisor's socket, by pid
  // Idle supervisors and since when, most recently idle last.
  std::vector<std::pair<pid_t, std::chrono::steady_clock::time_point>> idle_;
  std::map<pid_t, uint32_t> busy_;  // supervisor -> the call it has
  std::set<pid_t> stopping_;        // stop_call'd: not to be handed another call
};

}  // namespace rf::runner
