// A call's output hashed as it streams past (for its receipt): SHA-256 of the
// stdout and stderr bytes exactly as delivered to `inner`.
#pragma once

#include "proof/digest.h"
#include "sandbox/sandbox.h"

namespace rf::proof {

class DigestingSink final : public OutputSink {
 public:
  explicit DigestingSink(OutputSink& inner) : inner_(inner) {}
  void on_started(uint32_t call_id, int pid) override { inner_.on_started(call_id, pid); }
  bool wants_started() const override { return inner_.wants_started(); }
  void on_stdout(std::string_view data) override {
    stdout_.update(data);
    inner_.on_stdout(data);
  }
  void on_stderr(std::string_view data) override {
    stderr_.update(data);
    inner_.on_stderr(data);
  }
  const Sha256Stream& stdout_digest() const { return stdout_; }
  const Sha256Stream& stderr_digest() const { return stderr_; }

 private:
  OutputSink& inner_;
  Sha256Stream stdout_, stderr_;
};

}  // namespace rf::proof
