// Host side: named, timed set-up steps, shared by the backends. A step that
// fails reads `sandbox setup failed at step "<name>": <what went wrong>`.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "core/result.h"
#include "sandbox/sandbox.h"

namespace rf::host {

// Times steps into a sandbox's list of set-up timings, in the order they ran.
class StepTimer {
 public:
  explicit StepTimer(std::vector<StepTiming>* out) : out_(out) {}
  template <class Fn>
  auto run(const char* name, Fn&& fn) {
    const auto start = std::chrono::steady_clock::now();
    auto result = fn();
    out_->push_back({name, std::chrono::steady_clock::now() - start});
    return result;
  }

 private:
  std::vector<StepTiming>* out_;
};

inline Error setup_error(const std::string& step, const Error& e) {
  return Error{"sandbox setup failed at step \"" + step + "\"", e.message, e.sys_errno, e.code};
}

}  // namespace rf::host
