// JSON from untrusted bytes (request bodies, MCP lines, workflow files, what a
// sandbox prints, what an upstream answers): parsed only when nested no
// deeper than a bound. nlohmann's parser builds any depth, but copying or
// dumping a value 100,000 levels deep recurses once a level and ends the
// process on a stack overflow; a tenant's body must never do that. The depth
// is counted on the text first, in one pass, before anything is built.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "core/result.h"

namespace rf {

// Deep enough for any document a person or a program writes on purpose.
inline constexpr int kJsonMaxDepth = 64;

// The offset of the bracket that opens level max_depth + 1, if the text has
// one (strings and their escapes are skipped; nothing else is checked).
std::optional<size_t> json_too_deep(std::string_view text, int max_depth = kJsonMaxDepth);

// The value, or an error whose `where` is `what` and whose message says what
// is wrong and at which byte: not JSON, or nested deeper than max_depth.
Result<nlohmann::json> parse_json(std::string_view text, std::string_view what,
                                  int max_depth = kJsonMaxDepth);

// As json::parse(text, nullptr, false): a discarded value when the text is not
// JSON or is nested deeper than max_depth.
nlohmann::json parse_json_or_discarded(std::string_view text, int max_depth = kJsonMaxDepth);

}  // namespace rf
