// The streaming redactor (host side): one per output stream of a sandbox that
// holds secrets. Every occurrence of every form of every value becomes
// [REDACTED:KEY], wherever it falls, split across chunks at any byte
// (leftmost, then longest, never overlapping). Only the bytes of a live
// partial match are held back; finish() lets them go at the stream's end,
// unless they are a start of a value long enough to give it away
// (kCutShortMark bytes, or more than half of the value): a stream cut short
// inside a value ends in [REDACTED:KEY] instead.
//
// Wrapped lines: a value may also be split by line breaks, as `base64`,
// MIME and PEM wrap an encoding every 64 or 76 characters (and `fold` any
// text). A break ("\n" or "\r\n") between two characters of the base64
// alphabets (letters, digits, + / - _) is looked through: a form that shows
// once such breaks are taken out is redacted with them (the whole span
// becomes the one mark). A break at the end of what has come so far counts
// as one for what is held back, until the stream ends there.
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
  // The text with its line breaks between base64 characters taken out.
  struct Unwrapped {
    std::string text;
    // Each break taken out: where in `text` (the byte after it), and how many
    // bytes were taken out up to it, it included.
    std::vector<std::pair<size_t, size_t>> cuts;
    // text[i]'s place in the input (i == text.size(): the input's end).
    size_t original(size_t i) const;
    // The input's byte `t` in `text` (a byte of a break: the one after it).
    size_t unwrapped(size_t t) const;
  };
  // The breaks of `text` to look through, into breaks_.
  // `at_end`: the stream ends with `text` (a break at its end is none).
  void find_breaks(std::string_view text, bool at_end);
  // `text` less breaks_ into unwrapped_ (empty).
  void unwrap(std::string_view text);
  // Finds the matches of `text`, leftmost then longest, for emit(); also
  // those through its line breaks (unwrapped_, when it has any).
  void find(std::string_view text, bool at_end);
  // Zeroes and empties unwrapped_ (a copy of the output).
  void forget_unwrapped();
  // Where what text[from..] ends in may still grow into a match starts.
  size_t hold_from(std::string_view text, size_t from) const;
  // Bytes (of `text`'s end) that are a start of a value a stream cut short
  // would give away: the form that value's shortest pattern has, or null.
  const Patterns::Pattern* cut_short(std::string_view text, size_t from) const;
  // Emits text[cursor..end) with its matches replaced; returns where it
  // stopped (past `end` when a match ran past it).
  size_t emit(std::string_view text, size_t cursor, size_t end, std::string* out);

  std::shared_ptr<const Patterns> patterns_;
  std::string pending_;
  std::vector<Match> matches_;                     // reused
  std::vector<std::pair<size_t, size_t>> breaks_;  // [start, end) in the text; reused
  Unwrapped unwrapped_;                            // the text, when it has a break to look through
  std::vector<Match> wrapped_;                     // reused
  size_t next_match_ = 0;
  RedactionCounts counts_;
};

// A whole text at once (error texts, stored strings).
std::string redact_all(const Patterns& patterns, std::string_view text,
                       RedactionCounts* counts = nullptr);

}  // namespace rf::redact
