// Shared by the benchmarks: an output sink that drops everything, and
// percentiles of a list of samples.
#pragma once

#include <algorithm>
#include <string_view>
#include <vector>

#include "sandbox/sandbox.h"

namespace rf::bench {

struct NullSink : rf::OutputSink {
  void on_stdout(std::string_view) override {}
  void on_stderr(std::string_view) override {}
};

struct Stats {
  double p50, p99, mean;
};

inline Stats summarise(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  double sum = 0;
  for (double v : us) sum += v;
  auto pct = [&](double p) {
    return us[std::min(us.size() - 1, static_cast<size_t>(p * us.size()))];
  };
  return {pct(0.50), pct(0.99), sum / us.size()};
}

}  // namespace rf::bench
