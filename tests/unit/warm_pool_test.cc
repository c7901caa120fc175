// The warm pool against the fake backend: what tests/integration/pool_test.cc
// checks with native sandboxes (refill, pop, never twice, teardown, an
// unhealthy backend), without a kernel.
#include <gtest/gtest.h>

#include <set>

#include "support/fake_backend.h"
#include "worker/pool.h"

namespace rf::testing {
namespace {

using namespace std::chrono_literals;
using worker::WarmPool;

class FakePool : public ::testing::Test {
 protected:
  SandboxSpec spec() {
    SandboxSpec s;
    s.backend = BackendKind::kNative;
    return s;
  }
  template <class F>
  auto count(F f) {
    return script_->locked([&] { return f(*script_); });
  }

  std::shared_ptr<FakeScript> script_ = std::make_shared<FakeScript>();
  FakeBackend backend_{BackendKind::kNative, script_};
};

TEST_F(FakePool, RefillsToTargetProbingEachAndAcquireIsAPop) {
  WarmPool pool(backend_, spec(), /*target=*/2, /*max=*/4);
  EXPECT_EQ(pool.key(), worker::pool_key(spec()));
  pool.start();
  ASSERT_TRUE(pool.wait_ready(2, 10s));
  // Each one answered a round trip before it counted as warm.
  EXPECT_EQ(count([](auto& s) { return s.probes; }), 2);
  EXPECT_EQ(count([](auto& s) { return s.created; }), 2);
  auto sb = pool.acquire();
  ASSERT_TRUE(sb.ok()) << sb.error().to_string();
  EXPECT_EQ(pool.stats().hits, 1u);
  EXPECT_EQ(pool.stats().misses, 0u);
  // It refills behind the caller's back, and stops at the target.
  ASSERT_TRUE(script_->wait_until([&] { return script_->created == 3; }));
  ASSERT_TRUE(pool.wait_ready(2, 10s));
  EXPECT_EQ(pool.stats().created, 3u);
  EXPECT_EQ(pool.stats().ready, 2u);
}

TEST_F(FakePool, SandboxesAreNeverHandedOutTwice) {
  WarmPool pool(backend_, spec(), 3, 3);
  pool.start();
  ASSERT_TRUE(pool.wait_ready(3, 10s));
  std::set<std::string> ids;
  std::vector<std::unique_ptr<Sandbox>> taken;
  for (int i = 0; i < 20; ++i) {  // warm ones, then new ones as the refill races
    auto sb = pool.acquire();
    ASSERT_TRUE(sb.ok());
    EXPECT_TRUE(ids.insert((*sb)->id()).second) << (*sb)->id() << " handed out twice";
    taken.push_back(std::move(*sb));
  }
  const auto st = pool.stats();
  EXPECT_EQ(st.hits + st.misses, 20u);
  EXPECT_GE(st.hits, 3u);
}

TEST_F(FakePool, TargetZeroCreatesOnTheSpotAndTheTargetNeverExceedsMax) {
  WarmPool empty(backend_, spec(), 0, 0);
  empty.start();
  auto sb = empty.acquire();
  ASSERT_TRUE(sb.ok());
  EXPECT_EQ(empty.stats().misses, 1u);
  EXPECT_EQ(empty.stats().created, 0u);
  EXPECT_EQ(count([](auto& s) { return s.probes; }), 0);  // not warmed: the call is first
  WarmPool capped(backend_, spec(), /*target=*/5, /*max=*/2);
  capped.start();
  ASSERT_TRUE(capped.wait_ready(2, 10s));
  EXPECT_FALSE(capped.wait_ready(3, 50ms));
  EXPECT_EQ(capped.stats().created, 2u);
}

TEST_F(FakePool, DestroyingThePoolDestroysItsReadySandboxesButNotTheTakenOnes) {
  std::unique_ptr<Sandbox> taken;
  std::vector<std::string> ready_ids;
  {
    WarmPool pool(backend_, spec(), 2, 2);
    pool.start();
    ASSERT_TRUE(pool.wait_ready(2, 10s));
    auto got = pool.acquire();
    ASSERT_TRUE(got.ok());
    taken = std::move(*got);
    ASSERT_TRUE(pool.wait_ready(2, 10s));
    ready_ids = count([](auto& s) { return s.created_ids; });
  }
  EXPECT_EQ(count([](auto& s) { return s.destroyed; }), 2);
  auto gone = count([](auto& s) { return s.destroyed_ids; });
  EXPECT_EQ(std::count(gone.begin(), gone.end(), taken->id()), 0);
  for (const auto& id : ready_ids) {
    if (id != taken->id()) {
      EXPECT_EQ(std::count(gone.begin(), gone.end(), id), 1) << id;
    }
  }
  EXPECT_TRUE(taken->probe().ok());  // still usable by its caller
}

TEST_F(FakePool, AnUnhealthyBackendIsReportedRetriedAndRecovers) {
  script_->locked([&] {
    script_->fail_every_create = true;
    script_->create_error = "all 16384 host uid ranges are in use";
    return 0;
  });
  WarmPool pool(backend_, spec(), 1, 1);
  pool.start();
  ASSERT_TRUE(script_->wait_until([&] { return script_->creates_tried >= 2; }));
  EXPECT_GE(pool.failures_in_a_row(), 1);
  ASSERT_TRUE(pool.last_error().has_value());
  EXPECT_EQ(pool.last_error()->to_string(),
            "sandbox setup failed at step \"fake\": all 16384 host uid ranges are in use");
  auto sb = pool.acquire();  // a miss creates on the spot, and fails the same way
  ASSERT_FALSE(sb.ok());
  EXPECT_EQ(sb.error().to_string(), pool.last_error()->to_string());
  // The backend heals: the next retry (after its backoff) fills the pool.
  script_->locked([&] { return script_->fail_every_create = false; });
  ASSERT_TRUE(pool.wait_ready(1, 10s));
  EXPECT_EQ(pool.failures_in_a_row(), 0);
  EXPECT_FALSE(pool.last_error().has_value());
  EXPECT_GE(pool.stats().failed, 1u);
}

TEST_F(FakePool, ASandboxThatFailsItsFirstRoundTripIsNeverWarm) {
  // Created, but its runner does not answer: it counts as a failure, and goes.
  script_->locked([&] { return script_->fail_probes = 1; });
  WarmPool pool(backend_, spec(), 1, 1);
  pool.start();
  ASSERT_TRUE(pool.wait_ready(1, 10s));
  EXPECT_EQ(pool.stats().failed, 1u);
  EXPECT_EQ(pool.stats().created, 1u);
  const auto created = count([](auto& s) { return s.created_ids; });
  ASSERT_EQ(created.size(), 2u);
  EXPECT_EQ(count([](auto& s) { return s.destroyed_ids; }), std::vector<std::string>{created[0]});
  auto sb = pool.acquire();
  ASSERT_TRUE(sb.ok());
  EXPECT_EQ((*sb)->id(), created[1]);
}

}  // namespace
}  // namespace rf::testing
