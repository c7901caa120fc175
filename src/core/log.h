// Host-side logging (spdlog). The tool runner does not log; it reports through
// the protocol.
#pragma once

#include <spdlog/spdlog.h>

namespace rf {

// Sets up the default logger on stderr; level from "debug", "info", "warn", ...
void init_logging(const std::string& level);

}  // namespace rf
