#include "api/fleet_view.h"

namespace rf::api {

bool worker_is_live(const store::WorkerRow& w, int64_t now_ms) {
  return w.state == store::WorkerState::running &&
         w.heartbeat_at >= now_ms - store::kLiveWorkerWindow.count();
}

nlohmann::json fleet_json(const std::vector<store::FleetWorker>& fleet, int64_t now_ms) {
  nlohmann::json workers = nlohmann::json::array();
  int live = 0;
  for (const store::FleetWorker& f : fleet) {
    const store::WorkerRow& w = f.worker;
    const bool is_live = worker_is_live(w, now_ms);
    live += is_live ? 1 : 0;
    nlohmann::json labels = nlohmann::json::object();
    for (const auto& [k, v] : w.labels) labels[k] = v;
    workers.push_back({{"id", w.id},
                       {"host_id", w.host_id},
                       {"hostname", w.hostname},
                       {"pid", w.pid},
                       {"state", std::string(store::to_string(w.state))},
                       {"live", is_live},
                       {"project", w.project ? nlohmann::json(*w.project) : nlohmann::json()},
                       {"labels", labels},
                       {"held_calls", f.held_calls},
                       {"live_sandboxes", f.live_sandboxes},
                       {"started_at", w.started_at},
                       {"heartbeat_at", w.heartbeat_at},
                       {"heartbeat_age_ms", now_ms - w.heartbeat_at},
                       {"epoch", w.epoch},
                       {"admin", w.admin == store::WorkerAdmin::none
                                     ? nlohmann::json()
                                     : nlohmann::json(std::string(store::to_string(w.admin)))},
                       {"version", w.version}});
  }
  return {{"workers", workers}, {"live_workers", live}};
}

}  // namespace rf::api
