// Process-wide event counters, named as Prometheus series ("name" or
// "name{label=\"value\"}"). A worker sends a snapshot with each heartbeat and
// `serve` shows every live worker's at /metrics, so a fleet is seen from one
// place without scraping each host.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace rf::counters {

// Adds `n` to the counter `series`, made at 0 the first time.
void add(std::string_view series, uint64_t n = 1);
// Every counter of this process, by series.
std::map<std::string, uint64_t> snapshot();

}  // namespace rf::counters
