// Host-side logging (spdlog). The tool runner does not log; it reports through
// the protocol.
#pragma once

#include <spdlog/spdlog.h>

#include <string>
#include <string_view>

#include "core/result.h"

namespace rf {

// Sets up the default logger on stderr; level from "debug", "info", "warn", ...
void init_logging(const std::string& level);

// For clean-up and crash-recovery paths that must go on after a failure, but
// never silently: logs a failed `result` at WARN, saying what was being done.
// True when it succeeded.
template <class T>
bool warn_unless_ok(const Result<T>& result, std::string_view doing) {
  if (result.ok()) return true;
  spdlog::warn("{}: {}", doing, result.error().to_string());
  return false;
}

}  // namespace rf
