// A tool call as API and MCP clients send it, and its answer: the shapes of
// sandbox/exec_json.h, with the API's errors (a 400 naming the field).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <variant>

#include "api/sandbox_service.h"
#include "sandbox/exec_json.h"
#include "sandbox/result_json.h"
#include "sandbox/sandbox.h"

namespace rf::api {

inline std::variant<ExecCall, ServiceError> parse_exec(const nlohmann::json& request) {
  auto call = parse_exec_json(request);
  if (!call) return ServiceError{400, call.error().where, call.error().message};
  return std::move(*call);
}

// Collects a call's output for a JSON answer.
class CollectSink : public OutputSink {
 public:
  bool wants_started() const override { return false; }
  void on_stdout(std::string_view d) override { out.append(d); }
  void on_stderr(std::string_view d) override { err.append(d); }
  std::string out, err;
};

// The answer to an exec: exec_result_json plus stdout and stderr.
inline nlohmann::json exec_answer(const ExecResult& r, const std::string& sandbox_id,
                                  const CollectSink& output) {
  nlohmann::json j = exec_result_json(r, sandbox_id);
  put_bytes(j, "stdout", output.out);
  put_bytes(j, "stderr", output.err);
  return j;
}

}  // namespace rf::api
