// More connections to one store for a process that serves many clients at
// once (`serve`): a Store holds one connection behind one lock, so its
// clients' statements went one after another (issue 40: the calls of 16
// `call --api` clients waited on serve's single PostgreSQL connection).
// Stores are opened when first needed, up to `size`, and lent one at a time;
// a borrower waits while all are lent. A caller holds one only while it
// talks to the store, never while it waits for a change (waits need none:
// the Stores of a process share its doorbell).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/result.h"
#include "store/store.h"

namespace rf::store {

class StorePool {
 public:
  StorePool(std::string target, size_t size);
  StorePool(const StorePool&) = delete;
  StorePool& operator=(const StorePool&) = delete;

  // A Store lent until the Lease ends (or is reset); an empty Lease holds none.
  class Lease {
   public:
    Lease() = default;
    Lease(StorePool* pool, Store* store) : pool_(pool), store_(store) {}
    Lease(Lease&& other) noexcept { *this = std::move(other); }
    Lease& operator=(Lease&& other) noexcept {
      if (this != &other) {
        reset();
        pool_ = other.pool_;
        store_ = other.store_;
        other.store_ = nullptr;
      }
      return *this;
    }
    ~Lease() { reset(); }
    void reset() {
      if (store_ != nullptr) pool_->give_back(store_);
      store_ = nullptr;
    }
    Store* get() const { return store_; }

   private:
    StorePool* pool_ = nullptr;
    Store* store_ = nullptr;
  };

  // A Store of its own for the caller until the Lease ends; an error when a
  // new one had to be opened and could not be.
  Result<Lease> acquire();

 private:
  void give_back(Store* store);

  const std::string target_;
  const size_t size_;
  std::mutex mu_;
  std::condition_variable returned_;
  std::vector<std::unique_ptr<Store>> all_;  // under mu_
  std::vector<Store*> idle_;                 // under mu_
  size_t opening_ = 0;                       // under mu_: being opened now
};

}  // namespace rf::store
