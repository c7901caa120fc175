#include "calls/redacting_sink.h"

#include "proto/messages.h"

namespace rf::calls {

RedactingSink::RedactingSink(OutputSink& next, std::shared_ptr<const redact::Patterns> patterns)
    : next_(next), out_(patterns), err_(patterns) {}

namespace {

// Feeds `data` to `r`. The runner's mark of output cut at its cap ends what
// came before it: a value the cap cut is then marked by finish(), not let go
// as a prefix (what was held is no longer live once the mark follows it).
std::string redact_chunk(redact::StreamRedactor& r, std::string_view data) {
  const size_t mark = data.find(proto::kOutputTruncatedMark);
  if (mark == std::string_view::npos) return r.feed(data);
  std::string clean = r.feed(data.substr(0, mark));
  clean += r.finish();
  clean += r.feed(data.substr(mark));
  return clean;
}

}  // namespace

// Under the lock to the end: chunks reach `next` in the order they came.
void RedactingSink::on_stdout(std::string_view data) {
  std::lock_guard lock(mu_);
  const std::string clean = redact_chunk(out_, data);
  if (!clean.empty()) next_.on_stdout(clean);
}

void RedactingSink::on_stderr(std::string_view data) {
  std::lock_guard lock(mu_);
  const std::string clean = redact_chunk(err_, data);
  if (!clean.empty()) next_.on_stderr(clean);
}

void RedactingSink::set_patterns(const std::shared_ptr<const redact::Patterns>& patterns) {
  std::lock_guard lock(mu_);
  out_.set_patterns(patterns);
  err_.set_patterns(patterns);
}

void RedactingSink::finish() {
  std::lock_guard lock(mu_);
  const std::string out = out_.finish();
  const std::string err = err_.finish();
  if (!out.empty()) next_.on_stdout(out);
  if (!err.empty()) next_.on_stderr(err);
}

std::map<std::pair<std::string, std::string>, uint64_t> RedactingSink::counts() const {
  std::lock_guard lock(mu_);
  std::map<std::pair<std::string, std::string>, uint64_t> all;
  for (const auto* r : {&out_, &err_}) {
    for (const auto& [what, n] : r->counts()) all[what] += n;
  }
  return all;
}

}  // namespace rf::calls
