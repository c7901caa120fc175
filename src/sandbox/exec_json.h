// A tool call as JSON (the API's and MCP's exec, a worker's door), and bytes
// in JSON: one parser and one shape for every door.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/result.h"
#include "sandbox/sandbox.h"

namespace rf {

// {"argv": [...]} or {"cmd": "shell string"}, plus stdin (or stdin_base64),
// env, cwd and timeout (seconds, or a duration such as "30s"). Unknown fields
// and wrong types are refused: the error's `where` is the field.
Result<ExecCall> parse_exec_json(const nlohmann::json& request);

// Text as a JSON string under `name` when it is UTF-8; otherwise `name` is
// null and the bytes are base64 under `<name>_base64`.
void put_bytes(nlohmann::json& j, const std::string& name, const std::string& bytes);
// What put_bytes put; nullopt when neither form is there.
std::optional<std::string> bytes_of(const nlohmann::json& j, const std::string& name);

}  // namespace rf
