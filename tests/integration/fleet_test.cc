// A fleet (issue 16): real `worker start` processes, each with a host id,
// labels and a state dir of its own, sharing a PostgreSQL cluster the test
// starts in a network namespace of the test's own. One worker runs in
// another, reaching the cluster over a veth pair on addresses the test
// assigns (as a worker on another host would, over TCP); the others over
// the unix socket. Calls and
// a workflow are routed by label, `fleet status` shows the workers, work no
// live worker may take fails naming what each lacks, and a worker killed
// with SIGKILL mid-call loses nothing: its call is interrupted once its lease
// runs out, never run twice, while the others keep serving.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "store/migrations.h"
#include "store/store.h"
#include "store/workflow_store.h"
#include "support/cli_process.h"
#include "support/postgres_server.h"

namespace rf::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

// Two network namespaces and a veth pair between them, made (and removed)
// by the test: the cluster's (10.213.0.1/24 on its end) and a worker's
// (10.213.0.2/24), as a worker on another host reaches the store over TCP.
// Nothing of it stays in the host's namespace (the pair is only made
// there), so tests running at once each have the same addresses in their
// own namespaces, and a test killed midway leaves no address or route on
// the host.
class VethNamespace {
 public:
  VethNamespace() {
    const std::string id = std::to_string(::getpid());
    name_ = "rf-fleet-" + id;
    server_ns_ = "rf-fleet-db-" + id;
    const std::string server_if = "rfh" + id, worker_if = "rfn" + id;
    for (const std::string& cmd : {
             "ip netns add " + name_,
             "ip netns add " + server_ns_,
             "ip link add " + server_if + " type veth peer name " + worker_if,
             "ip link set " + server_if + " netns " + server_ns_,
             "ip link set " + worker_if + " netns " + name_,
             "ip -n " + server_ns_ + " addr add " + server_addr_ + "/24 dev " + server_if,
             "ip -n " + server_ns_ + " link set " + server_if + " up",
             "ip -n " + server_ns_ + " link set lo up",
             "ip -n " + name_ + " addr add 10.213.0.2/24 dev " + worker_if,
             "ip -n " + name_ + " link set " + worker_if + " up",
             "ip -n " + name_ + " link set lo up",
         }) {
      std::string said;
      FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
      if (p == nullptr) {
        error_ = cmd + ": popen failed";
        return;
      }
      char buf[256];
      while (std::fgets(buf, sizeof buf, p) != nullptr) said += buf;
      if (::pclose(p) != 0) {
        error_ = cmd + " failed: " + said;
        return;
      }
    }
  }
  ~VethNamespace() {
    // The pair goes with its namespaces.
    (void)std::system(("ip netns del " + name_ + " 2>/dev/null").c_str());
    (void)std::system(("ip netns del " + server_ns_ + " 2>/dev/null").c_str());
  }
  const std::string& error() const { return error_; }
  // The worker's namespace.
  const std::string& name() const { return name_; }
  // The cluster's namespace, and its address there.
  const std::string& server_ns() const { return server_ns_; }
  const std::string& server_addr() const { return server_addr_; }

 private:
  std::string name_, server_ns_, server_addr_ = "10.213.0.1", error_;
};

class Fleet : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(veth_.error().empty()) << veth_.error();
    ASSERT_TRUE(pg_.ok()) << pg_.error();
    char tmpl[] = "/tmp/rf-fleet-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    auto s = store::Store::open(pg_.uri());
    ASSERT_TRUE(s.ok()) << s.error().to_string();
    store_ = std::move(*s);
  }
  void TearDown() override {
    for (auto& [id, w] : workers_) {
      w->signal(SIGTERM);
      w->wait(20s);
    }
    workers_.clear();
    std::filesystem::remove_all(dir_);
  }

  // A worker of host `id` with `labels`, on the unix socket or (netns) over
  // the veth pair; returns once it is registered.
  void start_worker(const std::string& id, const std::vector<std::string>& labels,
                    bool in_netns = false, const std::string& lease = "10s") {
    const std::string store = in_netns ? pg_.tcp_uri(veth_.server_addr()) : pg_.uri();
    std::vector<std::string> args = {
        "worker",         "start",     "--store", store,         "--state-dir",
        dir_ + "/" + id,  "--host-id", id,        "--worker-id", id,
        "--sandbox-mode", "per_run",   "--lease", lease};
    for (const auto& l : labels) args.insert(args.end(), {"--label", l});
    workers_[id] = std::make_unique<Cli>(args, std::nullopt, std::vector<std::string>{},
                                         in_netns ? veth_.name() : "");
    const auto end = Clock::now() + 30s;
    while (Clock::now() < end) {
      auto rows = store_->workers();
      if (rows) {
        for (const auto& w : *rows)  // this process's registration, not a dead one's row
          if (w.id == id && w.pid == workers_[id]->pid() && w.state == store::WorkerState::running)
            return;
      }
      std::this_thread::sleep_for(20ms);
    }
    FAIL() << "worker " << id << " never registered: " << workers_[id]->err();
  }
  Cli call(const std::string& run, const std::vector<std::string>& require,
           const std::vector<std::string>& command, const std::vector<std::string>& flags = {}) {
    std::vector<std::string> args = {
        "call", "--store", pg_.uri(), "--state-dir", dir_ + "/c", "--project", "p", "--run", run};
    for (const auto& r : require) args.insert(args.end(), {"--require", r});
    args.insert(args.end(), flags.begin(), flags.end());
    args.push_back("--");
    args.insert(args.end(), command.begin(), command.end());
    return Cli(args);
  }
  // Who ran the run's only call.
  std::string worker_of(const std::string& run) {
    auto r = store_->run(run);
    if (!r || r->calls.size() != 1) return "?";
    return r->calls[0].worker_id.value_or("none");
  }

  VethNamespace veth_;  // before the cluster: it runs in one of its namespaces
  PostgresServer pg_{veth_.server_addr(), veth_.server_ns()};
  std::string dir_;
  std::unique_ptr<store::Store> store_;
  std::map<std::string, std::unique_ptr<Cli>> workers_;
};

TEST_F(Fleet, CallsAndAWorkflowAreRoutedByLabelAndFleetStatusShowsTheWorkers) {
  start_worker("gpu-host", {"gpu=true", "zone=b"}, /*in_netns=*/true);
  start_worker("a-host", {"zone=a"});
  start_worker("b-host", {"zone=b"});

  Cli a = call("r-a", {"zone=a"}, {"echo", "on a"});
  Cli gpu = call("r-gpu", {"gpu=true"}, {"sh", "-c", "echo on gpu"});
  Cli both = call("r-both", {"gpu=true", "zone=b"}, {"echo", "on gpu too"});
  EXPECT_EQ(a.wait(), 0) << a.err();
  EXPECT_EQ(a.out(), "on a\n");
  EXPECT_EQ(gpu.wait(), 0) << gpu.err();
  EXPECT_EQ(gpu.out(), "on gpu\n");
  EXPECT_EQ(both.wait(), 0) << both.err();
  EXPECT_EQ(worker_of("r-a"), "a-host");
  EXPECT_EQ(worker_of("r-gpu"), "gpu-host");  // the one in the netns, over TCP
  EXPECT_EQ(worker_of("r-both"), "gpu-host");
  for (int i = 0; i < 6; ++i) {  // zone=b: either of the two that have it, never a-host
    Cli b = call("r-b" + std::to_string(i), {"zone=b"}, {"true"});
    EXPECT_EQ(b.wait(), 0) << b.err();
    EXPECT_NE(worker_of("r-b" + std::to_string(i)), "a-host");
  }

  // No live worker has zone=c: the call fails within seconds, naming what each lacks.
  const auto asked = Clock::now();
  Cli nowhere = call("r-c", {"zone=c", "gpu=true"}, {"echo", "never"});
  EXPECT_EQ(nowhere.wait(40s), 125) << nowhere.err();
  EXPECT_LT(Clock::now() - asked, 15s);
  EXPECT_THAT(nowhere.err(),
              HasSubstr("no live worker has the labels this call requires (gpu=true zone=c): "));
  // Truthfully (issue 40): a label a worker has with another value is named so.
  EXPECT_THAT(nowhere.err(),
              HasSubstr("worker a-host (host a-host) lacks gpu=true, has zone=a (not zone=c)"));
  EXPECT_THAT(nowhere.err(), HasSubstr("worker gpu-host (host gpu-host) has zone=b (not zone=c)"));
  EXPECT_EQ(nowhere.out(), "");

  // A workflow whose steps need different workers: each runs where it may.
  const std::string wf = dir_ + "/routed.yaml";
  std::ofstream(wf) << R"(name: routed
steps:
  - id: prepare
    mode: sandboxed
    requires: {labels: {zone: a}}
    run: "echo prepared"
  - id: train
    needs: [prepare]
    mode: sandboxed
    requires: {labels: {gpu: "true"}}
    run: "echo trained"
  - id: report
    needs: [train]
    mode: in_process
    kind: template
    template: "{{steps.prepare.output}}+{{steps.train.output}}"
)";
  Cli run({"workflow", "run", wf, "--state-dir", dir_ + "/c", "--project", "p", "--run-id",
           "wr-routed", "--follow"},
          std::nullopt, {"RINGFENCE_STORE=" + pg_.uri()});
  EXPECT_EQ(run.wait(90s), 0) << run.out() << run.err();
  store::WorkflowStore wfs(*store_);
  auto attempts = wfs.attempts("wr-routed");
  ASSERT_TRUE(attempts.ok()) << attempts.error().to_string();
  std::map<std::string, std::string> ran_on;
  for (const auto& at : *attempts) {
    if (at.state == store::AttemptState::succeeded) ran_on[at.step_id] = at.worker_id.value_or("");
  }
  EXPECT_EQ(ran_on["prepare"], "a-host");
  EXPECT_EQ(ran_on["train"], "gpu-host");
  auto done = wfs.run("wr-routed");
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->state, store::WorkflowRunState::succeeded) << done->error.value_or("");

  // fleet status: all three, live, with their labels and hosts.
  Cli status({"fleet", "status", "--json", "--store", pg_.uri()});
  ASSERT_EQ(status.wait(), 0) << status.err();
  const json fleet = json::parse(status.out(), nullptr, false);
  ASSERT_TRUE(fleet.is_object()) << status.out();
  EXPECT_EQ(fleet["live_workers"], 3);
  std::map<std::string, json> by_id;
  for (const auto& w : fleet["workers"]) by_id[w["id"].get<std::string>()] = w;
  ASSERT_EQ(by_id.size(), 3u) << status.out();
  EXPECT_EQ(by_id["gpu-host"]["labels"], (json{{"gpu", "true"}, {"zone", "b"}}));
  EXPECT_EQ(by_id["gpu-host"]["host_id"], "gpu-host");
  EXPECT_EQ(by_id["a-host"]["labels"], (json{{"zone", "a"}}));
  EXPECT_EQ(by_id["b-host"]["live"], true);
  EXPECT_LT(by_id["b-host"]["heartbeat_age_ms"].get<int64_t>(), 5000);
  EXPECT_GE(by_id["a-host"]["live_sandboxes"].get<int64_t>(), 0);
  Cli table({"fleet", "status", "--store", pg_.uri()});
  ASSERT_EQ(table.wait(), 0) << table.err();
  EXPECT_THAT(table.out(), HasSubstr("gpu-host"));
  EXPECT_THAT(table.out(), HasSubstr("gpu=true zone=b"));
  EXPECT_THAT(table.out(), HasSubstr("3 live worker(s) in store"));
}

TEST_F(Fleet, AWorkerKilledMidCallLosesNothingAndTheOthersKeepServing) {
  start_worker("doomed", {"role=doomed"}, /*in_netns=*/false, "3s");
  start_worker("steady", {"role=steady"}, /*in_netns=*/true);
  // A call that runs on the doomed worker until it is killed.
  Cli victim =
      call("r-victim", {"role=doomed"}, {"sh", "-c", "echo started; sleep 60; echo never"});
  // It runs once its first line is in the store.
  int64_t victim_id = 0;
  const auto started_by = Clock::now() + 30s;
  while (Clock::now() < started_by && victim_id == 0) {
    auto r = store_->run("r-victim");
    if (r && !r->calls.empty()) {
      auto out = store_->output(r->calls[0].id);
      if (out && !out->empty()) victim_id = r->calls[0].id;
    }
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_NE(victim_id, 0) << "the call never started: " << victim.err();
  workers_["doomed"]->signal(SIGKILL);
  ASSERT_EQ(workers_["doomed"]->wait(10s), 128 + SIGKILL);
  const auto killed_at = Clock::now();
  // Meanwhile the steady worker serves.
  for (int i = 0; i < 5; ++i) {
    Cli c = call("r-steady" + std::to_string(i), {"role=steady"}, {"echo", "still here"});
    EXPECT_EQ(c.wait(), 0) << c.err();
    EXPECT_EQ(c.out(), "still here\n");
  }
  // The victim's client learns of it once the lease (3 s) has run out and a
  // live worker swept it: interrupted, never run twice.
  EXPECT_EQ(victim.wait(30s), 125);
  EXPECT_LT(Clock::now() - killed_at, 10s);
  EXPECT_THAT(victim.err(), HasSubstr("interrupted"));
  auto v = store_->call(victim_id);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->state, store::CallState::interrupted);
  EXPECT_EQ(v->worker_id, "doomed");
  // The output it wrote before dying is kept.
  auto out = store_->output(victim_id);
  ASSERT_TRUE(out.ok());
  std::string text;
  for (const auto& c : *out) text += c.data;
  EXPECT_EQ(text, "started\n");
  // Restarted on the same host, it reaps what the dead one left and serves again.
  start_worker("doomed", {"role=doomed"});
  auto rows = store_->workers();
  ASSERT_TRUE(rows.ok());
  for (const auto& w : *rows)
    if (w.id == "doomed") {
      EXPECT_EQ(w.epoch, 2);
    }
  // Its start forgets (and reaps) the dead one's per_run sandbox.
  auto doomed_sandboxes = [&] {
    auto live = store_->live_sandboxes();
    int n = 0;
    if (live) {
      for (const auto& sb : *live) n += sb.worker_id == std::optional<std::string>("doomed");
    }
    return n;
  };
  const auto reaped_by = Clock::now() + 10s;
  while (doomed_sandboxes() > 0 && Clock::now() < reaped_by) std::this_thread::sleep_for(20ms);
  EXPECT_EQ(doomed_sandboxes(), 0);
  Cli again = call("r-again", {"role=doomed"}, {"echo", "back"});
  EXPECT_EQ(again.wait(), 0) << again.err();
  EXPECT_EQ(again.out(), "back\n");
  EXPECT_EQ(store_->call(victim_id)->state, store::CallState::interrupted);
}

// Issue 40, 1: a worker paused (SIGSTOP) past its lease and replaced by a
// new process under the same id is fenced. Continued, it sees the fence at
// its next heartbeat, stops claiming and exits non-zero by itself; it never
// marks the id stopped nor touches the call its successor runs, which
// finishes, and the successor stays in `fleet status`.
TEST_F(Fleet, APausedWorkerReplacedUnderItsIdExitsFencedAndLeavesItsSuccessorAlone) {
  start_worker("w2", {"role=w2"}, /*in_netns=*/false, "2s");
  Cli first = call("r-first", {"role=w2"}, {"sh", "-c", "echo started; sleep 60"});
  const auto started_by = Clock::now() + 30s;
  bool started = false;
  while (Clock::now() < started_by && !started) {
    auto r = store_->run("r-first");
    if (r && !r->calls.empty()) {
      auto out = store_->output(r->calls[0].id);
      started = out && !out->empty();
    }
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(started) << first.err();
  std::unique_ptr<Cli> paused = std::move(workers_["w2"]);
  paused->signal(SIGSTOP);
  // A new process takes the id over: that, not how long the old one slept
  // (past its lease or not), is what fences it.
  start_worker("w2", {"role=w2"}, /*in_netns=*/false, "2s");
  const pid_t successor = workers_["w2"]->pid();
  Cli second = call("r-second", {"role=w2"}, {"sh", "-c", "echo new; sleep 2; echo done"});
  ASSERT_TRUE(second.stdout_shows("new\n", 30s)) << second.err();
  paused->signal(SIGCONT);
  EXPECT_EQ(paused->wait(30s), 1) << paused->err();
  EXPECT_THAT(paused->err(), HasSubstr("fenced, another process serves as w2 now"));
  EXPECT_EQ(second.wait(30s), 0) << second.err();
  EXPECT_EQ(second.out(), "new\ndone\n");
  // The first call was its old process's: interrupted when the id was taken over.
  EXPECT_EQ(first.wait(30s), 125);
  auto w = store_->worker("w2");
  ASSERT_TRUE(w.ok() && w->has_value());
  EXPECT_EQ((*w)->state, store::WorkerState::running);
  EXPECT_EQ((*w)->pid, successor);
  Cli status({"fleet", "status", "--store", pg_.uri()});
  ASSERT_EQ(status.wait(), 0) << status.err();
  EXPECT_THAT(status.out(), HasSubstr("w2"));
  Cli third = call("r-third", {"role=w2"}, {"echo", "still served"});
  EXPECT_EQ(third.wait(), 0) << third.err();
  EXPECT_EQ(third.out(), "still served\n");
}

// Issue 40, 3: PostgreSQL stopped for longer than the workers' lease while
// two calls run, each finishing during the outage: when it is back, no
// worker sweeps the other's call as "stopped heartbeating" (the store was
// down, not the worker); each call ends done, with its output and exit code.
TEST_F(Fleet, AStoreOutageLongerThanTheLeaseEndsNoCallThatRanThroughIt) {
  start_worker("w1", {"n=1"}, /*in_netns=*/false, "2s");
  start_worker("w2", {"n=2"}, /*in_netns=*/false, "2s");
  const std::vector<std::string> script = {"sh", "-c", "echo begin; sleep 4; echo end; exit 7"};
  Cli one = call("r-o1", {"n=1"}, script);
  Cli two = call("r-o2", {"n=2"}, script);
  ASSERT_TRUE(one.stdout_shows("begin\n", 30s)) << one.err();
  ASSERT_TRUE(two.stdout_shows("begin\n", 30s)) << two.err();
  pg_.stop_server();
  // Three leases: every lease runs out meanwhile (a loaded machine only
  // stretches it), and the calls end during it or just after.
  std::this_thread::sleep_for(6s);
  pg_.start();
  ASSERT_TRUE(pg_.ok()) << pg_.error();
  EXPECT_EQ(one.wait(90s), 7) << one.err();
  EXPECT_EQ(two.wait(90s), 7) << two.err();
  EXPECT_EQ(one.out(), "begin\nend\n");
  EXPECT_EQ(two.out(), "begin\nend\n");
  auto s = store::Store::open(pg_.uri());
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  for (const char* run : {"r-o1", "r-o2"}) {
    auto r = (*s)->run(run);
    ASSERT_TRUE(r.ok() && r->calls.size() == 1u) << run;
    EXPECT_EQ(r->calls[0].state, store::CallState::done)
        << run << ": " << r->calls[0].error.value_or("");
    EXPECT_EQ(r->calls[0].exit_code, 7) << run;
  }
}

// PostgreSQL stopped for 5 s under load: workers and clients reconnect, no
// call is lost or run twice, and output written during the outage is kept
// (each call that ends 0 printed every line once), or the call fails loudly.
TEST_F(Fleet, PostgresStoppedForFiveSecondsUnderLoadLosesAndDuplicatesNothing) {
  start_worker("w1", {});
  start_worker("w2", {}, /*in_netns=*/true);
  const std::string script = "for i in 1 2 3 4 5 6 7 8 9 10; do echo line$i; sleep 0.1; done";
  std::string expected;
  for (int i = 1; i <= 10; ++i) expected += "line" + std::to_string(i) + "\n";
  struct Attempt {
    std::string run;
    int exit_code = -1;
    std::string out, err;
    Clock::time_point started, ended;
  };
  std::mutex mu;
  std::vector<Attempt> attempts;
  const auto stop_clients = Clock::now() + 16s;
  std::vector<std::thread> clients;
  for (int c = 0; c < 6; ++c) {
    clients.emplace_back([&, c] {
      for (int n = 0; Clock::now() < stop_clients; ++n) {
        Attempt a;
        a.run = "r-" + std::to_string(c) + "-" + std::to_string(n);
        a.started = Clock::now();
        Cli cli = call(a.run, {}, {"sh", "-c", script});
        a.exit_code = cli.wait(90s);
        a.ended = Clock::now();
        a.out = cli.out();
        a.err = cli.err();
        if (a.exit_code != 0) std::this_thread::sleep_for(200ms);
        std::lock_guard lock(mu);
        attempts.push_back(std::move(a));
      }
    });
  }
  std::this_thread::sleep_for(4s);
  const auto stopped = Clock::now();
  pg_.stop_server();
  std::this_thread::sleep_for(5s);
  pg_.start();
  ASSERT_TRUE(pg_.ok()) << pg_.error();
  const auto restarted = Clock::now();
  for (auto& t : clients) t.join();

  auto s = store::Store::open(pg_.uri());
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  int through_outage = 0, after = 0;
  for (const Attempt& a : attempts) {
    if (a.exit_code == 0) {
      EXPECT_EQ(a.out, expected) << a.run << ": " << a.err;
      if (a.started < stopped && a.ended > restarted) ++through_outage;
      if (a.started > restarted + 2s) ++after;
    } else {
      EXPECT_FALSE(a.err.empty()) << a.run << " failed without saying why";
      EXPECT_NE(a.exit_code, -1) << a.run << " hung";
    }
    // Never run twice: a run holds at most the one call its client sent, and
    // a call that ended done holds its output exactly once.
    auto r = (*s)->run(a.run);
    if (!r) continue;  // refused before it was queued (the client said so)
    ASSERT_EQ(r->calls.size(), 1u) << a.run;
    const store::CallView& v = r->calls[0];
    if (v.state == store::CallState::done) {
      auto out = (*s)->output(v.id, 0, 10000);
      ASSERT_TRUE(out.ok());
      std::string text;
      for (const auto& chunk : *out) text += chunk.data;
      EXPECT_EQ(text, expected) << a.run << " (call " << v.id << ")";
      if (a.exit_code != 0) {
        EXPECT_THAT(a.err, HasSubstr("unreachable")) << a.run;
      }
    } else {
      EXPECT_TRUE(v.state == store::CallState::interrupted || v.state == store::CallState::failed)
          << a.run << " is " << store::to_string(v.state);
      EXPECT_TRUE(v.error && !v.error->empty()) << a.run;
    }
  }
  int failed = 0;
  for (const Attempt& a : attempts) failed += a.exit_code != 0;
  std::printf(
      "%zu calls: %d ran across the 5 s outage to their end, %d failed loudly, %d "
      "after it\n",
      attempts.size(), through_outage, failed, after);
  EXPECT_GE(through_outage, 1) << "no call ran across the outage to its end";
  EXPECT_GE(after, 6) << "the clients were not served after the restart";
}

}  // namespace
}  // namespace rf::testing

namespace rf::testing {
namespace {

// Issue 40, 6: operating a fleet. A cordoned worker takes no new work; a
// drained one finishes what it holds and exits 0 by itself; a call needing
// their labels waits as long as its --wait-timeout says (not the sweep's
// 5 s) and runs once a worker is uncordoned.
TEST_F(Fleet, ADrainedWorkerFinishesWhatItHoldsAndExitsZeroAndACordonedOneTakesNoNewWork) {
  start_worker("w1", {"zone=a"});
  start_worker("w2", {"zone=a"});
  Cli cordon({"fleet", "cordon", "w2", "--store", pg_.uri()});
  ASSERT_EQ(cordon.wait(), 0) << cordon.err();
  EXPECT_EQ(cordon.out(), "worker w2 cordoned: it takes no new work (what it holds goes on)\n");
  Cli held = call("r-held", {"zone=a"}, {"sh", "-c", "echo started; sleep 2; echo finished"});
  ASSERT_TRUE(held.stdout_shows("started\n", 30s)) << held.err();
  EXPECT_EQ(worker_of("r-held"), "w1");

  Cli drain({"fleet", "drain", "w1", "--store", pg_.uri(), "--wait", "--timeout", "60s"});
  const auto asked = Clock::now();
  Cli waiting = call("r-wait", {"zone=a"}, {"echo", "on w2"}, {"--wait-timeout", "5m"});
  EXPECT_EQ(drain.wait(90s), 0) << drain.err();
  EXPECT_THAT(drain.out(), HasSubstr("worker w1 draining: it takes no new work, finishes what it "
                                     "holds, then exits 0\n"));
  EXPECT_THAT(drain.out(), HasSubstr("drained: 1 worker(s) exited\n"));
  EXPECT_EQ(workers_["w1"]->wait(30s), 0) << workers_["w1"]->err();
  EXPECT_THAT(workers_["w1"]->out(), HasSubstr("worker w1 drained: exiting"));
  EXPECT_EQ(held.wait(30s), 0) << held.err();
  EXPECT_EQ(held.out(), "started\nfinished\n");

  Cli status({"fleet", "status", "--store", pg_.uri(), "--all"});
  ASSERT_EQ(status.wait(), 0) << status.err();
  EXPECT_THAT(status.out(), ::testing::ContainsRegex("w2 +w2 +cordoned +yes"));
  EXPECT_THAT(status.out(), ::testing::ContainsRegex("w1 +w1 +stopped +no"));
  EXPECT_THAT(status.out(), HasSubstr(RF_VERSION));

  // Past the 5 s after which a labelled call no worker takes would fail.
  std::this_thread::sleep_until(asked + 8s);
  auto r = store_->run("r-wait");
  ASSERT_TRUE(r.ok() && r->calls.size() == 1u);
  EXPECT_EQ(r->calls[0].state, store::CallState::queued) << r->calls[0].error.value_or("");
  Cli uncordon({"fleet", "uncordon", "w2", "--store", pg_.uri()});
  ASSERT_EQ(uncordon.wait(), 0) << uncordon.err();
  EXPECT_EQ(waiting.wait(60s), 0) << waiting.err();
  EXPECT_EQ(waiting.out(), "on w2\n");
  EXPECT_EQ(worker_of("r-wait"), "w2");

  Cli nobody({"fleet", "drain", "nobody", "--store", pg_.uri()});
  EXPECT_EQ(nobody.wait(), 1);
  EXPECT_THAT(nobody.err(), HasSubstr("no worker or host is named nobody"));
}

// Issue 40, 6: the rolling upgrade of docs/fleet.md. A newer build migrated
// the store past this build's schema with a version that keeps older builds
// (played here by this test process, with one more migration than the
// `ringfence` under test knows): the older workers keep serving, and each in
// turn is drained and started again. A version that breaks older builds is
// refused to them at start, naming it.
TEST_F(Fleet, ARollingUpgradeKeepsTheOlderWorkersServingOnANewerBuildsSchema) {
  start_worker("w1", {});
  start_worker("w2", {});
  std::vector<store::Migration> newer(store::migrations().begin(), store::migrations().end());
  const int known = newer.back().version;
  constexpr std::string_view kAdd = "ALTER TABLE workers ADD COLUMN rolled_out TEXT";
  newer.push_back({known + 1, kAdd, kAdd, false, /*keeps_older_builds=*/true});
  {
    auto db = store::Db::open(pg_.uri());
    ASSERT_TRUE(db.ok()) << db.error().to_string();
    auto migrated = store::migrate(*db, newer);
    ASSERT_TRUE(migrated.ok()) << migrated.error().to_string();
  }
  Cli before = call("r-before", {}, {"echo", "served"});
  EXPECT_EQ(before.wait(), 0) << before.err();
  for (const std::string id : {"w1", "w2"}) {
    Cli drain({"fleet", "drain", id, "--store", pg_.uri(), "--wait"});
    ASSERT_EQ(drain.wait(90s), 0) << drain.err();
    ASSERT_EQ(workers_[id]->wait(30s), 0) << workers_[id]->err();
    start_worker(id, {});
    Cli c = call("r-after-" + id, {}, {"echo", "still served"});
    EXPECT_EQ(c.wait(), 0) << c.err();
    EXPECT_EQ(c.out(), "still served\n");
  }
  Cli status({"fleet", "status", "--store", pg_.uri(), "--json"});
  ASSERT_EQ(status.wait(), 0) << status.err();
  const json view = json::parse(status.out());
  ASSERT_EQ(view["workers"].size(), 2u);
  for (const json& w : view["workers"]) {
    EXPECT_EQ(w["version"], RF_VERSION);
    EXPECT_TRUE(w["admin"].is_null());
  }

  constexpr std::string_view kBreak = "ALTER TABLE workers RENAME COLUMN pid TO process_id";
  newer.push_back({known + 2, kBreak, kBreak, false, /*keeps_older_builds=*/false});
  {
    auto db = store::Db::open(pg_.uri());
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(store::migrate(*db, newer).ok());
  }
  Cli older({"worker", "start", "--store", pg_.uri(), "--state-dir", dir_ + "/w3", "--worker-id",
             "w3", "--sandbox-mode", "per_run"});
  EXPECT_EQ(older.wait(60s), 1);
  EXPECT_THAT(older.err(),
              HasSubstr("version " + std::to_string(known + 2) +
                        " changed it in a way older builds cannot use; use a ringfence that knows "
                        "version " +
                        std::to_string(known + 2) + " or later"));
}

}  // namespace
}  // namespace rf::testing

namespace rf::testing {
namespace {

// Issue 40, 3: a call that ends while PostgreSQL is down, on a worker that
// is then killed before the store comes back: its end (exit code, the
// output it still held) was kept on the worker's disk, and its next process
// under the same id files it before it takes the id over. Nothing the call
// produced is lost, and the client, which waited for the store, sees it.
TEST_F(Fleet, AnEndTheStoreCouldNotTakeIsKeptOnDiskAndFiledByTheWorkersNextProcess) {
  start_worker("w1", {"n=1"}, /*in_netns=*/false, "2s");
  Cli c = call("r-spool", {"n=1"}, {"sh", "-c", "echo begin; sleep 3; echo end; exit 5"});
  ASSERT_TRUE(c.stdout_shows("begin\n", 30s)) << c.err();
  pg_.stop_server();
  const std::string spool = dir_ + "/w1/spool";
  auto kept = [&] {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(spool, ec))
      if (e.path().extension() == ".json") return true;
    return false;
  };
  const auto by = Clock::now() + 60s;
  while (!kept() && Clock::now() < by) std::this_thread::sleep_for(50ms);
  ASSERT_TRUE(kept()) << "no end was kept in " << spool << ": " << workers_["w1"]->err();
  workers_["w1"]->signal(SIGKILL);
  ASSERT_EQ(workers_["w1"]->wait(10s), 128 + SIGKILL);
  pg_.start();
  ASSERT_TRUE(pg_.ok()) << pg_.error();
  auto s = store::Store::open(pg_.uri());
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  store_ = std::move(*s);
  start_worker("w1", {"n=1"}, /*in_netns=*/false, "2s");
  EXPECT_EQ(c.wait(90s), 5) << c.err();
  EXPECT_EQ(c.out(), "begin\nend\n");
  auto r = store_->run("r-spool");
  ASSERT_TRUE(r.ok() && r->calls.size() == 1u);
  EXPECT_EQ(r->calls[0].state, store::CallState::done) << r->calls[0].error.value_or("");
  EXPECT_EQ(r->calls[0].exit_code, 5);
  EXPECT_FALSE(kept());
}

}  // namespace
}  // namespace rf::testing
