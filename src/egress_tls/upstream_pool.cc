#include "egress_tls/upstream_pool.h"

#include <poll.h>

namespace rf::egress_tls {
namespace {

// An idle connection has nothing to say: readable means the upstream closed
// it (or broke the protocol).
bool still_open(const Side& side) {
  if (side.pending()) return false;
  pollfd p{side.fd(), POLLIN, 0};
  return ::poll(&p, 1, 0) == 0;
}

}  // namespace

std::unique_ptr<Side> UpstreamPool::take(const std::string& key) {
  std::deque<Idle> stale;  // closed outside the lock
  std::unique_ptr<Side> found;
  {
    std::lock_guard lock(mu_);
    auto it = idle_.find(key);
    if (it == idle_.end()) return nullptr;
    const auto now = std::chrono::steady_clock::now();
    while (!it->second.empty() && !found) {
      Idle idle = std::move(it->second.back());
      it->second.pop_back();
      if (now - idle.since < kIdle && still_open(*idle.side)) {
        found = std::move(idle.side);
      } else {
        stale.push_back(std::move(idle));
      }
    }
    if (it->second.empty()) idle_.erase(it);
  }
  return found;
}

void UpstreamPool::give(const std::string& key, std::unique_ptr<Side> side) {
  std::unique_ptr<Side> dropped;
  std::lock_guard lock(mu_);
  auto& list = idle_[key];
  if (closed_ || list.size() >= kPerKey) {
    dropped = std::move(side);
    return;
  }
  list.push_back({std::move(side), std::chrono::steady_clock::now()});
}

void UpstreamPool::close() {
  std::map<std::string, std::deque<Idle>> all;
  std::lock_guard lock(mu_);
  closed_ = true;
  all.swap(idle_);
}

}  // namespace rf::egress_tls
