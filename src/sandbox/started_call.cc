// Sandbox::start_exec's default: exec() on a thread of its own (sandbox/sandbox.h).
#include <optional>
#include <thread>

#include "sandbox/sandbox.h"

namespace rf {
namespace {

class ThreadedCall final : public StartedCall {
 public:
  ThreadedCall(Sandbox& sandbox, ExecCall call, OutputSink& sink)
      : call_(std::move(call)),
        thread_([this, &sandbox, &sink] { result_.emplace(sandbox.exec(call_, sink)); }) {}
  ~ThreadedCall() override {
    if (thread_.joinable()) thread_.join();
  }
  Result<ExecResult> wait() override {
    thread_.join();
    return std::move(*result_);
  }

 private:
  ExecCall call_;
  std::optional<Result<ExecResult>> result_;
  std::thread thread_;  // last: it reads the members above
};

}  // namespace

std::unique_ptr<StartedCall> Sandbox::start_exec(const ExecCall& call, OutputSink& sink) {
  return std::make_unique<ThreadedCall>(*this, call, sink);
}

}  // namespace rf
