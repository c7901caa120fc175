// The fleet as `ringfence fleet status --json` prints it and GET /v1/fleet
// answers it (issue 16): each worker with its host, labels, state, load and
// last heartbeat. One shape for both, documented in docs/openapi.yaml.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "store/store.h"

namespace rf::api {

// Live: running and heartbeating within store::kLiveWorkerWindow of `now_ms`.
bool worker_is_live(const store::WorkerRow& w, int64_t now_ms);

// {"workers": [{id, host_id, hostname, pid, state, live, project, labels,
//   held_calls, live_sandboxes, started_at, heartbeat_at, heartbeat_age_ms,
//   epoch}], "live_workers": n}
nlohmann::json fleet_json(const std::vector<store::FleetWorker>& fleet, int64_t now_ms);

}  // namespace rf::api
