#include "net/resolve_override.h"

namespace rf::net {

Result<std::map<std::string, std::vector<IpAddress>>> parse_resolve_override(
    std::string_view text) {
  std::map<std::string, std::vector<IpAddress>> out;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view entry = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (entry.empty()) continue;
    const size_t eq = entry.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      return make_error("proxy resolve \"" + std::string(entry) + "\"", "expected NAME=ADDRESS");
    }
    auto target = parse_authority(entry.substr(0, eq), 80);
    if (!target)
      return make_error("proxy resolve \"" + std::string(entry) + "\"", target.error().to_string());
    auto addr = parse_ip_literal(entry.substr(eq + 1));
    if (!addr) {
      return make_error("proxy resolve \"" + std::string(entry) + "\"",
                        "\"" + std::string(entry.substr(eq + 1)) + "\" is not an IP address");
    }
    out[target->host].push_back(*addr);
  }
  return out;
}

}  // namespace rf::net
