// store::StorePool (issue 40): serve's call routes borrow a Store each, so
// many clients' statements no longer queue on one connection. Runs on both
// engines (ctest's store suites, RF_TEST_STORE=postgres).
#include "store/store_pool.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "support/store_target.h"

namespace rf::store {
namespace {

class StorePoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rf-store-pool-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    target_ = testing::fresh_store_target(dir_ + "/ringfence.db");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_, target_;
};

TEST_F(StorePoolTest, EachStoreIsLentToOneBorrowerAtATime) {
  StorePool pool(target_, 2);
  auto a = pool.acquire();
  auto b = pool.acquire();
  ASSERT_TRUE(a.ok()) << a.error().to_string();
  ASSERT_TRUE(b.ok()) << b.error().to_string();
  ASSERT_NE(a->get(), b->get());
  // What one writes, another reads: the same store.
  ASSERT_TRUE(a->get()->ensure_project("acme", Environment::staging).ok());
  auto seen = b->get()->project("acme");
  ASSERT_TRUE(seen.ok());
  EXPECT_EQ(seen->environment, Environment::staging);

  // A third borrower waits for one to come back, and gets that one.
  Store* first = a->get();
  std::atomic<Store*> third{nullptr};
  std::thread waiter([&] {
    auto c = pool.acquire();
    ASSERT_TRUE(c.ok());
    third = c->get();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(third.load(), nullptr) << "lent while both were out";
  a->reset();
  waiter.join();
  EXPECT_EQ(third.load(), first);
}

TEST_F(StorePoolTest, AStoreThatCannotOpenIsAnErrorAndFreesItsPlace) {
  StorePool pool("/dev/null/ringfence.db", 1);
  auto first = pool.acquire();
  ASSERT_FALSE(first.ok());
  EXPECT_NE(first.error().to_string().find("/dev/null/ringfence.db"), std::string::npos)
      << first.error().to_string();
  auto again = pool.acquire();  // does not wait for a place nobody holds
  EXPECT_FALSE(again.ok());
}

}  // namespace
}  // namespace rf::store
