#include "core/nearest.h"

#include <algorithm>
#include <vector>

namespace rf {

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string nearest_name(std::string_view word, std::span<const std::string> known,
                         bool a_start_counts) {
  std::string best;
  size_t best_distance = 3;  // at most 2 edits away
  for (const std::string& k : known) {
    size_t d = edit_distance(word, k);
    if (a_start_counts && std::min(word.size(), k.size()) >= 3 &&
        (word.starts_with(k) || std::string_view(k).starts_with(word)))
      d = std::min<size_t>(d, 1);
    if (d < best_distance) {
      best_distance = d;
      best = k;
    }
  }
  return best;
}

}  // namespace rf
