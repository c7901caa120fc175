#include "redact/patterns.h"

#include <sodium.h>

#include <algorithm>
#include <cstring>
#include <deque>

namespace rf::redact {
namespace {

constexpr size_t kWindow = 4;
constexpr unsigned kFilterBits = 20;  // 128 KiB: stays in L2 with ~50k windows set

uint32_t load_window(const char* p) {
  uint32_t w;
  std::memcpy(&w, p, sizeof w);
  return w;
}

uint32_t window_hash(uint32_t w) { return (w * 0x9E3779B1u) >> (32 - kFilterBits); }

}  // namespace

Patterns::Patterns(const std::vector<SecretToRedact>& secrets) {
  for (const auto& s : secrets) {
    if (s.value.empty()) continue;
    uint32_t key = 0;
    auto it = std::find(keys_.begin(), keys_.end(), s.key);
    if (it == keys_.end()) {
      key = static_cast<uint32_t>(keys_.size());
      keys_.push_back(s.key);
    } else {
      key = static_cast<uint32_t>(it - keys_.begin());
    }
    for (auto& form : forms_of(s.value)) {
      const bool seen = std::any_of(patterns_.begin(), patterns_.end(),
                                    [&](const Pattern& p) { return p.bytes == form.second; });
      if (!seen) patterns_.push_back({std::move(form.second), key, form.first});
    }
  }
  if (patterns_.empty()) return;
  min_length_ = max_length_ = patterns_.front().bytes.size();
  for (const auto& p : patterns_) {
    min_length_ = std::min(min_length_, p.bytes.size());
    max_length_ = std::max(max_length_, p.bytes.size());
  }
  index_windows();
  build_trie();
}

Patterns::~Patterns() {
  for (auto& p : patterns_) sodium_memzero(p.bytes.data(), p.bytes.size());
}

void Patterns::index_windows() {
  if (min_length_ < kWindow) return;
  filter_.assign((size_t{1} << kFilterBits) / 64, 0);
  for (uint32_t i = 0; i < patterns_.size(); ++i) {
    const std::string& b = patterns_[i].bytes;
    for (size_t k = 0; k + kWindow <= b.size(); ++k) {
      const uint32_t w = load_window(b.data() + k);
      const uint32_t h = window_hash(w);
      filter_[h / 64] |= uint64_t{1} << (h % 64);
      by_window_[w].push_back({i, static_cast<uint32_t>(k)});
    }
  }
}

void Patterns::build_trie() {
  trie_.emplace_back();
  for (const auto& p : patterns_) {
    uint32_t node = 0;
    for (unsigned char c : p.bytes) {
      auto& next = trie_[node].next;
      auto it = std::lower_bound(next.begin(), next.end(), c,
                                 [](const auto& e, unsigned char v) { return e.first < v; });
      if (it != next.end() && it->first == c) {
        node = it->second;
        continue;
      }
      const auto child = static_cast<uint32_t>(trie_.size());
      const uint32_t depth = trie_[node].depth + 1;
      trie_[node].next.insert(it, {c, child});
      trie_.push_back(Node{{}, 0, depth});
      node = child;
    }
  }
  // Failure links, breadth first.
  std::deque<uint32_t> queue;
  for (const auto& [c, child] : trie_[0].next) queue.push_back(child);
  while (!queue.empty()) {
    const uint32_t node = queue.front();
    queue.pop_front();
    for (const auto& [c, child] : trie_[node].next) {
      uint32_t f = trie_[node].fail;
      trie_[child].fail = (node == 0) ? 0 : step(f, c);
      queue.push_back(child);
    }
  }
}

uint32_t Patterns::step(uint32_t node, unsigned char c) const {
  for (;;) {
    const auto& next = trie_[node].next;
    auto it = std::lower_bound(next.begin(), next.end(), c,
                               [](const auto& e, unsigned char v) { return e.first < v; });
    if (it != next.end() && it->first == c) return it->second;
    if (node == 0) return 0;
    node = trie_[node].fail;
  }
}

void Patterns::verify(std::string_view text, size_t window, uint32_t gram,
                      std::vector<Match>* out) const {
  auto it = by_window_.find(gram);
  if (it == by_window_.end()) return;
  for (const Candidate& c : it->second) {
    if (c.offset > window) continue;
    const size_t start = window - c.offset;
    const std::string& p = patterns_[c.pattern].bytes;
    if (start + p.size() > text.size()) continue;
    if (std::memcmp(text.data() + start, p.data(), p.size()) == 0) {
      out->push_back({start, p.size(), c.pattern});
    }
  }
}

void Patterns::find_across(std::string_view text, size_t at, std::vector<Match>* out) const {
  if (patterns_.empty() || at == 0 || at >= text.size()) return;
  if (min_length_ < kWindow) {
    // No window index: a scan of what a match across `at` could cover.
    const size_t from = at >= max_length_ ? at - max_length_ + 1 : 0;
    const size_t to = std::min(text.size(), at + max_length_ - 1);
    std::vector<Match> near;
    find_all(text.substr(from, to - from), &near);
    for (Match m : near) {
      m.start += from;
      if (m.start < at && m.start + m.length > at) out->push_back(m);
    }
    return;
  }
  // A match across `at` of kWindow bytes or more holds a whole window that
  // does: one starting 3, 2 or 1 bytes before it.
  for (size_t w = at >= kWindow - 1 ? at - (kWindow - 1) : 0; w < at; ++w) {
    if (w + kWindow > text.size()) break;
    const uint32_t gram = load_window(text.data() + w);
    const uint32_t h = window_hash(gram);
    if ((filter_[h / 64] >> (h % 64) & 1) != 0) verify(text, w, gram, out);
  }
}

void Patterns::find_all(std::string_view text, std::vector<Match>* out) const {
  if (patterns_.empty() || text.size() < min_length_) return;
  if (min_length_ < kWindow) {
    // Short patterns: every position, every pattern (rare: values under 4 bytes).
    for (size_t i = 0; i < text.size(); ++i) {
      for (uint32_t p = 0; p < patterns_.size(); ++p) {
        const std::string& b = patterns_[p].bytes;
        if (i + b.size() <= text.size() && std::memcmp(text.data() + i, b.data(), b.size()) == 0)
          out->push_back({i, b.size(), p});
      }
    }
    return;
  }
  // Any occurrence covers a whole window at one of these positions.
  const size_t stride = min_length_ - kWindow + 1;
  const char* data = text.data();
  const size_t last = text.size() - kWindow;
  const size_t first_found = out->size();
  for (size_t i = 0; i <= last; i += stride) {
    const uint32_t w = load_window(data + i);
    const uint32_t h = window_hash(w);
    if (filter_[h / 64] & (uint64_t{1} << (h % 64))) verify(text, i, w, out);
  }
  // An occurrence covering two sampled windows was found twice.
  std::sort(out->begin() + static_cast<std::ptrdiff_t>(first_found), out->end(),
            [](const Match& a, const Match& b) {
              return a.start != b.start ? a.start < b.start : a.pattern < b.pattern;
            });
  out->erase(std::unique(out->begin() + static_cast<std::ptrdiff_t>(first_found), out->end(),
                         [](const Match& a, const Match& b) {
                           return a.start == b.start && a.pattern == b.pattern;
                         }),
             out->end());
}

size_t Patterns::live_partial_start(std::string_view text, size_t from) const {
  if (patterns_.empty() || from >= text.size()) return text.size();
  // A live partial is shorter than the longest pattern: walk only that far back.
  size_t begin = from;
  if (text.size() - begin > max_length_ - 1) begin = text.size() - (max_length_ - 1);
  uint32_t node = 0;
  for (size_t i = begin; i < text.size(); ++i) {
    node = step(node, static_cast<unsigned char>(text[i]));
  }
  // The deepest state that can still grow (a node with children).
  while (node != 0 && trie_[node].next.empty()) node = trie_[node].fail;
  return text.size() - trie_[node].depth;
}

std::shared_ptr<const Patterns> compile_patterns(const std::vector<SecretToRedact>& secrets) {
  return std::make_shared<const Patterns>(secrets);
}

}  // namespace rf::redact
