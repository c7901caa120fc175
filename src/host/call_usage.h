// Host side: what a sandbox's cgroup says about one call, for every backend
// that can read its sandbox's cgroup (native; docker on a local daemon): the
// sandbox's peak memory while the call ran, an OOM kill, the pids limit hit.
// A call is watched from just before its request is sent to its end.
#pragma once

#include <memory>
#include <mutex>

#include "host/cgroup.h"
#include "sandbox/sandbox.h"

namespace rf::host {

// What a call holds while it runs.
struct CallWatch {
  // The cgroup's event counters, shared by calls that overlap
  // (Cgroup::hold_counters); null without a cgroup.
  std::shared_ptr<const CgroupCounters> counters;
  // The cgroup's peak memory since this call started (Cgroup::start_call_peak);
  // null where the cgroup cannot say it for one call.
  std::shared_ptr<CallPeak> peak;
};

// Starts watching a call in `cgroup` (null: a backend without one).
CallWatch watch_call(const Cgroup* cgroup);

class CallUsage {
 public:
  // Adds to `r` what `watch` saw (and lets its peak go): the sandbox's peak
  // memory while the call ran, where it raises the call's own ru_maxrss;
  // without one, ru_maxrss stays the whole answer. Then fold(events).
  void fold(CallWatch& watch, ExecResult& r);
  // An OOM kill (limit "memory") or the pids limit hit (limit "pids") since
  // the last call's end: a new cgroup starts at zero, so nothing is read
  // before a call.
  void fold(const CgroupEvents& after, ExecResult& r);

 private:
  std::mutex mu_;  // calls run on several threads
  CgroupEvents last_;
};

}  // namespace rf::host
