// A tool call as API and MCP clients send it, and its answer: one parser and
// one shape for `POST /v1/sandboxes/{id}/exec` and MCP's sandbox_exec.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <variant>

#include "api/sandbox_service.h"
#include "sandbox/sandbox.h"

namespace rf::api {

// {"argv": [...]} or {"cmd": "shell string"}, plus stdin (or stdin_base64),
// env, cwd and timeout (seconds, or a duration such as "30s"). Unknown fields
// and wrong types are refused naming the field.
std::variant<ExecCall, ServiceError> parse_exec(const nlohmann::json& request);

// Text as a JSON string under `name` when it is UTF-8; otherwise `name` is
// null and the bytes are base64 under `<name>_base64`.
void put_bytes(nlohmann::json& j, const std::string& name, const std::string& bytes);

// Collects a call's output for a JSON answer.
class CollectSink : public OutputSink {
 public:
  bool wants_started() const override { return false; }
  void on_stdout(std::string_view d) override { out.append(d); }
  void on_stderr(std::string_view d) override { err.append(d); }
  std::string out, err;
};

// The answer to an exec: exec_result_json plus stdout and stderr.
nlohmann::json exec_answer(const ExecResult& r, const std::string& sandbox_id,
                           const CollectSink& output);

}  // namespace rf::api
