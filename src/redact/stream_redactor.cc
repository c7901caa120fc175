#include "redact/stream_redactor.h"

#include <sodium.h>

#include <algorithm>

namespace rf::redact {

StreamRedactor::StreamRedactor(std::shared_ptr<const Patterns> patterns)
    : patterns_(std::move(patterns)) {}

namespace {

// A character of the base64 alphabets (RFC 4648's and its URL one).
bool base64_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
         c == '/' || c == '-' || c == '_';
}

}  // namespace

StreamRedactor::~StreamRedactor() {
  if (!pending_.empty()) sodium_memzero(pending_.data(), pending_.size());
  forget_unwrapped();
}

size_t StreamRedactor::Unwrapped::original(size_t i) const {
  const auto after = std::upper_bound(cuts.begin(), cuts.end(), i,
                                      [](size_t v, const auto& c) { return v < c.first; });
  return after == cuts.begin() ? i : i + std::prev(after)->second;
}

size_t StreamRedactor::Unwrapped::unwrapped(size_t t) const {
  // The last break wholly before `t`.
  const auto after = std::partition_point(cuts.begin(), cuts.end(),
                                          [&](const auto& c) { return c.first + c.second <= t; });
  size_t i = after == cuts.begin() ? t : t - std::prev(after)->second;
  if (after != cuts.end()) i = std::min(i, after->first);  // inside the next break
  return i;
}

void StreamRedactor::find_breaks(std::string_view text, bool at_end) {
  breaks_.clear();
  const size_t n = text.size();
  size_t last_end = 0;
  for (size_t nl = text.find('\n'); nl != std::string_view::npos; nl = text.find('\n', nl + 1)) {
    size_t brk = nl;  // where the break starts: "\r\n" or "\n"
    if (brk > last_end && text[brk - 1] == '\r') --brk;
    if (brk <= last_end || !base64_char(text[brk - 1])) continue;
    // At the end: one, if more may come.
    if (nl + 1 < n ? !base64_char(text[nl + 1]) : at_end) continue;
    breaks_.emplace_back(brk, nl + 1);
    last_end = nl + 1;
  }
  // A "\r" at the end may be the start of one still coming.
  if (!at_end && n > last_end + 1 && text[n - 1] == '\r' && base64_char(text[n - 2]))
    breaks_.emplace_back(n - 1, n);
}

void StreamRedactor::unwrap(std::string_view text) {
  Unwrapped& u = unwrapped_;
  u.text.reserve(text.size());
  size_t copied = 0, removed = 0;
  for (const auto& [start, end] : breaks_) {
    u.text.append(text.substr(copied, start - copied));
    removed += end - start;
    u.cuts.emplace_back(u.text.size(), removed);
    copied = end;
  }
  u.text.append(text.substr(copied));
}

void StreamRedactor::forget_unwrapped() {
  if (!unwrapped_.text.empty()) sodium_memzero(unwrapped_.text.data(), unwrapped_.text.size());
  unwrapped_.text.clear();
  unwrapped_.cuts.clear();
  breaks_.clear();
}

size_t StreamRedactor::hold_from(std::string_view text, size_t from) const {
  size_t hold = patterns_->live_partial_start(text, from);
  if (const Unwrapped& u = unwrapped_; !u.cuts.empty()) {
    hold = std::min(hold, u.original(patterns_->live_partial_start(u.text, u.unwrapped(from))));
  }
  return hold;
}

void StreamRedactor::find(std::string_view text, bool at_end) {
  matches_.clear();
  patterns_->find_all(text, &matches_);
  forget_unwrapped();
  find_breaks(text, at_end);
  if (!breaks_.empty()) {
    // Those through a break, where they are in the text (the break inside):
    // a look-up at each break, not a second scan.
    unwrap(text);
    wrapped_.clear();
    for (const auto& [at, removed] : unwrapped_.cuts)
      patterns_->find_across(unwrapped_.text, at, &wrapped_);
    for (const Match& m : wrapped_) {
      const size_t first = unwrapped_.original(m.start);
      const size_t last = unwrapped_.original(m.start + m.length - 1);
      matches_.push_back({first, last + 1 - first, m.pattern});
    }
  }
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
  find(text, /*at_end=*/false);
  // Hold back from the longest suffix that may still grow into a match. A
  // match that runs into the held part moves the cursor past its start: what
  // is held is then the live partial after that match, and the matches before
  // it go out too.
  size_t hold = hold_from(text, 0);
  size_t done = emit(text, 0, hold, &out);
  while (done > hold) {
    hold = hold_from(text, done);
    done = emit(text, done, hold, &out);
  }
  pending_.assign(text.substr(done));
  forget_unwrapped();
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
  find(text, /*at_end=*/true);
  // As feed() would, up to the live partial the stream ended in.
  size_t hold = hold_from(text, 0);
  size_t done = emit(text, 0, hold, &out);
  while (done > hold) {
    hold = hold_from(text, done);
    done = emit(text, done, hold, &out);
  }
  if (const Patterns::Pattern* shortest = cut_short(text, done)) {
    const std::string& key = patterns_->keys()[shortest->key];
    out.append("[REDACTED:").append(key).append("]");
    ++counts_[{key, "partial"}];
  } else {
    emit(text, done, text.size(), &out);
  }
  forget_unwrapped();
  sodium_memzero(text.data(), text.size());
  return out;
}

// The stream was cut short inside what may be a value (a process killed,
// output cut at its cap): its start is not let go when it is long enough to
// give the value away. The shortest value it could still become decides what
// "long enough" is for short values. Through line breaks, as find() looks.
const Patterns::Pattern* StreamRedactor::cut_short(std::string_view text, size_t from) const {
  std::string_view tail = text.substr(from);
  if (!unwrapped_.cuts.empty())
    tail = std::string_view(unwrapped_.text).substr(unwrapped_.unwrapped(from));
  const Patterns::Pattern* shortest = nullptr;
  for (const auto& p : patterns_->patterns()) {
    if (p.bytes.size() > tail.size() && std::string_view(p.bytes).starts_with(tail) &&
        (shortest == nullptr || p.bytes.size() < shortest->bytes.size())) {
      shortest = &p;
    }
  }
  if (tail.empty() || shortest == nullptr) return nullptr;
  return tail.size() >= kCutShortMark || 2 * tail.size() > shortest->bytes.size() ? shortest
                                                                                  : nullptr;
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
