#include "proof/mount_table.h"

namespace rf::proof {
namespace {

// The next space-separated word of `line` (empty at its end).
std::string_view next_word(std::string_view& line) {
  size_t i = 0;
  while (i < line.size() && line[i] == ' ') ++i;
  const size_t start = i;
  while (i < line.size() && line[i] != ' ') ++i;
  const std::string_view word = line.substr(start, i - start);
  line.remove_prefix(i);
  return word;
}

}  // namespace

std::vector<MountEntry> parse_mountinfo(std::string_view text) {
  std::vector<MountEntry> out;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    // mount id, parent id, major:minor, then the fields kept.
    std::string_view w[6];
    for (auto& word : w) word = next_word(line);
    if (w[5].empty()) continue;
    MountEntry m;
    m.root = w[3];
    m.mount_point = w[4];
    m.options = w[5];
    // Optional fields up to the lone "-".
    std::string_view word;
    do {
      word = next_word(line);
    } while (!word.empty() && word != "-");
    if (word.empty()) continue;
    m.fstype = next_word(line);
    if (m.fstype.empty()) continue;
    m.source = next_word(line);
    m.super_options = next_word(line);
    out.push_back(m);
  }
  return out;
}

}  // namespace rf::proof
