#include "store/store_pool.h"

namespace rf::store {

StorePool::StorePool(std::string target, size_t size)
    : target_(std::move(target)), size_(size == 0 ? 1 : size) {}

Result<StorePool::Lease> StorePool::acquire() {
  std::unique_lock lock(mu_);
  returned_.wait(lock, [&] { return !idle_.empty() || all_.size() + opening_ < size_; });
  if (!idle_.empty()) {
    Store* s = idle_.back();
    idle_.pop_back();
    return Lease(this, s);
  }
  ++opening_;  // opened outside the lock: a connection takes a while
  lock.unlock();
  auto opened = Store::open(target_);
  lock.lock();
  --opening_;
  if (!opened) {
    returned_.notify_one();  // its place is free again
    return opened.take_error();
  }
  all_.push_back(std::move(*opened));
  return Lease(this, all_.back().get());
}

void StorePool::give_back(Store* store) {
  {
    std::lock_guard lock(mu_);
    idle_.push_back(store);
  }
  returned_.notify_one();
}

}  // namespace rf::store
