#include "worker/sandbox_usage.h"

#include <cmath>

#include "host/cgroup_now.h"

namespace rf::worker {

nlohmann::json SandboxUsage::sample(const std::vector<store::SandboxRow>& live,
                                    const std::string& worker_id) {
  const auto now = std::chrono::steady_clock::now();
  if (last_at_ != std::chrono::steady_clock::time_point{} && now - last_at_ < kEvery) return last_;
  last_at_ = now;
  nlohmann::json out = nlohmann::json::object();
  std::map<std::string, Seen> now_seen;
  for (const auto& s : live) {
    if (s.worker_id != worker_id || !s.host_pid || *s.host_pid <= 0) continue;
    auto use = host::resources_of_process(static_cast<pid_t>(*s.host_pid));
    if (!use) continue;  // gone meanwhile, or not ours to read
    nlohmann::json row = {{"memory_bytes", use->memory_bytes}};
    if (auto it = seen_.find(s.id); it != seen_.end() && use->cpu_usec >= it->second.cpu_usec) {
      const auto elapsed =
          std::chrono::duration_cast<std::chrono::microseconds>(now - it->second.at).count();
      if (elapsed > 0) {
        const double pct = 100.0 * static_cast<double>(use->cpu_usec - it->second.cpu_usec) /
                           static_cast<double>(elapsed);
        row["cpu_percent"] = std::round(pct * 10) / 10;
      }
    }
    out[s.id] = std::move(row);
    now_seen[s.id] = Seen{use->cpu_usec, now};
  }
  seen_ = std::move(now_seen);
  last_ = out;
  return out;
}

}  // namespace rf::worker
