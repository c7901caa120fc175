// Whose each orphan is, when the runner starts commands itself.
//
// As PID 1 the runner forks each call's command directly (call.h, "Process
// tree"): no supervisor per call. Whatever a command leaves behind then
// reparents to the runner, as everything in the sandbox does, and the kernel
// does not say which call started it. The ledger says it, from what the
// kernel keeps of a process, in this order:
//   1. its process group: a call's command leads one of its own, which all it
//      starts inherit (unless they leave it: setsid, setpgid);
//   2. the process group of an orphan already attributed (one that left its
//      call's group, and what it started since);
//   3. the write end of a call's stdout or stderr pipe, which it still holds
//      (/proc/PID/fd): a daemon that did not close its stdio;
//   4. else any of the calls running when it was found.
// An orphan of one call is killed (with everything below it) as that call's
// command ends, and the call reports its end only once those are reaped. One
// that could be any of several calls is killed once all of them have ended
// their commands (the last of them waits for it): it holds none of their
// pipes, so it delays none of the others.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "core/unique_fd.h"

namespace rf::runner {

// A call whose command the runner started itself, while it is not finished.
struct DirectCall {
  uint32_t id = 0;
  pid_t pgid = 0;              // its command's pid, the id of the group it leads
  bool command_ended = false;  // its command was reaped
};

class OrphanLedger {
 public:
  // Opens this process's list of children (/proc/self/task/TID/children of
  // the calling thread, where orphans reparent to PID 1). False if /proc
  // cannot say: then no orphan is found, and only process groups are killed.
  bool open();

  // The inodes of a call's stdout and stderr pipes still open.
  using PipesOf = std::function<std::vector<ino_t>(uint32_t call)>;
  // Reads the runner's children and attributes each one not seen before and
  // not a live call's command. `pipes_of` is asked only when an orphan
  // could otherwise be of several calls.
  void sweep(const std::vector<DirectCall>& live, const PipesOf& pipes_of);
  // Kills every orphan whose calls have all ended their commands or finished.
  void kill_settled(const std::vector<DirectCall>& live);
  // Is an orphan of `call` alone, or one killed at its end, still to be reaped?
  bool holds(uint32_t call) const;
  // `pid` was reaped: true if it was an orphan here.
  bool reaped(pid_t pid) { return orphans_.erase(pid) != 0; }
  // Kills every orphan (shutdown).
  void kill_all();

 private:
  struct Orphan {
    pid_t pgid = 0;
    std::vector<uint32_t> calls;  // the calls it may be of; one when known
    bool killed = false;
  };
  std::vector<uint32_t> owners(pid_t pid, pid_t pgid, const std::vector<DirectCall>& live,
                               const PipesOf& pipes_of) const;

  UniqueFd children_;
  std::map<pid_t, Orphan> orphans_;
};

}  // namespace rf::runner
