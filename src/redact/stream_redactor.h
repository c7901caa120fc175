// The streaming redactor (host side): one per output stream of a sandbox that
// holds secrets. Every occurrence of every form of every value becomes
// [REDACTED:KEY], wherever it falls, split across chunks at any byte
// (leftmost, then longest, never overlapping). Only the bytes of a live
// partial match are held back; finish() lets them go at the stream's end,
// unless they are a start of a value long enough to give it away
// (kCutShortMark bytes, or more than half of the value): a stream cut short
// inside a value ends in [REDACTED:KEY] instead.
// Not thread-safe: one per stream.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "redact/patterns.h"

namespace rf::redact {

// A live partial this long (or longer than half of the shortest value it
// could become) left held at the end of a stream is marked, not let go.
inline constexpr size_t kCutShortMark = 8;

// (key, form) -> matches redacted; form "partial": a start of a value at the
// end of a stream cut short.
using RedactionCounts = std::map<std::pair<std::string, std::string>, uint64_t>;

class StreamRedactor {
 public:
  explicit StreamRedactor(std::shared_ptr<const Patterns> patterns);
  ~StreamRedactor();
  StreamRedactor(const StreamRedactor&) = delete;
  StreamRedactor& operator=(const StreamRedactor&) = delete;

  // What may leave now.
  std::string feed(std::string_view chunk);
  // The end of the stream: what was held back, redacted (a long enough start
  // of a value, where the stream was cut short, included).
  std::string finish();
  // More values to redact from here on (a JIT grant, issue 13). What is held
  // back is looked at again with the new patterns; a value given after this
  // call can only appear in later chunks.
  void set_patterns(std::shared_ptr<const Patterns> patterns) { patterns_ = std::move(patterns); }
  const RedactionCounts& counts() const { return counts_; }
  size_t held() const { return pending_.size(); }

 private:
  // Finds the matches of `text`, leftmost then longest, for emit().
  void find(std::string_view text);
  // Emits text[cursor..end) with its matches replaced; returns where it
  // stopped (past `end` when a match ran past it).
  size_t emit(std::string_view text, size_t cursor, size_t end, std::string* out);

  std::shared_ptr<const Patterns> patterns_;
  std::string pending_;
  std::vector<Match> matches_;  // reused
  size_t next_match_ = 0;
  RedactionCounts counts_;
};

// A whole text at once (error texts, stored strings).
std::string redact_all(const Patterns& patterns, std::string_view text,
                       RedactionCounts* counts = nullptr);

}  // namespace rf::redact
