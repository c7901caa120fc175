// The compiled patterns of a set of secrets (host side): every form of every
// value (forms.h), with what finds them fast in a stream.
//
// Finding: every pattern is at least `min_length` bytes, so any occurrence
// covers one of the positions sampled every (min_length - 3) bytes with a
// whole 4-byte window. The text is scanned only at those positions: the
// window's hash is looked up in a bit filter of the 4-byte windows of every
// pattern at every offset, and only on a hit are the candidates (pattern,
// offset) compared. With ~1,000 patterns of ~40 bytes this reads one window
// in ~37 bytes. Patterns shorter than 4 bytes fall back to a check at every
// position.
//
// Holding back: a trie of the patterns with failure links (Aho-Corasick),
// walked over the last bytes of a buffer only, gives the longest suffix that
// could still grow into a match: the bytes a stream must hold back.
//
// Immutable once compiled: share one between threads and streams.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "redact/forms.h"

namespace rf::redact {

struct SecretToRedact {
  std::string key;  // what replaces it: [REDACTED:key]
  std::string value;
};

struct Match {
  size_t start = 0;
  size_t length = 0;
  uint32_t pattern = 0;
};

class Patterns {
 public:
  struct Pattern {
    std::string bytes;
    uint32_t key = 0;  // index into keys()
    Form form = Form::raw;
  };

  explicit Patterns(const std::vector<SecretToRedact>& secrets);
  ~Patterns();
  Patterns(const Patterns&) = delete;
  Patterns& operator=(const Patterns&) = delete;

  bool empty() const { return patterns_.empty(); }
  const std::vector<Pattern>& patterns() const { return patterns_; }
  const std::vector<std::string>& keys() const { return keys_; }
  size_t max_length() const { return max_length_; }

  // Every occurrence of every pattern lying wholly inside `text`, unordered.
  void find_all(std::string_view text, std::vector<Match>* out) const;
  // Those that hold both text[at - 1] and text[at] (a match across a line
  // break taken out there): a look-up of the three windows across `at`, not
  // a scan. Possibly one more than once.
  void find_across(std::string_view text, size_t at, std::vector<Match>* out) const;
  // The start of the longest suffix of text[from..] that is a proper start of
  // some pattern and could still grow into a longer match; text.size() when none.
  size_t live_partial_start(std::string_view text, size_t from) const;

 private:
  struct Candidate {
    uint32_t pattern;
    uint32_t offset;
  };
  void index_windows();
  void build_trie();
  void verify(std::string_view text, size_t window, uint32_t gram, std::vector<Match>* out) const;

  std::vector<Pattern> patterns_;
  std::vector<std::string> keys_;
  size_t min_length_ = 0, max_length_ = 0;
  // Sampled scan (min_length_ >= 4).
  std::vector<uint64_t> filter_;  // bits by window hash
  std::unordered_map<uint32_t, std::vector<Candidate>> by_window_;
  // The trie: children sorted by byte; fail links; whether a node can grow.
  struct Node {
    std::vector<std::pair<unsigned char, uint32_t>> next;
    uint32_t fail = 0;
    uint32_t depth = 0;
  };
  std::vector<Node> trie_;
  uint32_t step(uint32_t node, unsigned char c) const;
};

// One shared, immutable set; an empty set redacts nothing.
std::shared_ptr<const Patterns> compile_patterns(const std::vector<SecretToRedact>& secrets);

}  // namespace rf::redact
