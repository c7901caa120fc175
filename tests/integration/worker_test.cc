// The worker against real sandboxes: modes, tenant separation, concurrency,
// crash safety, drain, fallback.
#include "worker/worker.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <signal.h>
#include <sys/wait.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "cli/backends.h"
#include "integration/harness.h"

namespace rf::testing {
namespace {

using namespace std::chrono_literals;

class WorkerTest : public SandboxTest {
 protected:
  void SetUp() override {
    SandboxTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    // The worker finds the runner next to its binary; this test binary lives elsewhere.
    ::setenv("RINGFENCE_TOOL_RUNNER", RF_RUNNER_PATH, 1);
    char tmpl[] = "/tmp/rf-worker-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    state_ = tmpl;
  }
  void TearDown() override {
    worker_.reset();
    if (!state_.empty()) std::system(("rm -rf " + state_).c_str());
  }
  worker::WorkerSettings settings(worker::SandboxMode mode) {
    auto s = worker::default_settings("/nonexistent-home");
    s.state_dir.value = state_;
    s.mode.value = mode;
    s.project.value = "acme";
    s.pool_target.value = 1;
    s.pool_max.value = 2;
    return s;
  }
  void start(worker::SandboxMode mode) {
    auto placement = cli::place_worker(settings(mode));
    ASSERT_TRUE(placement.ok()) << placement.error().to_string();
    worker::WorkerOptions o;
    o.settings = settings(mode);
    o.concurrency = 4;
    o.unserved_after = 500ms;
    auto w = worker::Worker::start(std::move(o), std::move(*placement));
    ASSERT_TRUE(w.ok()) << w.error().to_string();
    worker_ = std::move(*w);
  }
  std::unique_ptr<store::Store> client() {
    auto s = store::Store::open(worker::store_path(state_));
    EXPECT_TRUE(s.ok()) << s.error().to_string();
    return std::move(*s);
  }
  struct Done {
    store::CallView view;
    std::string out;
    nlohmann::json result;
  };
  // Enqueues a call and waits for its end, as `ringfence call` does.
  static Done call(store::Store& s, const std::string& project, const std::string& run,
                   std::vector<std::string> argv) {
    (void)s.ensure_project(project, store::Environment::development);
    store::NewCall c;
    c.project = project;
    c.run = run;
    c.argv = std::move(argv);
    auto id = s.enqueue_call(c);
    EXPECT_TRUE(id.ok()) << id.error().to_string();
    Done d;
    const auto end = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < end) {
      auto v = s.call(*id);
      if (v && (v->state == store::CallState::done || v->state == store::CallState::failed ||
                v->state == store::CallState::interrupted)) {
        d.view = *v;
        break;
      }
      std::this_thread::sleep_for(5ms);
    }
    if (auto chunks = s.output(*id)) {
      for (const auto& c : *chunks) d.out += c.data;
    }
    if (d.view.result_json) d.result = nlohmann::json::parse(*d.view.result_json);
    return d;
  }
  static Done sh(store::Store& s, const std::string& project, const std::string& run,
                 const std::string& script) {
    return call(s, project, run, {"/bin/sh", "-c", script});
  }

  std::string state_;
  std::unique_ptr<worker::Worker> worker_;
};

TEST_F(WorkerTest, PerRunReusesTheRunsSandboxAndSeparatesRuns) {
  start(worker::SandboxMode::kPerRun);
  auto s = client();
  Done a = sh(*s, "acme", "r1", "echo one > /workspace/f; hostname");
  ASSERT_EQ(a.view.state, store::CallState::done) << a.view.error.value_or("");
  Done b = sh(*s, "acme", "r1", "cat /workspace/f; hostname");
  EXPECT_EQ(b.out, "one\n" + a.out);  // same sandbox: same file, same hostname
  EXPECT_EQ(b.result["sandbox_id"], a.result["sandbox_id"]);
  EXPECT_EQ(b.result["mode"], "per_run");
  Done c = sh(*s, "acme", "r2", "ls /workspace; hostname");
  EXPECT_NE(c.result["sandbox_id"], a.result["sandbox_id"]);
  EXPECT_EQ(c.out, c.result["sandbox_id"].get<std::string>() + "\n");  // empty workspace
  Done d = sh(*s, "other", "r3", "ls /workspace");
  EXPECT_NE(d.result["sandbox_id"], a.result["sandbox_id"]);
  EXPECT_EQ(d.out, "");
  // Ending the run removes its sandbox.
  ASSERT_TRUE(s->end_run("r1").ok());
  const auto end = std::chrono::steady_clock::now() + 15s;
  auto live = [&] {
    auto r = worker_->router().live_runs();
    return std::count(r.begin(), r.end(), "r1");
  };
  while (live() && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(50ms);
  EXPECT_EQ(live(), 0);
}

// `sandbox list --state-dir` joins the store's rows: the worker writes each
// sandbox it binds, with project, run and mode, and marks it destroyed.
TEST_F(WorkerTest, RecordsItsSandboxesInTheStore) {
  start(worker::SandboxMode::kPerRun);
  auto s = client();
  Done a = sh(*s, "acme", "r1", "true");
  ASSERT_EQ(a.view.state, store::CallState::done);
  const std::string id = a.result["sandbox_id"];
  auto row_of = [&]() -> std::optional<store::SandboxRow> {
    auto rows = s->live_sandboxes();
    for (const auto& r : *rows) {
      if (r.id == id) return r;
    }
    return std::nullopt;
  };
  const auto end = std::chrono::steady_clock::now() + 10s;
  while (!row_of() && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(20ms);
  auto row = row_of();
  ASSERT_TRUE(row);
  EXPECT_EQ(row->backend, "native");
  EXPECT_EQ(row->project_id, "acme");
  EXPECT_EQ(row->run_id, "r1");
  EXPECT_EQ(row->mode, "per_run");
  EXPECT_EQ(row->worker_id, worker_->id());
  EXPECT_GT(row->host_pid.value_or(0), 0);
  ASSERT_TRUE(s->end_run("r1").ok());
  while (row_of() && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(row_of());
  // A per_run sandbox still live when the worker stops is marked destroyed too.
  Done b = sh(*s, "acme", "r2", "true");
  worker_->stop();
  auto rows = s->live_sandboxes();
  ASSERT_TRUE(rows.ok());
  EXPECT_TRUE(rows->empty()) << rows->front().id;
}

TEST_F(WorkerTest, PerToolGivesEveryCallAFreshSandbox) {
  start(worker::SandboxMode::kPerTool);
  auto s = client();
  Done a = sh(*s, "acme", "r1", "echo x > /workspace/f");
  Done b = sh(*s, "acme", "r1", "ls /workspace");
  EXPECT_EQ(b.view.state, store::CallState::done);
  EXPECT_EQ(b.out, "");
  EXPECT_NE(a.result["sandbox_id"], b.result["sandbox_id"]);
}

// Output is held back and written in batches (call_output.h): order and
// streams must survive, and a long call must still stream before it ends.
TEST_F(WorkerTest, BatchedOutputKeepsOrderAndStreamsWhileTheCallRuns) {
  start(worker::SandboxMode::kPerRun);
  auto s = client();
  Done many = sh(*s, "acme", "r1",
                 "i=0; while [ $i -lt 3000 ]; do echo $i; echo e$i >&2; i=$((i+1)); done");
  ASSERT_EQ(many.view.state, store::CallState::done) << many.view.error.value_or("");
  std::string want_out, want_err, got_out, got_err;
  for (int i = 0; i < 3000; ++i) {
    want_out += std::to_string(i) + "\n";
    want_err += "e" + std::to_string(i) + "\n";
  }
  auto chunks = s->output(many.view.id, 0, 1'000'000);
  ASSERT_TRUE(chunks.ok());
  for (const auto& c : *chunks) (c.stream == store::Stream::out ? got_out : got_err) += c.data;
  EXPECT_EQ(got_out, want_out);
  EXPECT_EQ(got_err, want_err);

  // "first" reaches the store while the call still sleeps.
  (void)s->ensure_project("acme", store::Environment::development);
  store::NewCall c;
  c.project = "acme";
  c.run = "r1";
  c.argv = {"/bin/sh", "-c", "echo first; sleep 3; echo second"};
  auto id = s->enqueue_call(c);
  ASSERT_TRUE(id.ok());
  std::string seen;
  store::CallState state_when_seen = store::CallState::queued;
  const auto end = std::chrono::steady_clock::now() + 20s;
  while (seen.empty() && std::chrono::steady_clock::now() < end) {
    const uint32_t v = s->call_version(*id);
    state_when_seen = s->call(*id)->state;
    auto out = s->output(*id);
    ASSERT_TRUE(out.ok());
    for (const auto& chunk : *out) seen += chunk.data;
    if (seen.empty()) s->wait_for_call(*id, v, 1s);
  }
  EXPECT_EQ(seen, "first\n");
  EXPECT_EQ(state_when_seen, store::CallState::running);
  // Stopping drains: the call in flight ends on its own, within the grace period.
  worker_->stop();
  EXPECT_EQ(s->call(*id)->state, store::CallState::done) << s->call(*id)->error.value_or("");
  auto all = s->output(*id);
  ASSERT_TRUE(all.ok());
  std::string text;
  for (const auto& chunk : *all) text += chunk.data;
  EXPECT_EQ(text, "first\nsecond\n");
}

TEST_F(WorkerTest, ModeNoneRunsInAScratchDirWithAScrubbedEnvironment) {
  ::setenv("HOST_SECRET", "hunter2", 1);
  start(worker::SandboxMode::kNone);
  auto s = client();
  Done a = sh(*s, "acme", "r1", "echo ${HOST_SECRET:-scrubbed}; pwd");
  EXPECT_EQ(a.result["backend"], "local");
  EXPECT_EQ(a.out.substr(0, 9), "scrubbed\n");
  EXPECT_NE(a.out.find("/ringfence-local/"), std::string::npos) << a.out;
  ::unsetenv("HOST_SECRET");
}

TEST_F(WorkerTest, PerWorkerServesOnlyItsProject) {
  start(worker::SandboxMode::kPerWorker);
  auto lease = worker_->router().acquire("intruder", "r9");
  ASSERT_FALSE(lease.ok());
  EXPECT_EQ(lease.error().to_string(),
            "project intruder: this worker is per_worker for project acme and serves no other");
  auto s = client();
  Done a = sh(*s, "acme", "r1", "hostname");
  Done b = sh(*s, "acme", "r2", "hostname");
  EXPECT_EQ(a.out, b.out);  // one long-lived sandbox
  // A call of another project that no worker takes fails with a clear error
  // (after unserved_after, 5 s by default), rather than waiting forever; it never ran.
  Done c = sh(*s, "intruder", "r9", "echo ran");
  EXPECT_EQ(c.view.state, store::CallState::failed);
  EXPECT_EQ(c.view.error, "project intruder: no worker took this call; worker " + worker_->id() +
                              " is per_worker for project acme and serves no other");
  EXPECT_EQ(c.out, "");
  EXPECT_FALSE(c.view.claimed_at.has_value());
}

TEST_F(WorkerTest, TwoHundredCallsFromSixteenClientsNoneLostNoneTwice) {
  start(worker::SandboxMode::kPerRun);
  std::vector<std::thread> clients;
  std::mutex mu;
  std::multiset<std::string> outputs;
  int failures = 0;
  for (int c = 0; c < 16; ++c) {
    clients.emplace_back([&, c] {
      auto s = client();
      for (int i = 0; i < 200 / 16 + (c < 200 % 16 ? 1 : 0); ++i) {
        const std::string tag = std::to_string(c) + "-" + std::to_string(i);
        Done d = call(*s, "acme", "run-" + std::to_string(c % 4), {"echo", tag});
        std::lock_guard l(mu);
        if (d.view.state != store::CallState::done) ++failures;
        outputs.insert(d.out);
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(outputs.size(), 200u);
  for (int c = 0; c < 16; ++c) {
    for (int i = 0; i < 200 / 16 + (c < 200 % 16 ? 1 : 0); ++i) {
      EXPECT_EQ(outputs.count(std::to_string(c) + "-" + std::to_string(i) + "\n"), 1u);
    }
  }
}

TEST_F(WorkerTest, ProductionRefusesToFallBackInMode) {
  auto s = settings(worker::SandboxMode::kPerRun);
  // No daemon there: an unhealthy backend, for real.
  s.backend.value = BackendKind::kDocker;
  s.docker_host.value = "unix:///nonexistent/docker.sock";
  s.project_environment.value = worker::ProjectEnvironment::kProduction;
  auto p = cli::place_worker(s);
  ASSERT_FALSE(p.ok());
  const std::string e = p.error().to_string();
  EXPECT_EQ(e.rfind("worker: refusing to start: backend docker is unhealthy: docker backend: "
                    "docker unix:///nonexistent/docker.sock: ",
                    0),
            0u)
      << e;
  EXPECT_TRUE(e.ends_with("; production projects never fall back to a weaker sandbox mode")) << e;
}

TEST_F(WorkerTest, NonProductionFallsBackLoudlyOneModeAtATime) {
  auto s = settings(worker::SandboxMode::kPerWorker);
  s.backend.value = BackendKind::kDocker;
  s.project_environment.value = worker::ProjectEnvironment::kStaging;
  auto p = cli::place_worker(s);
  ASSERT_TRUE(p.ok()) << p.error().to_string();
  EXPECT_EQ(p->mode, worker::SandboxMode::kNone);
  EXPECT_EQ(p->backend->name(), "local");
  ASSERT_EQ(p->warnings.size(), 4u);
  EXPECT_EQ(p->warnings[1].rfind(
                "falling back from sandbox mode per_worker to per_run: backend docker", 0),
            0u);
  EXPECT_EQ(p->warnings[3].rfind("falling back from sandbox mode per_tool to none: ", 0), 0u);
  // A healthy fallback backend keeps the mode.
  s.fallback_backends.value = {BackendKind::kNative};
  auto kept = cli::place_worker(s);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->mode, worker::SandboxMode::kPerWorker);
  EXPECT_EQ(kept->backend->name(), "native");
}

TEST_F(WorkerTest, TheLocalBackendNeverServesAnIsolatingMode) {
  auto s = settings(worker::SandboxMode::kPerRun);
  s.backend.value = BackendKind::kLocal;
  s.project_environment.value = worker::ProjectEnvironment::kProduction;
  auto p = cli::place_worker(s);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().to_string(),
            "worker: refusing to start: backend local is unhealthy: it has no isolation and serves "
            "only sandbox "
            "mode none; production projects never fall back to a weaker sandbox mode");
  s.backend.value = BackendKind::kDocker;
  s.fallback_backends.value = {BackendKind::kLocal};
  s.project_environment.value = worker::ProjectEnvironment::kStaging;
  auto staged = cli::place_worker(s);
  ASSERT_TRUE(staged.ok());
  EXPECT_EQ(staged->mode, worker::SandboxMode::kNone);  // said loudly, step by step
  EXPECT_EQ(staged->warnings[1],
            "backend local is unhealthy: it has no isolation and serves only sandbox mode none");
}

// The CLI worker, killed -9 mid-call, then restarted: the call is interrupted
// (never re-run) and the orphaned sandbox is gone.
TEST_F(WorkerTest, KillNineMidCallThenRestartInterruptsAndReaps) {
  auto spawn_worker = [&] {
    const pid_t pid = fork();
    if (pid == 0) {
      const int devnull = ::open("/dev/null", O_RDWR);
      dup2(devnull, 1);
      dup2(devnull, 2);
      execl(RF_CLI_PATH, RF_CLI_PATH, "worker", "start", "--sandbox-mode", "per_run", "--state-dir",
            state_.c_str(), nullptr);
      _exit(99);
    }
    return pid;
  };
  const pid_t first = spawn_worker();
  auto s = client();
  ASSERT_TRUE(s->ensure_project("acme", store::Environment::development).ok());
  store::NewCall c;
  c.project = "acme";
  c.run = "r1";
  c.argv = {"sleep", "30"};
  auto id = s->enqueue_call(c);
  ASSERT_TRUE(id.ok());
  const auto end = std::chrono::steady_clock::now() + 10s;
  while (s->call(*id)->state != store::CallState::running &&
         std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_EQ(s->call(*id)->state, store::CallState::running);
  // The worker holds secret values and the sealing key: it leaves no core file.
  {
    std::ifstream limits("/proc/" + std::to_string(first) + "/limits");
    std::string line, core;
    while (std::getline(limits, line))
      if (line.starts_with("Max core file size")) core = line;
    EXPECT_THAT(core, ::testing::MatchesRegex("Max core file size +0 +0 +bytes *")) << core;
  }
  auto live_runs = [&] {
    std::set<std::string> runs;
    auto rows = s->live_sandboxes();
    if (rows.ok()) {
      for (const auto& r : *rows) runs.insert(r.run_id.value_or("-"));
    }
    return runs;
  };
  while (!live_runs().count("r1") && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(live_runs().count("r1"));  // recorded by the first worker
  ::kill(first, SIGKILL);
  ::waitpid(first, nullptr, 0);
  const pid_t second = spawn_worker();
  const auto end2 = std::chrono::steady_clock::now() + 10s;
  while (s->call(*id)->state == store::CallState::running &&
         std::chrono::steady_clock::now() < end2) {
    std::this_thread::sleep_for(20ms);
  }
  auto v = s->call(*id);
  EXPECT_EQ(v->state, store::CallState::interrupted);
  EXPECT_NE(v->error.value_or("").find("worker"), std::string::npos) << v->error.value_or("");
  // The restarted worker serves new calls.
  Done d = sh(*s, "acme", "r2", "echo after");
  EXPECT_EQ(d.out, "after\n");
  EXPECT_FALSE(live_runs().count("r1"));  // reaped at the restart, and marked so
  ::kill(second, SIGTERM);
  int status = 0;
  ::waitpid(second, &status, 0);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(live_runs().empty());
}

TEST_F(WorkerTest, SigtermLetsInFlightCallsFinishWithinGrace) {
  const pid_t pid = fork();
  if (pid == 0) {
    const int devnull = ::open("/dev/null", O_RDWR);
    dup2(devnull, 1);
    dup2(devnull, 2);
    execl(RF_CLI_PATH, RF_CLI_PATH, "worker", "start", "--sandbox-mode", "per_tool", "--state-dir",
          state_.c_str(), "--grace", "10s", nullptr);
    _exit(99);
  }
  auto s = client();
  ASSERT_TRUE(s->ensure_project("acme", store::Environment::development).ok());
  store::NewCall c;
  c.project = "acme";
  c.run = "r1";
  c.argv = {"/bin/sh", "-c", "sleep 1; echo finished"};
  auto id = s->enqueue_call(c);
  const auto end = std::chrono::steady_clock::now() + 10s;
  while (s->call(*id)->state != store::CallState::running &&
         std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(10ms);
  }
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  auto v = s->call(*id);
  EXPECT_EQ(v->state, store::CallState::done);
  auto chunks = s->output(*id);
  ASSERT_TRUE(chunks.ok());
  ASSERT_FALSE(chunks->empty());
  EXPECT_EQ(chunks->back().data, "finished\n");
}

}  // namespace
}  // namespace rf::testing
