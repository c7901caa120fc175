// What this worker's live sandboxes use now (issue 41 item 6), sent with each
// heartbeat in the worker's metrics (store::WorkerRow::metrics_json, key
// "sandboxes"), so the console shows memory and CPU in use beside their
// limits for every sandbox of the fleet, with no call to any worker.
// CPU is the share of one core used since the previous sample. Sampled at
// most every kEvery (the heartbeat may come more often): what is sent in
// between is the last sample.
#pragma once

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "store/store.h"

namespace rf::worker {

class SandboxUsage {
 public:
  // {id: {"memory_bytes": N, "cpu_percent": X}} for those of `live` held by
  // `worker_id` that have a host pid whose cgroup can be read.
  nlohmann::json sample(const std::vector<store::SandboxRow>& live, const std::string& worker_id);
  // Whether a sample is due (else last() is still what they use), so the
  // store is not asked for the live sandboxes at every heartbeat.
  bool due() const {
    return last_at_ == std::chrono::steady_clock::time_point{} ||
           std::chrono::steady_clock::now() - last_at_ >= kEvery;
  }
  const nlohmann::json& last() const { return last_; }

 private:
  static constexpr std::chrono::seconds kEvery{2};
  nlohmann::json last_ = nlohmann::json::object();
  std::chrono::steady_clock::time_point last_at_{};
  struct Seen {
    uint64_t cpu_usec = 0;
    std::chrono::steady_clock::time_point at;
  };
  std::map<std::string, Seen> seen_;  // by sandbox id, from the previous sample
};

}  // namespace rf::worker
