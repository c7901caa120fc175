#include "redact/stream_redactor.h"

#include <sodium.h>

#include <algorithm>

namespace rf::redact {

StreamRedactor::StreamRedactor(std::shared_ptr<const Patterns> patterns)
    : patterns_(std::move(patterns)) {}

StreamRedactor::~StreamRedactor() {
  if (!pending_.empty()) sodium_memzero(pending_.data(), pending_.size());
}

void StreamRedactor::find(std::string_view text) {
  matches_.clear();
  patterns_->find_all(text, &matches_);
  // Leftmost first, then longest.
  std::sort(matches_.begin(), matches_.end(), [](const Match& a, const Match& b) {
    return a.start != b.start ? a.start < b.start : a.length > b.length;
  });
  next_match_ = 0;
}

size_t StreamRedactor::emit(std::string_view text, size_t cursor, size_t end, std::string* out) {
  for (; next_match_ < matches_.size(); ++next_match_) {
    const Match& m = matches_[next_match_];
    if (m.start < cursor) continue;  // overlaps one taken
    if (m.start >= end) break;       // starts in what is held back: looked at again later
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
  find(text);
  // Hold back from the longest suffix that may still grow into a match. A
  // match that runs into the held part moves the cursor past its start: what
  // is held is then the live partial after that match, and the matches before
  // it go out too.
  size_t hold = patterns_->live_partial_start(text, 0);
  size_t done = emit(text, 0, hold, &out);
  while (done > hold) {
    hold = patterns_->live_partial_start(text, done);
    done = emit(text, done, hold, &out);
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
  if (!patterns_ || patterns_->empty()) {
    out.assign(text);
    sodium_memzero(text.data(), text.size());
    return out;
  }
  find(text);
  // As feed() would, up to the live partial the stream ended in.
  size_t hold = patterns_->live_partial_start(text, 0);
  size_t done = emit(text, 0, hold, &out);
  while (done > hold) {
    hold = patterns_->live_partial_start(text, done);
    done = emit(text, done, hold, &out);
  }
  // The stream was cut short inside what may be a value (a process killed,
  // output cut at its cap): its start is not let go when it is long enough
  // to give the value away. The shortest value it could still become decides
  // what "long enough" is for short values.
  const std::string_view tail = std::string_view(text).substr(done);
  const Patterns::Pattern* shortest = nullptr;
  for (const auto& p : patterns_->patterns()) {
    if (p.bytes.size() > tail.size() && std::string_view(p.bytes).starts_with(tail) &&
        (shortest == nullptr || p.bytes.size() < shortest->bytes.size())) {
      shortest = &p;
    }
  }
  if (!tail.empty() && shortest != nullptr &&
      (tail.size() >= kCutShortMark || 2 * tail.size() > shortest->bytes.size())) {
    const std::string& key = patterns_->keys()[shortest->key];
    out.append("[REDACTED:").append(key).append("]");
    ++counts_[{key, "partial"}];
  } else {
    emit(text, done, text.size(), &out);
  }
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
