#include "core/json_input.h"

#include <string>

namespace rf {

std::optional<size_t> json_too_deep(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, whatever it is
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '[':
      case '{':
        if (++depth > max_depth) return i;
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;
        break;
      default:
        break;
    }
  }
  return std::nullopt;
}

Result<nlohmann::json> parse_json(std::string_view text, std::string_view what, int max_depth) {
  if (auto at = json_too_deep(text, max_depth)) {
    return make_error(std::string(what), "nested deeper than " + std::to_string(max_depth) +
                                             " levels (at byte " + std::to_string(*at) + ")");
  }
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    return make_error(std::string(what), "not valid JSON (at byte " + std::to_string(e.byte) + ")");
  }
}

nlohmann::json parse_json_or_discarded(std::string_view text, int max_depth) {
  if (json_too_deep(text, max_depth)) return nlohmann::json(nlohmann::json::value_t::discarded);
  return nlohmann::json::parse(text, nullptr, false);
}

}  // namespace rf
