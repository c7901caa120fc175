#include "host/call_usage.h"

#include <algorithm>

#include "core/log.h"

namespace rf::host {

CallWatch watch_call(const Cgroup* cgroup) {
  CallWatch watch;
  if (cgroup == nullptr) return watch;
  watch.counters = cgroup->hold_counters();
  auto peak = cgroup->start_call_peak();
  if (peak) {
    watch.peak = std::move(*peak);
  } else {
    // Not a failure of the call: its result says its own ru_maxrss instead.
    spdlog::debug("no per-call peak memory: {}", peak.error().to_string());
  }
  return watch;
}

void CallUsage::fold(CallWatch& watch, ExecResult& r) {
  if (watch.peak) {
    if (auto peak = watch.peak->finish())
      r.peak_memory_bytes = std::max(r.peak_memory_bytes, *peak);
    watch.peak.reset();
  }
  if (watch.counters) {
    if (auto after = watch.counters->read()) fold(*after, r);
  }
}

void CallUsage::fold(const CgroupEvents& after, ExecResult& r) {
  CgroupEvents before;
  {
    std::lock_guard lock(mu_);
    before = last_;
    last_ = after;
  }
  if (after.oom_kills > before.oom_kills) {
    r.oom_killed = true;
    if (r.limit.empty() || r.limit == "disk") r.limit = "memory";
  }
  if (after.pids_max_hits > before.pids_max_hits && r.limit.empty()) r.limit = "pids";
}

}  // namespace rf::host
