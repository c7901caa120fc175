// Host side: what a sandbox's cgroup counters say about one call, for every
// backend that can read its sandbox's cgroup (native; docker on a local
// daemon). One read per call, compared with the last call's: a new cgroup
// starts at zero, so nothing is read before a call. The read goes through
// the counter files the call holds open (Cgroup::hold_counters).
#pragma once

#include <algorithm>
#include <mutex>

#include "host/cgroup.h"
#include "sandbox/sandbox.h"

namespace rf::host {

class CallUsage {
 public:
  // Adds to `r` what changed since the last call: peak memory, an OOM kill
  // (limit "memory"), the pids limit hit (limit "pids").
  void fold(const CgroupUsage& after, ExecResult& r) {
    CgroupUsage before;
    {
      std::lock_guard lock(mu_);
      before = last_;
      last_ = after;
    }
    r.peak_memory_bytes = std::max(r.peak_memory_bytes, after.memory_peak_bytes);
    if (after.oom_kills > before.oom_kills) {
      r.oom_killed = true;
      if (r.limit.empty() || r.limit == "disk") r.limit = "memory";
    }
    if (after.pids_max_hits > before.pids_max_hits && r.limit.empty()) r.limit = "pids";
  }

 private:
  std::mutex mu_;  // calls run on several threads
  CgroupUsage last_;
};

}  // namespace rf::host
