// How a call ended, as the JSON object `sandbox exec --json` prints and the
// worker's store keeps.
#pragma once

#include <nlohmann/json.hpp>

#include "sandbox/sandbox.h"

namespace rf {

nlohmann::json exec_result_json(const ExecResult& r, const std::string& sandbox_id);

}  // namespace rf
