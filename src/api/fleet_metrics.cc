#include "api/fleet_metrics.h"

#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/json_input.h"
#include "core/log.h"

namespace rf::api {
namespace {

// A label value as the text format escapes it.
std::string label_value(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

// `series` with worker="id" added to its labels.
std::string with_worker(const std::string& series, const std::string& worker) {
  const std::string label = "worker=\"" + label_value(worker) + "\"";
  const auto brace = series.find('{');
  if (brace == std::string::npos) return series + "{" + label + "}";
  return series.substr(0, brace + 1) + label + "," + series.substr(brace + 1);
}

std::string metric_name(const std::string& series) { return series.substr(0, series.find('{')); }

bool valid_series(const std::string& s) {
  // What a worker wrote is ours, but a line break would forge other series.
  return !s.empty() && s.find('\n') == std::string::npos;
}

}  // namespace

std::string fleet_metrics_text(store::Store& store, int64_t now_ms,
                               const std::map<std::string, uint64_t>& own) {
  std::string out;
  auto line = [&](const std::string& s) { out += s + "\n"; };
  if (auto live = store.live_calls()) {
    line("# HELP ringfence_calls_queued Calls waiting for a worker.");
    line("# TYPE ringfence_calls_queued gauge");
    line("ringfence_calls_queued " + std::to_string(live->queued));
    line("# HELP ringfence_calls_held Calls a worker has claimed or is running.");
    line("# TYPE ringfence_calls_held gauge");
    line("ringfence_calls_held " + std::to_string(live->held));
  } else {
    spdlog::warn("metrics: {}", live.error().to_string());
  }
  auto workers = store.workers();
  if (!workers) spdlog::warn("metrics: {}", workers.error().to_string());
  // By metric name, then series: each name's TYPE line once, before its series.
  struct Family {
    const char* type;
    std::vector<std::string> lines;
  };
  std::map<std::string, Family> families;
  for (const auto& [series, n] : own) {
    Family& f = families[metric_name(series)];
    f.type = "counter";
    f.lines.push_back(series + " " + std::to_string(n));
  }
  int live = 0;
  for (const auto& w : workers ? *workers : std::vector<store::WorkerRow>{}) {
    if (w.state != store::WorkerState::running || now_ms - w.heartbeat_at > kWorkerMetricsFreshMs)
      continue;
    ++live;
    const auto j = rf::parse_json_or_discarded(w.metrics_json);
    if (!j.is_object()) continue;
    for (const auto& [kind, type] : {std::pair{"counters", "counter"}, {"gauges", "gauge"}}) {
      if (!j.contains(kind) || !j[kind].is_object()) continue;
      for (const auto& [series, value] : j[kind].items()) {
        if (!valid_series(series) || !value.is_number()) continue;
        Family& f = families[metric_name(series)];
        f.type = type;
        f.lines.push_back(with_worker(series, w.id) + " " + value.dump());
      }
    }
  }
  line("# HELP ringfence_workers_live Workers heartbeating within the last 30 s.");
  line("# TYPE ringfence_workers_live gauge");
  line("ringfence_workers_live " + std::to_string(live));
  for (const auto& [name, f] : families) {
    line("# TYPE " + name + " " + f.type);
    for (const auto& l : f.lines) line(l);
  }
  return out;
}

}  // namespace rf::api
