// Fallback while serving, with the native backend made unhealthy for real: the
// host runs out of uid ranges (each live native sandbox holds one of 16384;
// this test holds them all, as a host at capacity would), which the local
// backend does not need. (Switching user namespaces off would be more telling,
// but the test machines withhold CAP_SYS_RESOURCE, which that sysctl needs.)
// Holding every range starves every other native sandbox on the host, so this
// binary runs alone (RUN_SERIAL).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/backends.h"
#include "host/uid_slots.h"
#include "support/ci_skip.h"
#include "worker/worker.h"

namespace rf::testing {
namespace {

using namespace std::chrono_literals;

// Holds every free host uid range until destroyed.
class HostAtCapacity {
 public:
  HostAtCapacity() {
    rlimit r{host::kSlotCount + 1024, host::kSlotCount + 1024};
    ok_ = ::setrlimit(RLIMIT_NOFILE, &r) == 0;
    for (uint32_t i = 0; ok_ && i < host::kSlotCount; ++i) {
      if (auto lock = host::try_lock_uid_slot(i))
        held_.push_back(std::move(*lock));  // else a live sandbox has it
    }
    ok_ = ok_ && !held_.empty();
  }
  void restore() { held_.clear(); }
  bool ok() const { return ok_; }

 private:
  std::vector<host::SlotLock> held_;
  bool ok_ = false;
};

class RuntimeFallback : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) RF_SKIP() << "needs root to switch user namespaces off";
    ::setenv("RINGFENCE_TOOL_RUNNER", RF_RUNNER_PATH, 1);
    char tmpl[] = "/tmp/rf-fallback-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    state_ = tmpl;
  }
  void TearDown() override {
    worker_.reset();
    if (!state_.empty()) std::system(("rm -rf " + state_).c_str());
  }
  void start(worker::ProjectEnvironment env) {
    auto s = worker::default_settings("/nonexistent-home");
    s.state_dir.value = state_;
    s.mode.value = worker::SandboxMode::kPerRun;
    s.project_environment.value = env;
    s.pool_target.value = 0;  // every new run creates its sandbox on the call path
    auto placement = cli::place_worker(s);
    ASSERT_TRUE(placement.ok()) << placement.error().to_string();
    worker::WorkerOptions o;
    o.settings = s;
    o.concurrency = 2;
    o.failures_before_fallback = 1;
    o.recovery_interval = 500ms;
    auto w = worker::Worker::start(std::move(o), std::move(*placement));
    ASSERT_TRUE(w.ok()) << w.error().to_string();
    worker_ = std::move(*w);
    auto c = store::Store::open(worker::store_path(state_));
    ASSERT_TRUE(c.ok());
    client_ = std::move(*c);
    ASSERT_TRUE(client_->ensure_project("acme", store::Environment::development).ok());
  }
  // Runs `echo hi` in a new run; returns the finished call.
  store::CallView call(const std::string& run) {
    store::NewCall c;
    c.project = "acme";
    c.run = run;
    c.argv = {"/bin/echo", "hi"};
    auto id = client_->enqueue_call(c);
    EXPECT_TRUE(id.ok());
    const auto end = std::chrono::steady_clock::now() + 20s;
    for (;;) {
      auto v = client_->call(*id);
      if (v->state == store::CallState::done || v->state == store::CallState::failed ||
          std::chrono::steady_clock::now() > end) {
        return *v;
      }
      std::this_thread::sleep_for(10ms);
    }
  }
  template <class Pred>
  bool eventually(Pred pred) {
    const auto end = std::chrono::steady_clock::now() + 15s;
    while (!pred() && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(20ms);
    return pred();
  }

  std::string state_;
  std::unique_ptr<worker::Worker> worker_;
  std::unique_ptr<store::Store> client_;
};

TEST_F(RuntimeFallback, NonProductionStepsDownToNoneAndComesBack) {
  start(worker::ProjectEnvironment::kDevelopment);
  ASSERT_EQ(call("r1").state, store::CallState::done);
  EXPECT_EQ(worker_->backend_name(), "native");
  {
    HostAtCapacity off;
    ASSERT_TRUE(off.ok());
    // The first call after the switch fails, naming why; the worker notices.
    auto failed = call("r2");
    EXPECT_EQ(failed.state, store::CallState::failed);
    EXPECT_NE(failed.error.value_or("").find("all 16384 host uid ranges are in use"),
              std::string::npos)
        << failed.error.value_or("");
    ASSERT_TRUE(eventually([&] { return worker_->mode() == worker::SandboxMode::kNone; }));
    EXPECT_EQ(worker_->backend_name(), "local");
    auto served = call("r3");
    ASSERT_EQ(served.state, store::CallState::done) << served.error.value_or("");
    auto j = nlohmann::json::parse(*served.result_json);
    EXPECT_EQ(j["backend"], "local");
    EXPECT_EQ(j["mode"], "none");
  }
  // Ranges are free again: so is native per_run.
  ASSERT_TRUE(eventually([&] { return worker_->mode() == worker::SandboxMode::kPerRun; }));
  EXPECT_EQ(worker_->backend_name(), "native");
  auto back = call("r4");
  ASSERT_EQ(back.state, store::CallState::done) << back.error.value_or("");
  EXPECT_EQ(nlohmann::json::parse(*back.result_json)["backend"], "native");
  EXPECT_FALSE(worker_->fatal());
}

TEST_F(RuntimeFallback, ProductionStopsClaimingAndSaysWhy) {
  start(worker::ProjectEnvironment::kProduction);
  ASSERT_EQ(call("r1").state, store::CallState::done);
  HostAtCapacity off;
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(call("r2").state, store::CallState::failed);
  ASSERT_TRUE(eventually([&] { return worker_->fatal().has_value(); }));
  const std::string why = *worker_->fatal();
  EXPECT_NE(why.find("stopping: backend native is unhealthy: host uid ranges"), std::string::npos)
      << why;
  EXPECT_NE(why.find("production projects never fall back"), std::string::npos) << why;
  EXPECT_EQ(worker_->mode(), worker::SandboxMode::kPerRun);  // never stepped down
  off.restore();
  // It claims nothing more: a new call stays queued.
  store::NewCall c;
  c.project = "acme";
  c.run = "r3";
  c.argv = {"/bin/true"};
  auto id = client_->enqueue_call(c);
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(client_->call(*id)->state, store::CallState::queued);
}

}  // namespace
}  // namespace rf::testing
