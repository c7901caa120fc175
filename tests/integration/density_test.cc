// Density (issue 10): one worker holds a thousand live per_run sandboxes, each
// call answered, at a bounded number of worker fds per sandbox; when the runs
// end, nothing is left. A worker used to fail at ~340: the sandbox child
// lowered RLIMIT_NOFILE while it still held the worker's inherited fds.
// Its own binary, run alone (RUN_SERIAL): a thousand sandboxes load CI's two cores.
#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <set>
#include <thread>

#include "cli/backends.h"
#include "core/io.h"
#include "host/cgroup.h"
#include "integration/harness.h"
#include "worker/worker.h"

namespace rf::testing {
namespace {

using namespace std::chrono_literals;

constexpr int kRuns = 1000;
constexpr int kClients = 8;
// The worker's fds per live native sandbox: its protocol socket, its pidfd,
// its uid-slot lock.
constexpr int kFdsPerSandbox = 3;

int count_fds() {
  int n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  while (const dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
  ::closedir(d);
  return n - 1;  // the directory being read
}

// The worker's sandboxes' PID 1s still there, zombies included: children of
// this process that are PID 1 of their own PID namespace.
int runner_children() {
  const std::string self = std::to_string(::getpid());
  int n = 0;
  DIR* d = ::opendir("/proc");
  while (const dirent* e = ::readdir(d)) {
    if (std::atoi(e->d_name) <= 0) continue;
    auto status = read_file(std::string("/proc/") + e->d_name + "/status");
    if (!status) continue;
    const auto ppid = status->find("\nPPid:\t"), nspid = status->find("\nNSpid:");
    if (ppid == std::string::npos || nspid == std::string::npos) continue;
    const std::string parent = status->substr(ppid + 7, status->find('\n', ppid + 1) - ppid - 7);
    const std::string ns = status->substr(nspid, status->find('\n', nspid + 1) - nspid);
    n += parent == self && ns.ends_with("\t1");
  }
  ::closedir(d);
  return n;
}

// Directories of these sandboxes' cgroups that exist, in every hierarchy.
int cgroup_dirs_of(const std::vector<std::string>& ids) {
  auto layout = host::detect_cgroup_layout();
  EXPECT_TRUE(layout.ok());
  if (!layout.ok()) return -1;
  std::vector<std::string> roots;
  if (layout->version == host::CgroupVersion::kV2) {
    roots.push_back(layout->v2_root);
  } else {
    for (const auto& [_, mount] : layout->v1_mounts) roots.push_back(mount);
  }
  int n = 0;
  for (const auto& id : ids) {
    for (const auto& root : roots) n += ::access((root + "/ringfence/" + id).c_str(), F_OK) == 0;
  }
  return n;
}

class DensityTest : public SandboxTest {
 protected:
  void SetUp() override {
    SandboxTest::SetUp();
    if (IsSkipped()) return;
    ::setenv("RINGFENCE_TOOL_RUNNER", RF_RUNNER_PATH, 1);
    // The worker raises its soft limit to the hard one; a CI runner's hard
    // limit may be low, and the test runs as root.
    rlimit rl{};
    ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_max < 8192) {
      rl.rlim_max = 8192;
      ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &rl), 0);
    }
    char tmpl[] = "/tmp/rf-density-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    state_ = tmpl;
  }
  void TearDown() override {
    worker_.reset();
    if (!state_.empty()) std::system(("rm -rf " + state_).c_str());
  }

  std::string state_;
  std::unique_ptr<worker::Worker> worker_;
};

TEST_F(DensityTest, OneWorkerHoldsAThousandLivePerRunSandboxesThenCleansEveryOne) {
  ASSERT_EQ(runner_children(), 0);
  auto s = worker::default_settings("/nonexistent-home");
  s.state_dir.value = state_;
  s.mode.value = worker::SandboxMode::kPerRun;
  s.project.value = "acme";
  s.pool_target.value = 0;  // every sandbox belongs to a run
  s.idle_timeout.value = 1h;
  auto placement = cli::place_worker(s);
  ASSERT_TRUE(placement.ok()) << placement.error().to_string();
  ASSERT_EQ(placement->backend->name(), "native");
  worker::WorkerOptions o;
  o.settings = s;
  o.concurrency = kClients;
  auto w = worker::Worker::start(std::move(o), std::move(*placement));
  ASSERT_TRUE(w.ok()) << w.error().to_string();
  worker_ = std::move(*w);
  auto st = store::Store::open(worker::store_path(state_));
  ASSERT_TRUE(st.ok());
  ASSERT_TRUE((*st)->ensure_project("acme", store::Environment::development).ok());
  // The clients' connections are opened (and used once) before the worker's fds
  // are counted and kept open until the end: SQLite keeps a closed
  // connection's fds open while another holds locks on the same file.
  std::vector<std::unique_ptr<store::Store>> stores;
  for (int c = 0; c < kClients; ++c) {
    auto client = store::Store::open(worker::store_path(state_));
    ASSERT_TRUE(client.ok());
    ASSERT_TRUE((*client)->live_sandboxes().ok());
    stores.push_back(std::move(*client));
  }
  const int fds_before = count_fds();

  // One call per run, each run its own sandbox, all of them kept.
  std::atomic<int> next{0};
  std::vector<std::string> outcome(kRuns);
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, client = stores[c].get()] {
      for (int i; (i = next++) < kRuns;) {
        store::NewCall call;
        call.project = "acme";
        call.run = "run-" + std::to_string(i);
        call.argv = {"/bin/echo", "answer-" + std::to_string(i)};
        auto id = client->enqueue_call(call);
        if (!id.ok()) {
          outcome[i] = "enqueue: " + id.error().to_string();
          continue;
        }
        const auto end = std::chrono::steady_clock::now() + 60s;
        std::optional<store::CallView> view;
        while (std::chrono::steady_clock::now() < end) {
          const uint32_t seen = client->call_version(*id);
          auto v = client->call(*id);
          if (v.ok() && v->state != store::CallState::queued &&
              v->state != store::CallState::running) {
            view = *v;
            break;
          }
          client->wait_for_call(*id, seen, 200ms);
        }
        std::string out;
        if (auto chunks = client->output(*id); chunks.ok()) {
          for (const auto& chunk : *chunks) out += chunk.data;
        }
        if (!view) {
          outcome[i] = "no end within 60s";
        } else if (view->state != store::CallState::done) {
          outcome[i] = "ended " + std::string(store::to_string(view->state)) + ": " +
                       view->error.value_or("");
        } else {
          outcome[i] = "exit " + std::to_string(view->exit_code.value_or(-1)) + " " + out;
        }
      }
    });
  }
  for (auto& t : clients) t.join();
  int wrong = 0;
  for (int i = 0; i < kRuns; ++i) {
    const std::string want = "exit 0 answer-" + std::to_string(i) + "\n";
    if (outcome[i] != want && wrong++ < 5) ADD_FAILURE() << "run-" << i << ": " << outcome[i];
  }
  ASSERT_EQ(wrong, 0);

  // A thousand live sandboxes: a runner each, a cgroup each, few fds each.
  EXPECT_EQ(worker_->router().live_runs().size(), static_cast<size_t>(kRuns));
  std::vector<std::string> ids;
  const auto listed_by = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < listed_by) {
    auto rows = (*st)->live_sandboxes();
    ASSERT_TRUE(rows.ok());
    ids.clear();
    for (const auto& r : *rows) ids.push_back(r.id);
    if (ids.size() == static_cast<size_t>(kRuns)) break;
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_EQ(ids.size(), static_cast<size_t>(kRuns));
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), ids.size());
  EXPECT_EQ(runner_children(), kRuns);
  EXPECT_GE(cgroup_dirs_of(ids), kRuns);
  const int fds_live = count_fds();
  EXPECT_LE(fds_live - fds_before, kFdsPerSandbox * kRuns + 1)  // + the janitor's pipe
      << (fds_live - fds_before) << " more fds for " << kRuns << " sandboxes";

  // The runs end: every sandbox goes, and every trace of it.
  for (int i = 0; i < kRuns; ++i) ASSERT_TRUE((*st)->end_run("run-" + std::to_string(i)).ok());
  const auto gone_by = std::chrono::steady_clock::now() + 120s;
  // The router forgets a run before its sandbox's destroy has reaped the
  // runner: wait for both.
  while ((!worker_->router().live_runs().empty() || runner_children() != 0) &&
         std::chrono::steady_clock::now() < gone_by)
    std::this_thread::sleep_for(100ms);
  EXPECT_TRUE(worker_->router().live_runs().empty());
  EXPECT_EQ(runner_children(), 0);
  EXPECT_EQ(cgroup_dirs_of(ids), 0);
  EXPECT_LE(count_fds(), fds_before + 1);  // the janitor's pipe stays
  const auto recorded_by = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < recorded_by) {
    auto rows = (*st)->live_sandboxes();
    if (rows.ok() && rows->empty()) break;
    std::this_thread::sleep_for(50ms);
  }
  auto rows = (*st)->live_sandboxes();
  ASSERT_TRUE(rows.ok());
  EXPECT_TRUE(rows->empty()) << rows->size() << " sandboxes still recorded live";
}

}  // namespace
}  // namespace rf::testing
