// Output of a call whose sandbox holds identity values (worker side): each
// stream passes through its own streaming redactor (redact/) before it
// reaches the store, so no form of an injected value leaves the sandbox, even
// split across chunks. finish() flushes the bytes held back as a possible
// start of a match once the call has ended.
#pragma once

#include <memory>
#include <mutex>

#include "redact/patterns.h"
#include "redact/stream_redactor.h"
#include "sandbox/sandbox.h"

namespace rf::calls {

class RedactingSink : public OutputSink {
 public:
  RedactingSink(OutputSink& next, std::shared_ptr<const redact::Patterns> patterns);
  void on_started(uint32_t call_id, int pid) override { next_.on_started(call_id, pid); }
  bool wants_started() const override { return next_.wants_started(); }
  void on_stdout(std::string_view data) override;
  void on_stderr(std::string_view data) override;
  // Redacts `patterns` from here on, on both streams: set before a value the
  // sandbox receives mid-call (JIT) can reach its output.
  void set_patterns(const std::shared_ptr<const redact::Patterns>& patterns);
  // After the call: what was held back, redacted, goes on.
  void finish();
  // Matches redacted on both streams: (key, form) -> count.
  std::map<std::pair<std::string, std::string>, uint64_t> counts() const;

 private:
  OutputSink& next_;
  mutable std::mutex mu_;
  redact::StreamRedactor out_, err_;
};

}  // namespace rf::calls
