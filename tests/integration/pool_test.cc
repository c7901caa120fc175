// The warm pool against real native sandboxes.
#include "worker/pool.h"

#include "integration/harness.h"

namespace rf::testing {
namespace {

using Pool = SandboxTest;

TEST_F(Pool, KeyNamesWhatMakesSandboxesInterchangeable) {
  SandboxSpec a, b;
  b.limits.memory_bytes = 1ull << 30;
  EXPECT_EQ(worker::pool_key(a), worker::pool_key(SandboxSpec{}));
  EXPECT_NE(worker::pool_key(a), worker::pool_key(b));
  EXPECT_EQ(worker::pool_key(a),
            "native/host/net=none/cpu=1.000000/mem=512m/pids=256/disk=1g/seccomp=default");
}

TEST_F(Pool, RefillsToTargetAndAcquireIsAPop) {
  worker::WarmPool pool(*backend_, SandboxSpec{}, /*target=*/2, /*max=*/4);
  pool.start();
  ASSERT_TRUE(pool.wait_ready(2, std::chrono::seconds(10)));
  auto sb = pool.acquire();
  ASSERT_TRUE(sb.ok()) << sb.error().to_string();
  EXPECT_EQ(pool.stats().hits, 1u);
  EXPECT_EQ(pool.stats().misses, 0u);
  EXPECT_EQ(sh(**sb, "echo warm").out, "warm\n");
  // It refills behind the caller's back.
  EXPECT_TRUE(pool.wait_ready(2, std::chrono::seconds(10)));
  EXPECT_GE(pool.stats().created, 3u);
}

TEST_F(Pool, SandboxesAreNeverHandedOutTwice) {
  worker::WarmPool pool(*backend_, SandboxSpec{}, 2, 2);
  pool.start();
  ASSERT_TRUE(pool.wait_ready(2, std::chrono::seconds(10)));
  auto a = pool.acquire();
  auto b = pool.acquire();
  auto c = pool.acquire();  // the pool may be empty now: created on the spot
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_NE((*a)->id(), (*b)->id());
  EXPECT_NE((*b)->id(), (*c)->id());
  EXPECT_NE((*a)->id(), (*c)->id());
  // What one user leaves behind, the next never sees.
  ASSERT_EQ(sh(**a, "echo secret > /workspace/mine").result.exit_code, 0);
  EXPECT_EQ(sh(**b, "ls /workspace").out, "");
}

TEST_F(Pool, EmptyPoolCreatesOnTheSpot) {
  worker::WarmPool pool(*backend_, SandboxSpec{}, /*target=*/0, /*max=*/0);
  pool.start();
  auto sb = pool.acquire();
  ASSERT_TRUE(sb.ok());
  EXPECT_EQ(pool.stats().misses, 1u);
  EXPECT_EQ(pool.stats().created, 0u);
}

TEST_F(Pool, DestroyingThePoolDestroysItsReadySandboxes) {
  std::vector<int> pids;
  {
    worker::WarmPool pool(*backend_, SandboxSpec{}, 2, 2);
    pool.start();
    ASSERT_TRUE(pool.wait_ready(2, std::chrono::seconds(10)));
    auto all = backend_->list();
    ASSERT_TRUE(all.ok());
    for (const auto& i : *all) {
      if (i.owner_pid == ::getpid()) pids.push_back(i.pid);
    }
  }
  ASSERT_GE(pids.size(), 2u);
  for (int pid : pids) EXPECT_NE(::kill(pid, 0), 0) << pid;
}

TEST_F(Pool, AnUnhealthyBackendIsReportedAndRetriedWithBackoff) {
  auto bad =
      native::make_native_backend(native::NativeOptions{"/nonexistent/runner", "ringfence-test"});
  ASSERT_TRUE(bad.ok());
  worker::WarmPool pool(**bad, SandboxSpec{}, 1, 1);
  pool.start();
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (pool.stats().failed < 2 && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_GE(pool.stats().failed, 2u);
  ASSERT_TRUE(pool.last_error().has_value());
  EXPECT_EQ(pool.last_error()->to_string(),
            "sandbox setup failed at step \"bind /.ringfence/tool-runner (ro)\": No such file or "
            "directory");
  auto sb = pool.acquire();
  EXPECT_FALSE(sb.ok());
}

}  // namespace
}  // namespace rf::testing
