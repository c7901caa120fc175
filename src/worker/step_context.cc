#include "worker/step_context.h"

#include <thread>

namespace rf::worker {

bool StepControl::sleep_for(std::chrono::milliseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
    if (stopped()) return false;
    std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(
        std::chrono::milliseconds(20), std::chrono::duration_cast<std::chrono::milliseconds>(
                                           until - std::chrono::steady_clock::now()) +
                                           std::chrono::milliseconds(1)));
  }
  return !stopped();
}

}  // namespace rf::worker
