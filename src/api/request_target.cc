#include "api/request_target.h"

namespace rf::api {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::optional<std::string> percent_decode(std::string_view in) {
  std::string out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '+') {
      out += ' ';
    } else if (in[i] == '%') {
      if (i + 2 >= in.size()) return std::nullopt;
      const int hi = hex_value(in[i + 1]), lo = hex_value(in[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += in[i];
    }
  }
  return out;
}

Target split_target(std::string_view target) {
  Target t;
  const auto q = target.find('?');
  std::string_view path = target.substr(0, q);
  if (q != std::string_view::npos) {
    std::string_view rest = target.substr(q + 1);
    while (!rest.empty()) {
      const auto amp = rest.find('&');
      std::string_view pair = rest.substr(0, amp);
      rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
      if (pair.empty()) continue;
      const auto eq = pair.find('=');
      auto k = percent_decode(pair.substr(0, eq));
      auto v =
          percent_decode(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1));
      if (!k || !v) {
        t.ok = false;
        return t;
      }
      t.query[*k] = *v;
    }
  }
  while (!path.empty()) {
    if (path.front() == '/') {
      path.remove_prefix(1);
      continue;
    }
    const auto slash = path.find('/');
    auto seg = percent_decode(path.substr(0, slash));
    if (!seg) {
      t.ok = false;
      return t;
    }
    t.segments.push_back(*seg);
    path = slash == std::string_view::npos ? std::string_view() : path.substr(slash);
  }
  return t;
}

}  // namespace rf::api
