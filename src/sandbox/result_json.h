// How a call ended, as the JSON object `sandbox exec --json` prints and the
// worker's store keeps.
#pragma once

#include <nlohmann/json.hpp>

#include "sandbox/sandbox.h"

namespace rf {

nlohmann::json exec_result_json(const ExecResult& r, const std::string& sandbox_id);
// The result back from that JSON (a door's answer); refused naming the
// first field that is missing or of the wrong type.
Result<ExecResult> exec_result_from_json(const nlohmann::json& j);

}  // namespace rf
