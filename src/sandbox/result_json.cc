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

Result<ExecResult> exec_result_from_json(const nlohmann::json& j) {
  if (!j.is_object()) return make_error("result", "expected an object");
  ExecResult r;
  auto integer = [&](const char* key, auto& out) -> Status {
    if (!j.contains(key) || !j[key].is_number_integer()) {
      return make_error(std::string("result.") + key, "expected a whole number");
    }
    out = j[key].get<std::remove_reference_t<decltype(out)>>();
    return ok_status();
  };
  auto boolean = [&](const char* key, bool& out) -> Status {
    if (!j.contains(key) || !j[key].is_boolean()) {
      return make_error(std::string("result.") + key, "expected true or false");
    }
    out = j[key].get<bool>();
    return ok_status();
  };
  auto micros = [&](const char* key, std::chrono::microseconds& out) -> Status {
    if (!j.contains(key) || !j[key].is_number()) {
      return make_error(std::string("result.") + key, "expected milliseconds");
    }
    out = std::chrono::microseconds(static_cast<int64_t>(j[key].get<double>() * 1000.0));
    return ok_status();
  };
  RF_TRY(integer("exit_code", r.exit_code));
  RF_TRY(integer("signal", r.signal));
  RF_TRY(boolean("timed_out", r.timed_out));
  RF_TRY(boolean("oom_killed", r.oom_killed));
  RF_TRY(boolean("output_truncated", r.output_truncated));
  RF_TRY(micros("wall_ms", r.wall));
  RF_TRY(micros("cpu_user_ms", r.cpu_user));
  RF_TRY(micros("cpu_system_ms", r.cpu_system));
  RF_TRY(integer("peak_memory_bytes", r.peak_memory_bytes));
  if (j.contains("limit") && j["limit"].is_string()) r.limit = j["limit"].get<std::string>();
  if (j.contains("error") && j["error"].is_string()) r.error = j["error"].get<std::string>();
  return r;
}

}  // namespace rf
