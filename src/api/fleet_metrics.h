// The workers' half of serve's /metrics: the store's queue depth, and each
// live worker's figures as its last heartbeat wrote them
// (store::WorkerRow::metrics_json), labelled with the worker's id. Any serve
// on the same store sees the whole fleet; no worker is scraped.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "store/store.h"

namespace rf::api {

// Workers whose heartbeat is older than this are left out (stopped, or lost).
inline constexpr int64_t kWorkerMetricsFreshMs = 30'000;

// Prometheus text (0.0.4) lines; `now_ms` on the store's clock. `own`: the
// serving process's counters (core/counters.h), shown without a worker label
// in the same families as the workers' series of the same names.
std::string fleet_metrics_text(store::Store& store, int64_t now_ms,
                               const std::map<std::string, uint64_t>& own = {});

}  // namespace rf::api
