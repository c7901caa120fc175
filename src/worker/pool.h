// The warm pool (worker side): sandboxes started ahead of need for one pool
// key (backend, image, limits, network), so taking one is a pop, not a start.
// A sandbox leaves the pool for good: the caller binds it to a project and
// destroys it after use; nothing is ever handed back.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "sandbox/sandbox.h"

namespace rf::worker {

// What makes two sandboxes interchangeable before they are bound to a project.
std::string pool_key(const SandboxSpec& spec);

struct PoolStats {
  uint64_t hits = 0;     // acquire() found a warm sandbox
  uint64_t misses = 0;   // acquire() had to create one
  uint64_t created = 0;  // sandboxes created in the background
  uint64_t failed = 0;   // background creations that failed
  size_t ready = 0;
};

class WarmPool {
 public:
  // Called on the refill thread with each new sandbox before it counts as
  // ready, after its first round trip (the worker makes its boundary report
  // there, so a call never waits for one).
  using OnWarm = std::function<void(Sandbox&)>;

  // Keeps `target` sandboxes of `spec` ready, never more than `max`.
  WarmPool(Backend& backend, SandboxSpec spec, size_t target, size_t max, OnWarm on_warm = nullptr);
  ~WarmPool();  // stops refilling and destroys the sandboxes still ready
  WarmPool(const WarmPool&) = delete;
  WarmPool& operator=(const WarmPool&) = delete;

  // Starts the background refill (a no-op when target is 0).
  void start();
  // A warm sandbox if one is ready, else a new one created now. Never blocks
  // on the refill thread.
  Result<std::unique_ptr<Sandbox>> acquire();
  // Waits until `n` sandboxes are ready or `timeout` passes (tests, benchmarks).
  bool wait_ready(size_t n, std::chrono::milliseconds timeout);
  PoolStats stats() const;
  // The last background creation error (the backend may be unhealthy).
  std::optional<Error> last_error() const;
  // Background creations that failed since the last one that worked.
  int failures_in_a_row() const;
  const std::string& key() const { return key_; }

 private:
  void refill_loop();

  Backend& backend_;
  const SandboxSpec spec_;
  const std::string key_;
  const size_t target_, max_;
  const OnWarm on_warm_;
  mutable std::mutex mu_;
  std::condition_variable cv_;        // wakes the refill thread
  std::condition_variable ready_cv_;  // wakes wait_ready
  std::deque<std::unique_ptr<Sandbox>> ready_;
  PoolStats stats_;
  std::optional<Error> last_error_;
  int failures_in_a_row_ = 0;
  bool stopping_ = false;
  std::thread refill_;
};

}  // namespace rf::worker
