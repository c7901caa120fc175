#include "redact/stream_redactor.h"

#include <sodium.h>

#include <algorithm>

namespace rf::redact {

StreamRedactor::StreamRedactor(std::shared_ptr<const Patterns> patterns)
    : patterns_(std::move(patterns)) {}

StreamRedactor::~StreamRedactor() {
  if (!pending_.empty()) sodium_memzero(pending_.data(), pending_.size());
}

size_t StreamRedactor::emit(std::string_view text, size_t end, std::string* out) {
  matches_.clear();
  patterns_->find_all(text, &matches_);
  // Leftmost first, then longest.
  std::sort(matches_.begin(), matches_.end(), [](const Match& a, const Match& b) {
    return a.start != b.start ? a.start < b.start : a.length > b.length;
  });
  size_t cursor = 0;
  for (const Match& m : matches_) {
    if (m.start < cursor) continue;  // overlaps the one taken
    if (m.start >= end) break;       // starts in what is held back
    out->append(text.data() + cursor, m.start - cursor);
    const auto& p = patterns_->patterns()[m.pattern];
    const std::string& key = patterns_->keys()[p.key];
    out->append("[REDACTED:").append(key).append("]");
    ++counts_[{key, std::string(to_string(p.form))}];
    cursor = m.start + m.length;
  }
  if (cursor < end) {
    out->append(text.data() + cursor, end - cursor);
    cursor = end;
  }
  return cursor;
}

std::string StreamRedactor::feed(std::string_view chunk) {
  std::string out;
  if (!patterns_ || patterns_->empty()) {
    out.assign(chunk);
    return out;
  }
  std::string buf;
  std::string_view text = chunk;
  if (!pending_.empty()) {
    buf.reserve(pending_.size() + chunk.size());
    buf.append(pending_).append(chunk);
    sodium_memzero(pending_.data(), pending_.size());
    pending_.clear();
    text = buf;
  }
  out.reserve(text.size());
  // Hold back from the longest suffix that may still grow into a match.
  const size_t hold = patterns_->live_partial_start(text, 0);
  size_t done = emit(text, hold, &out);
  // A match that ran into the held part moved the cursor past it: what is
  // held is then the live partial after that match.
  const size_t keep = done > hold ? patterns_->live_partial_start(text, done) : hold;
  if (keep > done) {
    out.append(text.data() + done, keep - done);
    done = keep;
  }
  pending_.assign(text.substr(done));
  if (!buf.empty()) sodium_memzero(buf.data(), buf.size());
  return out;
}

std::string StreamRedactor::finish() {
  std::string out;
  if (pending_.empty()) return out;
  std::string text = std::move(pending_);
  pending_.clear();
  emit(text, text.size(), &out);
  sodium_memzero(text.data(), text.size());
  return out;
}

std::string redact_all(const Patterns& patterns, std::string_view text, RedactionCounts* counts) {
  if (patterns.empty()) return std::string(text);
  // A non-owning shared_ptr: the caller keeps `patterns` alive for this call.
  StreamRedactor r(std::shared_ptr<const Patterns>(&patterns, [](const Patterns*) {}));
  std::string out = r.feed(text);
  out += r.finish();
  if (counts) {
    for (const auto& [k, n] : r.counts()) (*counts)[k] += n;
  }
  return out;
}

}  // namespace rf::redact
