// The in_process `json` step (issue 12): parse a JSON text (usually another
// step's output), apply a JSON Patch (RFC 6902), pick a value with a JSON
// Pointer (RFC 6901), and check it against a JSON Schema (json_schema.h).
// nlohmann does the parsing, patching and pointers.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/result.h"

namespace rf::in_process {

struct JsonStepSpec {
  std::string input_text;               // the JSON text (rendered)
  std::optional<nlohmann::json> input;  // or a value given in the file
  std::optional<nlohmann::json> patch;  // a JSON Patch
  std::string pointer;                  // "" = the whole document
  std::optional<nlohmann::json> schema;
};

// The value. Errors say which part failed: "input: not JSON: ...",
// "patch: ...", "pointer /a/b: no such value", "schema: /x: expected a string".
Result<nlohmann::json> run_json_step(const JsonStepSpec& spec);

}  // namespace rf::in_process
