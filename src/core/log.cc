#include "core/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace rf {

void init_logging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("ringfence");
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  logger->set_level(spdlog::level::from_str(level));
  spdlog::set_default_logger(logger);
}

}  // namespace rf
