// Which sandbox a call runs in, per sandbox mode, against the fake backend:
// the routing of tests/integration/worker_test.cc without a kernel.
#include "worker/sandbox_router.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "support/fake_backend.h"

namespace rf::testing {
namespace {

using namespace std::chrono_literals;
using worker::SandboxLease;
using worker::SandboxMode;
using worker::SandboxRouter;

class FakeRouter : public ::testing::Test {
 protected:
  std::unique_ptr<SandboxRouter> router(SandboxMode mode, worker::WarmPool* pool = nullptr,
                                        std::chrono::milliseconds idle = 10min) {
    SandboxSpec spec;
    spec.backend = BackendKind::kNative;
    return std::make_unique<SandboxRouter>(mode, backend_, spec, pool, "acme", idle);
  }
  SandboxLease take(SandboxRouter& r, const std::string& project, const std::string& run,
                    const std::string& image = "") {
    auto lease = r.acquire(project, run, image);
    EXPECT_TRUE(lease.ok()) << lease.error().to_string();
    return lease.ok() ? std::move(*lease) : SandboxLease{};
  }
  int created() {
    return script_->locked([&] { return script_->created; });
  }
  int destroyed() {
    return script_->locked([&] { return script_->destroyed; });
  }

  std::shared_ptr<FakeScript> script_ = std::make_shared<FakeScript>();
  FakeBackend backend_{BackendKind::kNative, script_};
};

TEST_F(FakeRouter, PerRunReusesTheRunsSandboxAndSeparatesRunsAndProjects) {
  auto r = router(SandboxMode::kPerRun);
  SandboxLease a = take(*r, "acme", "r1");
  ASSERT_TRUE(a.sandbox);
  EXPECT_FALSE(a.destroy_after);
  ASSERT_TRUE(a.sandbox->write_file("/workspace/f", "one").ok());
  r->release(std::move(a));
  SandboxLease b = take(*r, "acme", "r1");
  EXPECT_EQ(*b.sandbox->read_file("/workspace/f"), "one");  // the same sandbox
  SandboxLease c = take(*r, "acme", "r2");
  SandboxLease d = take(*r, "other", "r3");
  EXPECT_NE(c.sandbox->id(), b.sandbox->id());
  EXPECT_NE(d.sandbox->id(), b.sandbox->id());
  EXPECT_FALSE(c.sandbox->read_file("/workspace/f").ok());
  EXPECT_EQ(created(), 3);
  // The labels say whose each one is.
  script_->locked([&] {
    EXPECT_EQ(script_->specs[0].labels.at("project"), "acme");
    EXPECT_EQ(script_->specs[0].labels.at("run"), "r1");
    EXPECT_EQ(script_->specs[2].labels.at("project"), "other");
    return 0;
  });
  // A run of one project is never lent to another.
  auto stolen = r->acquire("other", "r1");
  ASSERT_FALSE(stolen.ok());
  EXPECT_EQ(stolen.error().to_string(), "run r1: belongs to project acme, not other");
  const std::string r1 = b.sandbox->id();
  r->release(std::move(b));
  r->end_run("r1");
  EXPECT_EQ(destroyed(), 1);
  EXPECT_EQ(script_->locked([&] { return script_->destroyed_ids; }), std::vector<std::string>{r1});
  EXPECT_EQ(r->live_runs(), (std::vector<std::string>{"r2", "r3"}));
  r->release(std::move(c));
  r->release(std::move(d));
  r->destroy_all();
  EXPECT_EQ(destroyed(), 3);
  EXPECT_TRUE(r->live_runs().empty());
}

TEST_F(FakeRouter, PerToolAndNoneGiveEveryCallAFreshSandboxDestroyedOnRelease) {
  for (SandboxMode mode : {SandboxMode::kPerTool, SandboxMode::kNone}) {
    auto r = router(mode);
    const int before = created();
    SandboxLease a = take(*r, "acme", "r1");
    SandboxLease b = take(*r, "acme", "r1");
    EXPECT_TRUE(a.destroy_after);
    EXPECT_NE(a.sandbox->id(), b.sandbox->id());
    EXPECT_EQ(created(), before + 2);
    const int gone = destroyed();
    r->release(std::move(a));
    EXPECT_EQ(destroyed(), gone + 1);
    EXPECT_TRUE(r->live_runs().empty());
    // destroy_all reaches a sandbox still lent to a call (a worker past its grace).
    r->destroy_all();
    EXPECT_EQ(destroyed(), gone + 2);
    r->release(std::move(b));  // its call ends later: destroying again is harmless
    EXPECT_EQ(destroyed(), gone + 2);
  }
}

TEST_F(FakeRouter, PerWorkerServesOnlyItsProjectFromOneSandbox) {
  auto r = router(SandboxMode::kPerWorker);
  SandboxLease a = take(*r, "acme", "r1");
  SandboxLease b = take(*r, "acme", "r2");
  EXPECT_EQ(a.sandbox, b.sandbox);
  EXPECT_EQ(created(), 1);
  auto intruder = r->acquire("intruder", "r9");
  ASSERT_FALSE(intruder.ok());
  EXPECT_EQ(intruder.error().to_string(),
            "project intruder: this worker is per_worker for project acme and serves no other");
  EXPECT_EQ(created(), 1);
  // Ending a run does not end the worker's sandbox; idle reaping is per_run only.
  r->release(std::move(a));
  r->release(std::move(b));
  r->end_run("r1");
  EXPECT_TRUE(r->reap_idle().empty());
  EXPECT_EQ(destroyed(), 0);
}

TEST_F(FakeRouter, ARunKeepsTheImageOfItsFirstCall) {
  auto r = router(SandboxMode::kPerRun);
  SandboxLease a = take(*r, "acme", "r1", "agent:1");
  EXPECT_EQ(script_->locked([&] { return script_->specs.back().image; }), "agent:1");
  auto other = r->acquire("acme", "r1", "agent:2");
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(
      other.error().to_string(),
      "sandbox_image agent:2: run r1's sandbox runs image agent:1; one sandbox has one image");
  SandboxLease same = take(*r, "acme", "r1", "agent:1");
  EXPECT_EQ(same.sandbox, a.sandbox);
  // Mode none has no image to run.
  auto none = router(SandboxMode::kNone);
  auto refused = none->acquire("acme", "r1", "agent:1");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().to_string(),
            "sandbox_image agent:1: sandbox mode none runs calls in a local scratch directory, "
            "with no image");
  r->release(std::move(a));
  r->release(std::move(same));
}

TEST_F(FakeRouter, AFailedCreationIsTheCallsErrorAndLeavesNoRunBehind) {
  auto r = router(SandboxMode::kPerRun);
  script_->locked([&] { return script_->fail_creates = 1; });
  auto failed = r->acquire("acme", "r1");
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().to_string(),
            "sandbox setup failed at step \"fake\": fake: creation refused");
  EXPECT_TRUE(r->live_runs().empty());
  // The next call of the run tries again, and gets one.
  SandboxLease ok = take(*r, "acme", "r1");
  EXPECT_TRUE(ok.sandbox);
  // An agent's own image that cannot be had names the image.
  script_->locked([&] { return script_->fail_creates = 1; });
  auto image = r->acquire("acme", "r2", "agent:missing");
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.error().to_string(),
            "sandbox_image agent:missing: sandbox setup failed at step \"fake\": fake: creation "
            "refused");
  r->release(std::move(ok));
}

TEST_F(FakeRouter, IdleRunsAreReapedUnlessACallUsesThem) {
  auto r = router(SandboxMode::kPerRun, nullptr, /*idle=*/0ms);
  SandboxLease busy = take(*r, "acme", "busy");
  SandboxLease idle = take(*r, "acme", "idle");
  r->release(std::move(idle));
  EXPECT_EQ(r->reap_idle(), std::vector<std::string>{"idle"});
  EXPECT_EQ(r->live_runs(), std::vector<std::string>{"busy"});
  EXPECT_EQ(destroyed(), 1);
  r->release(std::move(busy));
  EXPECT_EQ(r->reap_idle(), std::vector<std::string>{"busy"});
  EXPECT_EQ(destroyed(), 2);
}

TEST_F(FakeRouter, TwoCallsOfANewRunAtOnceMakeOneSandbox) {
  auto r = router(SandboxMode::kPerRun);
  script_->locked([&] { return script_->create_delay = 20ms; });
  std::vector<std::thread> calls;
  std::vector<SandboxLease> leases(8);
  for (int i = 0; i < 8; ++i) calls.emplace_back([&, i] { leases[i] = take(*r, "acme", "r1"); });
  for (auto& t : calls) t.join();
  EXPECT_EQ(created(), 1);
  for (auto& l : leases) {
    EXPECT_EQ(l.sandbox, leases[0].sandbox);
    r->release(std::move(l));
  }
}

TEST_F(FakeRouter, TheWarmPoolServesTheWorkersImageOnly) {
  SandboxSpec spec;
  spec.backend = BackendKind::kNative;
  worker::WarmPool pool(backend_, spec, 1, 1);
  pool.start();
  ASSERT_TRUE(pool.wait_ready(1, 10s));
  auto r = router(SandboxMode::kPerTool, &pool);
  SandboxLease warm = take(*r, "acme", "r1");
  EXPECT_EQ(pool.stats().hits, 1u);
  // An agent's own image is created for it, with its labels; the pool is not asked.
  SandboxLease own = take(*r, "acme", "r1", "agent:1");
  EXPECT_EQ(pool.stats().hits + pool.stats().misses, 1u);
  script_->locked([&] {
    // The pool refills beside this call: find the agent's creation among them.
    auto it = std::find_if(script_->specs.begin(), script_->specs.end(),
                           [](const SandboxSpec& s) { return s.image == "agent:1"; });
    EXPECT_NE(it, script_->specs.end());
    if (it != script_->specs.end()) {
      EXPECT_EQ(it->labels.at("project"), "acme");
    }
    return 0;
  });
  r->release(std::move(warm));
  r->release(std::move(own));
}

}  // namespace
}  // namespace rf::testing
