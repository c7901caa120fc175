// ASCII text helpers for protocol parsing (HTTP heads, names): locale-free.
#pragma once

#include <string>
#include <string_view>

namespace rf {

// `s` with A-Z lowered; every other byte as it is.
inline std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// `s` without leading and trailing spaces and tabs (HTTP's optional whitespace).
inline std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace rf
