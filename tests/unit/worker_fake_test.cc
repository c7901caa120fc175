// The worker's logic above the sandbox, against the fake backend (registered
// as "native" and "docker"): placement and fallback at start and while serving,
// the store's record of what it serves, and the executors' claim hand-over.
// The real-sandbox versions stay in tests/integration (worker_test.cc,
// runtime_fallback_test.cc); these run in milliseconds, without root.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "local/local_backend.h"
#include "support/fake_backend.h"
#include "worker/worker.h"

namespace rf::testing {
namespace {

using namespace std::chrono_literals;
using worker::ProjectEnvironment;
using worker::SandboxMode;

class FakeWorker : public ::testing::Test {
 protected:
  void SetUp() override {
    // Mode none falls back onto the local backend, which spawns the real runner.
    ::setenv("RINGFENCE_TOOL_RUNNER", RF_RUNNER_PATH, 1);
    // The fakes stand in for native and docker; mode none is the real local backend.
    register_fake_backend(BackendKind::kNative, script_);
    register_fake_backend(BackendKind::kDocker, script2_);
    local::register_local_backend();
    std::string tmpl = (std::filesystem::temp_directory_path() / "rf-fake-worker-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    state_ = tmpl;
  }
  void TearDown() override {
    script_->open_gate();
    worker_.reset();
    client_.reset();
    std::filesystem::remove_all(state_);
  }

  worker::WorkerSettings settings(SandboxMode mode,
                                  ProjectEnvironment env = ProjectEnvironment::kDevelopment) {
    auto s = worker::default_settings("/nonexistent-home");
    s.state_dir.value = state_;
    s.mode.value = mode;
    s.backend.value = BackendKind::kNative;
    s.project.value = "acme";
    s.project_environment.value = env;
    s.pool_target.value = 0;  // every new run creates its sandbox on the call path
    return s;
  }
  // Housekeeping (heartbeat, health watch, recovery) runs every lease/3, at
  // least every 100 ms: a short lease makes fallback and recovery quick.
  void start(const worker::WorkerSettings& s, int concurrency = 4,
             std::chrono::milliseconds grace = 10s, std::chrono::milliseconds lease = 900ms) {
    auto placement = worker::place(s);
    ASSERT_TRUE(placement.ok()) << placement.error().to_string();
    worker::WorkerOptions o;
    o.settings = s;
    o.worker_id = "w-fake";
    o.concurrency = concurrency;
    o.grace = grace;
    o.lease = lease;
    o.failures_before_fallback = 1;
    o.recovery_interval = 0ms;  // try the configured backend at every housekeeping turn
    auto w = worker::Worker::start(std::move(o), std::move(*placement));
    ASSERT_TRUE(w.ok()) << w.error().to_string();
    worker_ = std::move(*w);
    auto c = store::Store::open(worker::store_path(state_));
    ASSERT_TRUE(c.ok()) << c.error().to_string();
    client_ = std::move(*c);
    for (const char* p : {"acme", "other"})
      ASSERT_TRUE(client_->ensure_project(p, store::Environment::development).ok());
  }
  int64_t enqueue(const std::string& run, std::vector<std::string> argv,
                  const std::string& project = "acme") {
    store::NewCall c;
    c.project = project;
    c.run = run;
    c.argv = std::move(argv);
    auto id = client_->enqueue_call(c);
    EXPECT_TRUE(id.ok()) << id.error().to_string();
    return id.ok() ? *id : 0;
  }
  struct Ended {
    store::CallView view;
    std::string out;
    nlohmann::json result;
  };
  // Waits for the call's end, as `ringfence call` does.
  Ended wait(int64_t id, store::Store* s = nullptr) {
    if (s == nullptr) s = client_.get();
    const auto end = std::chrono::steady_clock::now() + 20s;
    Ended e;
    while (std::chrono::steady_clock::now() < end) {
      const uint32_t seen = s->call_version(id);
      auto v = s->call(id);
      if (v && v->state != store::CallState::queued && v->state != store::CallState::claimed &&
          v->state != store::CallState::running) {
        e.view = *v;
        break;
      }
      s->wait_for_call(id, seen, 100ms);
    }
    if (auto chunks = s->output(id)) {
      for (const auto& c : *chunks) e.out += c.data;
    }
    if (e.view.result_json) e.result = nlohmann::json::parse(*e.view.result_json);
    return e;
  }
  Ended call(const std::string& run, std::vector<std::string> argv,
             const std::string& project = "acme") {
    return wait(enqueue(run, std::move(argv), project));
  }
  template <class Pred>
  static bool eventually(Pred pred) {
    const auto end = std::chrono::steady_clock::now() + 10s;
    while (!pred() && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(5ms);
    return pred();
  }
  void break_fake(bool broken) {
    script_->locked([&] {
      script_->fail_every_create = broken;
      script_->health[0].ok = !broken;
      script_->health[0].detail = broken ? "down" : "scripted";
      return 0;
    });
  }
  bool serves(const std::string& project) {
    auto w = client_->workers_serving(project, store::now_ms() - 10'000);
    return w.ok() && !w->empty();
  }

  std::shared_ptr<FakeScript> script_ = std::make_shared<FakeScript>();
  std::shared_ptr<FakeScript> script2_ = std::make_shared<FakeScript>();
  std::string state_;
  std::unique_ptr<worker::Worker> worker_;
  std::unique_ptr<store::Store> client_;
};

// ---- placement at start

TEST_F(FakeWorker, AHealthyBackendServesItsModeWithoutAWord) {
  auto p = worker::place(settings(SandboxMode::kPerRun));
  ASSERT_TRUE(p.ok()) << p.error().to_string();
  EXPECT_EQ(p->backend->name(), "native");
  EXPECT_EQ(p->mode, SandboxMode::kPerRun);
  EXPECT_TRUE(p->warnings.empty());
  // A failing check that is not required is no reason to move.
  script_->locked([&] {
    script_->health.push_back({"optional extra", false, "absent", "install it", false});
    return 0;
  });
  auto still = worker::place(settings(SandboxMode::kPerRun));
  ASSERT_TRUE(still.ok());
  EXPECT_EQ(still->backend->name(), "native");
  EXPECT_TRUE(still->warnings.empty());
}

TEST_F(FakeWorker, AnUnhealthyBackendGivesWayToTheNextHealthyOneKeepingTheMode) {
  break_fake(true);
  auto s = settings(SandboxMode::kPerWorker);
  s.fallback_backends.value = {BackendKind::kLocal, BackendKind::kDocker};
  auto p = worker::place(s);
  ASSERT_TRUE(p.ok()) << p.error().to_string();
  EXPECT_EQ(p->backend->name(), "docker");
  EXPECT_EQ(p->mode, SandboxMode::kPerWorker);
  EXPECT_EQ(
      p->warnings,
      (std::vector<std::string>{
          "backend native is unhealthy: fake engine: down",
          "backend local is unhealthy: it has no isolation and serves only sandbox mode none"}));
}

TEST_F(FakeWorker, NonProductionStepsDownOneModeAtATimeToNone) {
  break_fake(true);
  auto p = worker::place(settings(SandboxMode::kPerWorker, ProjectEnvironment::kStaging));
  ASSERT_TRUE(p.ok()) << p.error().to_string();
  EXPECT_EQ(p->mode, SandboxMode::kNone);
  EXPECT_EQ(p->backend->name(), "local");
  const std::string why = ": backend native is unhealthy: fake engine: down";
  EXPECT_EQ(p->warnings,
            (std::vector<std::string>{"backend native is unhealthy: fake engine: down",
                                      "falling back from sandbox mode per_worker to per_run" + why,
                                      "falling back from sandbox mode per_run to per_tool" + why,
                                      "falling back from sandbox mode per_tool to none" + why}));
}

TEST_F(FakeWorker, ProductionNeverFallsBackInMode) {
  break_fake(true);
  const auto s = settings(SandboxMode::kPerRun, ProjectEnvironment::kProduction);
  auto p = worker::place(s);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().to_string(),
            "worker: refusing to start: backend native is unhealthy: fake engine: down; production "
            "projects never fall back to a weaker sandbox mode");
  auto serving = worker::place(s, /*at_start=*/false);
  ASSERT_FALSE(serving.ok());
  EXPECT_EQ(serving.error().to_string(),
            "worker: stopping: backend native is unhealthy: fake engine: down; production projects "
            "never fall back to a weaker sandbox mode");
  // A healthy fallback backend is no weaker: production takes it.
  auto with_fallback = s;
  with_fallback.fallback_backends.value = {BackendKind::kDocker};
  auto kept = worker::place(with_fallback);
  ASSERT_TRUE(kept.ok()) << kept.error().to_string();
  EXPECT_EQ(kept->backend->name(), "docker");
  EXPECT_EQ(kept->mode, SandboxMode::kPerRun);
}

// ---- fallback while serving

TEST_F(FakeWorker, FailingCreationsStepDownToNoneThenBackWhenHealthy) {
  start(settings(SandboxMode::kPerRun));
  Ended first = call("r1", {"echo", "hi"});
  ASSERT_EQ(first.view.state, store::CallState::done) << first.view.error.value_or("");
  EXPECT_EQ(first.result["backend"], "native");
  EXPECT_EQ(first.result["mode"], "per_run");
  EXPECT_EQ(first.out, "echo hi\n");  // the fake's own echo

  break_fake(true);
  Ended failed = call("r2", {"echo", "hi"});
  EXPECT_EQ(failed.view.state, store::CallState::failed);
  EXPECT_EQ(failed.view.error, "sandbox setup failed at step \"fake\": fake: creation refused");
  EXPECT_EQ(failed.out, "");
  ASSERT_TRUE(eventually([&] { return worker_->mode() == SandboxMode::kNone; }));
  EXPECT_EQ(worker_->backend_name(), "local");
  Ended local = call("r3", {"/bin/echo", "from local"});
  ASSERT_EQ(local.view.state, store::CallState::done) << local.view.error.value_or("");
  EXPECT_EQ(local.result["backend"], "local");
  EXPECT_EQ(local.result["mode"], "none");
  EXPECT_EQ(local.out, "from local\n");  // a real process this time

  break_fake(false);
  ASSERT_TRUE(eventually([&] { return worker_->mode() == SandboxMode::kPerRun; }));
  EXPECT_EQ(worker_->backend_name(), "native");
  Ended back = call("r4", {"echo", "back"});
  ASSERT_EQ(back.view.state, store::CallState::done) << back.view.error.value_or("");
  EXPECT_EQ(back.result["backend"], "native");
  EXPECT_FALSE(worker_->fatal());
}

// What a per_worker worker serves is in the store, for clients that wait for
// one: its project only, then every project while it is fallen back to none.
TEST_F(FakeWorker, APerWorkerWorkerTellsTheStoreWhatItServesAsItFallsBackAndRecovers) {
  start(settings(SandboxMode::kPerWorker));
  EXPECT_TRUE(serves("acme"));
  EXPECT_FALSE(serves("other"));
  auto rows = client_->workers();
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->at(0).project, "acme");
  break_fake(true);
  Ended failed = call("r1", {"echo", "hi"});
  EXPECT_EQ(failed.view.state, store::CallState::failed);
  ASSERT_TRUE(eventually([&] { return worker_->mode() == SandboxMode::kNone; }));
  ASSERT_TRUE(eventually([&] { return serves("other"); }));
  break_fake(false);
  ASSERT_TRUE(eventually([&] { return worker_->mode() == SandboxMode::kPerWorker; }));
  ASSERT_TRUE(eventually([&] { return !serves("other"); }));
  EXPECT_TRUE(serves("acme"));
  // Stopped, it serves nobody.
  worker_->stop();
  EXPECT_FALSE(serves("acme"));
}

TEST_F(FakeWorker, ProductionStopsClaimingAndSaysWhy) {
  start(settings(SandboxMode::kPerRun, ProjectEnvironment::kProduction));
  ASSERT_EQ(call("r1", {"true"}).view.state, store::CallState::done);
  break_fake(true);
  EXPECT_EQ(call("r2", {"true"}).view.state, store::CallState::failed);
  ASSERT_TRUE(eventually([&] { return worker_->fatal().has_value(); }));
  EXPECT_EQ(*worker_->fatal(),
            "worker: stopping: backend native is unhealthy: fake engine: down; production projects "
            "never fall back to a weaker sandbox mode");
  EXPECT_EQ(worker_->mode(), SandboxMode::kPerRun);  // never stepped down
  break_fake(false);
  const int64_t late = enqueue("r3", {"true"});
  worker_->stop();
  EXPECT_EQ(client_->call(late)->state, store::CallState::queued);  // nobody took it
}

// ---- executors: the leader claims for the idle ones and hands calls over

TEST_F(FakeWorker, TheLeaderHandsClaimedCallsToIdleExecutorsWhichRunThemAtOnce) {
  script_->locked([&] { return script_->gate_closed = true; });
  start(settings(SandboxMode::kPerRun), /*concurrency=*/4);
  std::vector<int64_t> ids;
  for (int i = 0; i < 4; ++i)
    ids.push_back(enqueue("r" + std::to_string(i), {"wait", std::to_string(i)}));
  // All four run at once: one per executor, the leader's batch shared out.
  ASSERT_TRUE(script_->wait_until([&] { return script_->execs_running == 4; }))
      << script_->locked([&] { return script_->execs_running; }) << " running";
  for (int64_t id : ids) EXPECT_EQ(client_->call(id)->state, store::CallState::running);
  // A fifth waits queued: no executor is free to lead a claim.
  const int64_t fifth = enqueue("r9", {"echo", "fifth"});
  EXPECT_EQ(client_->call(fifth)->state, store::CallState::queued);
  script_->open_gate();
  for (int i = 0; i < 4; ++i) {
    Ended e = wait(ids[i]);
    EXPECT_EQ(e.view.state, store::CallState::done) << e.view.error.value_or("");
    EXPECT_EQ(e.out, "wait " + std::to_string(i) + "\n");
  }
  EXPECT_EQ(wait(fifth).out, "echo fifth\n");
  EXPECT_EQ(script_->locked([&] { return script_->most_execs_running; }), 4);
}

TEST_F(FakeWorker, OneExecutorTakesCallsOneAtATimeInEnqueueOrder) {
  script_->locked([&] { return script_->gate_closed = true; });
  start(settings(SandboxMode::kPerRun), /*concurrency=*/1);
  const int64_t first = enqueue("r1", {"wait"});
  ASSERT_TRUE(script_->wait_until([&] { return script_->execs_running == 1; }));
  std::vector<int64_t> later;
  for (int i = 0; i < 5; ++i) later.push_back(enqueue("r1", {"echo", std::to_string(i)}));
  for (int64_t id : later) EXPECT_EQ(client_->call(id)->state, store::CallState::queued);
  script_->open_gate();
  EXPECT_EQ(wait(first).view.state, store::CallState::done);
  int64_t last_claim = 0;
  for (int64_t id : later) {
    Ended e = wait(id);
    ASSERT_EQ(e.view.state, store::CallState::done);
    EXPECT_GE(*e.view.claimed_at, last_claim);
    last_claim = *e.view.claimed_at;
  }
  EXPECT_EQ(script_->locked([&] { return script_->most_execs_running; }), 1);
}

TEST_F(FakeWorker, FourHundredCallsFromSixteenClientsNoneLostNoneTwice) {
  start(settings(SandboxMode::kPerRun), /*concurrency=*/8);
  std::mutex mu;
  std::multiset<std::string> outputs;
  int not_done = 0;
  std::vector<std::thread> clients;
  for (int c = 0; c < 16; ++c) {
    clients.emplace_back([&, c] {
      auto s = store::Store::open(worker::store_path(state_));
      ASSERT_TRUE(s.ok());
      for (int i = 0; i < 25; ++i) {
        store::NewCall nc;
        nc.project = "acme";
        nc.run = "run-" + std::to_string(c % 4);
        nc.argv = {"echo", std::to_string(c) + "-" + std::to_string(i)};
        auto id = (*s)->enqueue_call(nc);
        ASSERT_TRUE(id.ok());
        Ended e = wait(*id, s->get());
        std::lock_guard l(mu);
        if (e.view.state != store::CallState::done) ++not_done;
        outputs.insert(e.out);
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(not_done, 0);
  ASSERT_EQ(outputs.size(), 400u);
  for (int c = 0; c < 16; ++c) {
    for (int i = 0; i < 25; ++i) {
      EXPECT_EQ(outputs.count("echo " + std::to_string(c) + "-" + std::to_string(i) + "\n"), 1u);
    }
  }
  EXPECT_EQ(script_->locked([&] { return script_->execs; }), 400);
  EXPECT_EQ(script_->locked([&] { return script_->created; }), 4);  // one per run
}

TEST_F(FakeWorker, StoppingPastTheGraceCancelsTheCallInFlight) {
  script_->locked([&] { return script_->gate_closed = true; });
  start(settings(SandboxMode::kPerTool), /*concurrency=*/2, /*grace=*/0ms);
  const int64_t id = enqueue("r1", {"wait"});
  ASSERT_TRUE(script_->wait_until([&] { return script_->execs_running == 1; }));
  worker_->stop();  // no grace: its sandbox is destroyed under the call
  Ended e = wait(id);
  EXPECT_EQ(e.view.state, store::CallState::failed);
  const std::string sandbox = script_->locked([&] { return script_->created_ids.at(0); });
  EXPECT_EQ(e.view.error,
            "cancelled: the worker stopped and the grace period passed "
            "(sandbox ended: fake sandbox " +
                sandbox + " was destroyed)");
  EXPECT_EQ(script_->locked([&] { return script_->destroyed; }), 1);
}

}  // namespace
}  // namespace rf::testing
