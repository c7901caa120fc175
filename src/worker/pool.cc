#include "worker/pool.h"

#include <algorithm>

#include "core/log.h"
#include "core/units.h"

namespace rf::worker {
namespace {

constexpr std::chrono::milliseconds kMaxBackoff{5000};
constexpr std::chrono::milliseconds kRefillPace{20};

}  // namespace

// A sandbox with other egress rules or caps is not interchangeable.
static std::string allow_key(const SandboxSpec& s) {
  if (s.network != NetworkPolicy::kProxy) return "";
  std::string out = "/egress=" + std::to_string(s.limits.egress_connections) + "," +
                    format_size(s.limits.egress_bytes) + "/allow=";
  for (const auto& rule : s.allow) out += rule + ";";
  return out;
}

std::string pool_key(const SandboxSpec& s) {
  const Limits& l = s.limits;
  return std::string(to_string(s.backend)) + "/" + s.image +
         "/net=" + std::string(to_string(s.network)) + "/cpu=" + std::to_string(l.cpus) +
         "/mem=" + format_size(l.memory_bytes) + "/pids=" + std::to_string(l.pids) +
         "/disk=" + format_size(l.disk_bytes) + "/seccomp=" + s.seccomp + allow_key(s) +
         (s.tls_intercept ? "/tls_intercept" : "");
}

WarmPool::WarmPool(Backend& backend, SandboxSpec spec, size_t target, size_t max, OnWarm on_warm)
    : backend_(backend),
      spec_(std::move(spec)),
      key_(pool_key(spec_)),
      target_(std::min(target, max)),
      max_(max),
      on_warm_(std::move(on_warm)) {}

WarmPool::~WarmPool() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (refill_.joinable()) refill_.join();
  for (auto& sb : ready_) warn_unless_ok(sb->destroy(), "destroying pooled sandbox " + sb->id());
}

void WarmPool::start() {
  if (target_ == 0 || refill_.joinable()) return;
  refill_ = std::thread([this] { refill_loop(); });
}

Result<std::unique_ptr<Sandbox>> WarmPool::acquire() {
  {
    std::lock_guard lock(mu_);
    if (!ready_.empty()) {
      auto sb = std::move(ready_.front());
      ready_.pop_front();
      ++stats_.hits;
      cv_.notify_all();  // one fewer ready: refill
      return sb;
    }
    ++stats_.misses;
  }
  cv_.notify_all();
  return backend_.create(spec_);
}

bool WarmPool::wait_ready(size_t n, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return ready_cv_.wait_for(lock, timeout, [&] { return ready_.size() >= n; });
}

PoolStats WarmPool::stats() const {
  std::lock_guard lock(mu_);
  PoolStats s = stats_;
  s.ready = ready_.size();
  return s;
}

int WarmPool::failures_in_a_row() const {
  std::lock_guard lock(mu_);
  return failures_in_a_row_;
}

std::optional<Error> WarmPool::last_error() const {
  std::lock_guard lock(mu_);
  return last_error_;
}

void WarmPool::refill_loop() {
  std::chrono::milliseconds backoff{0};
  std::unique_lock lock(mu_);
  while (!stopping_) {
    if (ready_.size() >= target_ || ready_.size() >= max_) {
      cv_.wait(lock, [&] { return stopping_ || ready_.size() < target_; });
      // Paced: the call that just took a sandbox makes its first round trips
      // now; a clone on the other core would slow them. An empty pool cannot wait.
      if (!stopping_ && !ready_.empty())
        cv_.wait_for(lock, kRefillPace, [&] { return stopping_ || ready_.empty(); });
      continue;
    }
    lock.unlock();
    auto sb = backend_.create(spec_);  // slow: never under the lock
    // One round trip before it counts as warm: the freshly exec'd runner faults
    // its pages in now, not on the first real call.
    if (sb) {
      if (auto p = (*sb)->probe(); !p) sb = p.take_error();
    }
    if (sb && on_warm_) on_warm_(**sb);
    lock.lock();
    if (!sb) {
      ++stats_.failed;
      ++failures_in_a_row_;
      last_error_ = sb.error();
      spdlog::warn("pool {}: creating a sandbox failed: {}", key_, sb.error().to_string());
      backoff =
          std::min(kMaxBackoff, backoff.count() ? backoff * 2 : std::chrono::milliseconds(50));
      cv_.wait_for(lock, backoff, [&] { return stopping_; });
      continue;
    }
    backoff = std::chrono::milliseconds(0);
    failures_in_a_row_ = 0;
    last_error_.reset();
    ++stats_.created;
    if (stopping_) {
      lock.unlock();
      warn_unless_ok((*sb)->destroy(),
                     "destroying sandbox " + (*sb)->id() + " made while stopping");
      lock.lock();
      break;
    }
    ready_.push_back(std::move(*sb));
    ready_cv_.notify_all();
  }
}

}  // namespace rf::worker
