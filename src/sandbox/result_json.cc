#include "sandbox/result_json.h"

namespace rf {

nlohmann::json exec_result_json(const ExecResult& r, const std::string& sandbox_id) {
  auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  nlohmann::json j = {
      {"sandbox_id", sandbox_id},
      {"exit_code", r.exit_code},
      {"signal", r.signal},
      {"timed_out", r.timed_out},
      {"oom_killed", r.oom_killed},
      {"limit", r.limit.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.limit)},
      {"output_truncated", r.output_truncated},
      {"wall_ms", ms(r.wall)},
      {"cpu_user_ms", ms(r.cpu_user)},
      {"cpu_system_ms", ms(r.cpu_system)},
      {"peak_memory_bytes", r.peak_memory_bytes},
  };
  if (!r.error.empty()) j["error"] = r.error;
  return j;
}

}  // namespace rf
