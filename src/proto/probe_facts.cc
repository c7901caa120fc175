#include "proto/probe_facts.h"

#include <algorithm>
#include <iterator>

namespace rf::proto {

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> out;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    out.push_back(text.substr(0, nl));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return out;
}

std::vector<StatusField> kept_status_fields(std::string_view status) {
  std::vector<StatusField> out;
  for (const std::string_view line : lines_of(status)) {
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view key = line.substr(0, colon);
    if (std::find(std::begin(kStatusFields), std::end(kStatusFields), key) ==
        std::end(kStatusFields))
      continue;
    const std::string_view rest = line.substr(colon + 1);
    const auto b = rest.find_first_not_of(" \t");
    std::string value(b == std::string_view::npos ? std::string_view() : rest.substr(b));
    std::replace(value.begin(), value.end(), '\t', ' ');
    out.push_back({key, std::move(value)});
  }
  return out;
}

std::vector<std::string_view> net_dev_interfaces(std::string_view net_dev) {
  std::vector<std::string_view> names;
  const std::vector<std::string_view> lines = lines_of(net_dev);
  for (size_t i = 2; i < lines.size(); ++i) {  // after two header lines
    const auto colon = lines[i].find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view name = lines[i].substr(0, colon);
    const auto b = name.find_first_not_of(' ');
    names.push_back(b == std::string_view::npos ? std::string_view() : name.substr(b));
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace rf::proto
