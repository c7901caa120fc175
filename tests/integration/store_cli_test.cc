// The CLI on a PostgreSQL store (issue 16): the real `ringfence` (static, so it
// hands itself over to ringfence-pg) and real `worker start` processes sharing
// a cluster the test starts (support/postgres_server.h), each with a state dir
// of its own, as on two hosts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "store/db.h"
#include "store/store.h"
#include "support/cli_process.h"
#include "support/http_probe.h"
#include "support/postgres_server.h"
#include "support/serve_process.h"

namespace rf::testing {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::Not;

class StoreCli : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(pg_.ok()) << pg_.error();
    uri_ = pg_.fresh_schema_uri();
    ASSERT_FALSE(uri_.empty());
    char tmpl[] = "/tmp/rf-store-cli-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    for (auto& w : workers_) {
      w->signal(SIGTERM);
      w->wait();
    }
    workers_.clear();
    std::filesystem::remove_all(dir_);
  }
  // A worker with a state dir of its own (a host of its own), on the store.
  void start_worker(const std::string& name, const std::vector<std::string>& extra = {}) {
    const std::string state = dir_ + "/" + name;
    std::vector<std::string> a{"worker", "start", "--store", uri_, "--state-dir", state};
    a.insert(a.end(), extra.begin(), extra.end());
    workers_.push_back(std::make_unique<Cli>(a));
    auto s = store::Store::open(uri_);
    ASSERT_TRUE(s.ok()) << s.error().to_string();
    const auto end = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < end) {
      auto w = (*s)->workers();
      if (w && w->size() >= workers_.size()) return;
      std::this_thread::sleep_for(20ms);
    }
    FAIL() << "worker " << name << " never registered: " << workers_.back()->err();
  }

  PostgresServer pg_;
  std::string uri_, dir_;
  std::vector<std::unique_ptr<Cli>> workers_;
};

TEST_F(StoreCli, AWorkerAndCallsShareAPostgresStoreFromStateDirsOfTheirOwn) {
  start_worker("host-a");
  // --store on the command line: the static ringfence becomes ringfence-pg.
  Cli call({"call", "--store", uri_, "--state-dir", dir_ + "/client", "--project", "p", "--run",
            "r1", "--", "echo", "through postgres"});
  EXPECT_EQ(call.wait(), 0) << call.err();
  EXPECT_EQ(call.out(), "through postgres\n");
  // $RINGFENCE_STORE the same.
  Cli by_env({"call", "--project", "p", "--run", "r2", "--", "sh", "-c", "echo $((6*7))"},
             std::nullopt, {"RINGFENCE_STORE=" + uri_});
  EXPECT_EQ(by_env.wait(), 0) << by_env.err();
  EXPECT_EQ(by_env.out(), "42\n");
  // The rows are in PostgreSQL, not in any state dir's file.
  auto s = store::Store::open(uri_);
  ASSERT_TRUE(s.ok());
  auto r1 = (*s)->run("r1");
  ASSERT_TRUE(r1.ok()) << r1.error().to_string();
  ASSERT_EQ(r1->calls.size(), 1u);
  EXPECT_EQ(r1->calls[0].state, store::CallState::done);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/client/ringfence.db"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/host-a/ringfence.db"));
}

// Issue 40, 5: a client holds one connection (it held three: the store's,
// the bell relay's listener and its sender), so a cluster's max_connections
// are not spent three at a time by clients waiting on their calls.
TEST_F(StoreCli, ACallHoldsOnePostgresConnectionWhileItWaits) {
  start_worker("host-a");
  Cli call({"call", "--store", uri_, "--state-dir", dir_ + "/client", "--project", "p", "--run",
            "r1", "--", "sh", "-c", "echo started; sleep 2; echo done"},
           std::nullopt, {"PGAPPNAME=rf-one-call"});
  ASSERT_TRUE(call.stdout_shows("started\n", 30s)) << call.err();
  auto db = store::Db::open(uri_);
  ASSERT_TRUE(db.ok()) << db.error().to_string();
  auto st =
      db->prepare("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'rf-one-call'");
  ASSERT_TRUE(st.ok()) << st.error().to_string();
  ASSERT_TRUE(*st->step());
  EXPECT_EQ(st->int64(0), 1);
  EXPECT_EQ(call.wait(), 0) << call.err();
  EXPECT_EQ(call.out(), "started\ndone\n");
}

TEST_F(StoreCli, APasswordOnTheCommandLineIsRefusedWithoutEchoingIt) {
  const std::string with_password =
      "postgresql://rf:S3cretPw@127.0.0.1:" + std::to_string(pg_.port()) + "/postgres";
  Cli worker({"worker", "start", "--store", with_password, "--state-dir", dir_ + "/w"});
  EXPECT_NE(worker.wait(), 0);
  EXPECT_THAT(worker.err(), HasSubstr("--store postgresql://rf:***@127.0.0.1:"));
  EXPECT_THAT(worker.err(), HasSubstr("the URI holds a password"));
  EXPECT_THAT(worker.err(), Not(HasSubstr("S3cretPw")));
  // Issue 40, 4: every flag and variable that names a store, in URI and
  // keyword form, before or after the command's name.
  const std::string keyword =
      "host=127.0.0.1 port=" + std::to_string(pg_.port()) + " password=S3cretPw dbname=postgres";
  const std::string quoted = "host=127.0.0.1 password = 'S3cret Pw' dbname=postgres";
  const std::vector<std::vector<std::string>> refused = {
      {"call", "--store", with_password, "--project", "p", "--", "true"},
      {"call", "--store=" + keyword, "--project", "p", "--", "true"},
      {"fleet", "status", "--store", with_password},
      {"fleet", "status", "--store", quoted},
      {"--store", keyword, "fleet", "status"},
      {"store", "migrate", "--from", "sqlite:" + dir_ + "/x.db", "--to", keyword},
      {"worker", "start", "--store", keyword, "--state-dir", dir_ + "/w"},
  };
  for (const auto& args : refused) {
    Cli c(args);
    EXPECT_EQ(c.wait(), 2) << args[0] << " " << args[1] << ": " << c.err();
    EXPECT_THAT(c.err(), HasSubstr("the URI holds a password")) << args[1];
    EXPECT_THAT(c.err(), Not(HasSubstr("S3cret"))) << args[1];
  }
  for (const std::string& env : {with_password, keyword}) {
    Cli c({"fleet", "status"}, std::nullopt, {"RINGFENCE_STORE=" + env});
    EXPECT_EQ(c.wait(), 2) << c.err();
    EXPECT_THAT(c.err(), HasSubstr("RINGFENCE_STORE holds a password"));
    EXPECT_THAT(c.err(), Not(HasSubstr("S3cret")));
  }
  // A keyword string without a password is PostgreSQL, never a SQLite path:
  // it reaches the cluster, and no file is made of it.
  const std::string by_keyword =
      "host=" + pg_.dir() + " port=" + std::to_string(pg_.port()) + " dbname=postgres user=rf";
  Cli fleet({"fleet", "status", "--store", by_keyword});
  EXPECT_EQ(fleet.wait(), 0) << fleet.err();
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::current_path()))
    EXPECT_THAT(e.path().filename().string(), Not(HasSubstr("dbname"))) << e.path();
  // Another scheme's URI is refused by name (no directory "mysql:" is made).
  Cli other({"fleet", "status", "--store", "mysql://rf@127.0.0.1/x"});
  EXPECT_NE(other.wait(), 0);
  EXPECT_THAT(other.err(), HasSubstr("an unknown scheme"));
  EXPECT_FALSE(std::filesystem::exists("mysql:"));
  // `worker config --explain` names where the store came from, without a password.
  Cli explain({"worker", "config", "--explain", "--store", uri_, "--state-dir", dir_ + "/w"});
  EXPECT_EQ(explain.wait(), 0) << explain.err();
  EXPECT_THAT(explain.out(), HasSubstr("store: " + uri_ + " (flag --store)"));
}

// Issue 40, 6: a call waiting in PostgreSQL for a worker says how to start
// one on that store, not on the state dir's SQLite file.
TEST_F(StoreCli, AWaitingCallsHintStartsAWorkerOnItsStore) {
  Cli call({"call", "--store", uri_, "--state-dir", dir_ + "/c", "--project", "p", "--run", "rw",
            "--", "true"});
  EXPECT_TRUE(call.stderr_shows("ringfence: start one with: ringfence worker start --state-dir " +
                                    dir_ + "/c --store " + uri_ + " --project-environment",
                                30s))
      << call.err();
  call.signal(SIGKILL);
  call.wait();
}

// Issue 40, 3: a call whose store cannot be reached was never queued: its
// own exit code (122), so a client knows a retry cannot run it twice.
TEST_F(StoreCli, ACallThatWasNeverQueuedSaysSoWithItsOwnExitCode) {
  Cli call({"call", "--store", "postgresql://rf@127.0.0.1:1/postgres?connect_timeout=2",
            "--state-dir", dir_ + "/c", "--project", "p", "--run", "r1", "--", "true"});
  EXPECT_EQ(call.wait(30s), 122) << call.err();
  EXPECT_THAT(call.err(), HasSubstr("the call was never queued"));
}

// Issue 40, 6: a worker registered running that stopped heartbeating (its
// process killed, its host gone) reads "dead" in fleet status, not "running".
// Issue 40, 3: a call queued before the store went away, whose client
// cannot see how it ends, says so with an exit code of its own (123: the
// call may run; 122 means it never was queued), once --store-wait is over.
TEST_F(StoreCli, AQueuedCallWhoseStoreWentAwayEndsWithOutcomeUnknown) {
  Cli call({"call", "--store", uri_, "--state-dir", dir_ + "/client", "--project", "p", "--run",
            "r-gone", "--store-wait", "2s", "--", "true"});
  auto s = store::Store::open(uri_);
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  const auto by = std::chrono::steady_clock::now() + 30s;
  bool queued = false;
  while (!queued && std::chrono::steady_clock::now() < by) {
    auto r = (*s)->run("r-gone");
    queued = r.ok() && r->calls.size() == 1;
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(queued) << call.err();
  s->reset();
  pg_.stop_server();
  EXPECT_EQ(call.wait(60s), 123);
  EXPECT_THAT(call.err(), HasSubstr("the store is unreachable"));
  EXPECT_THAT(call.err(), HasSubstr(" was queued and its outcome is unknown here (ringfence run "
                                    "show r-gone says how it ended)"));
  pg_.start();
}

TEST_F(StoreCli, AWorkerThatStoppedHeartbeatingIsShownDead) {
  auto s = store::Store::open(uri_);
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  (*s)->set_clock([] { return store::now_ms() - 60'000; });
  ASSERT_TRUE((*s)->register_worker("ghost", 4242, "gone-host").ok());
  Cli status({"fleet", "status", "--store", uri_});
  ASSERT_EQ(status.wait(), 0) << status.err();
  EXPECT_THAT(status.out(), ::testing::ContainsRegex("ghost +[^ ]+ +dead +no "));
  EXPECT_THAT(status.out(), Not(HasSubstr("running")));
}

// A host's SQLite store moved to PostgreSQL with `store migrate`: its runs,
// calls and audit chain are there, the run goes on through a worker on the
// new store, and a second move into it (no longer empty) is refused. Every
// command takes --store, before or after its name.
TEST_F(StoreCli, AStateDirMovedToPostgresGoesOnThere) {
  const std::string state = dir_ + "/host-a", file = state + "/ringfence.db";
  {
    Cli worker({"worker", "start", "--state-dir", state});
    const auto end = std::chrono::steady_clock::now() + 20s;
    bool registered = false;
    while (!registered && std::chrono::steady_clock::now() < end) {
      std::this_thread::sleep_for(50ms);
      if (!std::filesystem::exists(file)) continue;
      auto s = store::Store::open(file);
      auto w = s ? (*s)->workers() : Result<std::vector<store::WorkerRow>>(s.error());
      registered = w && !w->empty();
    }
    ASSERT_TRUE(registered) << worker.err();
    for (const char* word : {"one", "two"}) {
      Cli call({"call", "--state-dir", state, "--project", "p", "--run", "r1", "--", "echo", word});
      ASSERT_EQ(call.wait(), 0) << call.err();
    }
    worker.signal(SIGTERM);
    worker.wait();
  }
  Cli move({"store", "migrate", "--from", "sqlite:" + file, "--to", uri_});
  ASSERT_EQ(move.wait(), 0) << move.err();
  EXPECT_THAT(move.out(), HasSubstr("moved sqlite:" + file + " -> " + uri_ + " (schema version "));
  EXPECT_THAT(move.out(), HasSubstr("audit chain verified in " + uri_ + ": "));
  EXPECT_THAT(move.out(), ::testing::ContainsRegex("tool_calls +2\n"));

  // Before the command's name, and after it.
  Cli show({"--store", uri_, "run", "show", "r1"});
  EXPECT_EQ(show.wait(), 0) << show.err();
  EXPECT_THAT(show.out(), HasSubstr("2 calls"));
  Cli verify({"audit", "verify", "--store", uri_});
  EXPECT_EQ(verify.wait(), 0) << verify.err();
  EXPECT_THAT(verify.out(), HasSubstr("audit log intact"));

  start_worker("host-b");
  Cli call({"call", "--store", uri_, "--project", "p", "--run", "r1", "--", "echo", "three"});
  EXPECT_EQ(call.wait(), 0) << call.err();
  EXPECT_EQ(call.out(), "three\n");
  Cli again({"run", "show", "r1", "--store", uri_});
  EXPECT_EQ(again.wait(), 0) << again.err();
  EXPECT_THAT(again.out(), HasSubstr("3 calls"));

  // The SQLite file is marked moved (issue 40: it stayed writable, with no
  // mark): it is not moved again, and a worker or call left on it is refused.
  Cli twice({"store", "migrate", "--from", file, "--to", uri_});
  EXPECT_EQ(twice.wait(), 125);
  EXPECT_THAT(twice.err(), HasSubstr("this store was moved to " + uri_ +
                                     " by `ringfence store "
                                     "migrate` at "));
  EXPECT_THAT(twice.err(), HasSubstr("(no row was written to " + uri_ + ")"));
  Cli stale_worker({"worker", "start", "--state-dir", state});
  EXPECT_EQ(stale_worker.wait(30s), 1);
  EXPECT_THAT(stale_worker.err(), HasSubstr("this store was moved to " + uri_));
  Cli stale_call({"call", "--state-dir", state, "--project", "p", "--run", "r9", "--", "true"});
  EXPECT_EQ(stale_call.wait(30s), 122);
  EXPECT_THAT(stale_call.err(), HasSubstr("name " + uri_ + " to every worker and command"));
}

TEST_F(StoreCli, StoreMigrateRefusesWhatItCannotMove) {
  const std::string pw =
      "postgresql://rf:S3cretPw@127.0.0.1:" + std::to_string(pg_.port()) + "/postgres";
  Cli with_password({"store", "migrate", "--from", dir_ + "/x.db", "--to", pw});
  EXPECT_EQ(with_password.wait(), 2);
  EXPECT_THAT(with_password.err(), HasSubstr("--to postgresql://rf:***@"));
  EXPECT_THAT(with_password.err(), HasSubstr("holds a password"));
  EXPECT_THAT(with_password.err(), Not(HasSubstr("S3cretPw")));
  Cli missing({"store", "migrate", "--from", "sqlite:" + dir_ + "/none.db", "--to", uri_});
  EXPECT_EQ(missing.wait(), 2);
  EXPECT_THAT(missing.err(), HasSubstr("--from sqlite:" + dir_ + "/none.db: no such SQLite file"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/none.db"));
  Cli root_password({"--store", pw, "run", "show", "r1"});
  EXPECT_EQ(root_password.wait(), 2);
  EXPECT_THAT(root_password.err(), HasSubstr("holds a password"));
  EXPECT_THAT(root_password.err(), Not(HasSubstr("S3cretPw")));
}

// `serve` on a PostgreSQL store (its own --store): the token it checks, the
// fleet it shows and the calls it queues are the cluster's, served by a
// worker of another state dir.
TEST_F(StoreCli, ServeOnAPostgresStore) {
  const std::string tok =
      make_token(dir_ + "/api", "acme", {"--store", uri_, "--role", "operator"});
  ASSERT_EQ(tok.rfind("rft_", 0), 0u) << tok;
  int port = 0;
  auto server = start_serve(dir_ + "/api", &port, {"--store", uri_});
  ASSERT_NE(port, 0);
  start_worker("host-a");
  auto get = [&](const std::string& target) {
    HttpProbe p(port);
    EXPECT_TRUE(p.connected());
    return p.request("GET", target, tok);
  };
  auto fleet = nlohmann::json::parse(get("/v1/fleet").body);
  EXPECT_EQ(fleet["live_workers"], 1) << fleet.dump();
  HttpProbe p(port);
  auto made = p.request("POST", "/v1/calls", tok, R"({"run": "r1", "argv": ["echo", "via pg"]})");
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string id = std::to_string(nlohmann::json::parse(made.body)["id"].get<int64_t>());
  nlohmann::json shown;
  for (int i = 0; i < 200; ++i) {
    if (i) std::this_thread::sleep_for(50ms);
    shown = nlohmann::json::parse(get("/v1/calls/" + id).body);
    if (shown["state"] == "done") break;
  }
  EXPECT_EQ(shown["stdout"], "via pg\n") << shown.dump();
  // The token lives in the cluster, not in the state dir's file.
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/api/ringfence.db"));
  server->signal(SIGTERM);
  EXPECT_EQ(server->wait(30s), 0) << server->err();
}

// serve is a front door, not a second engine (issue 39): with three workers
// on one PostgreSQL store, each with its door on TCP as on hosts of their
// own, a sandbox made through one serve lives on a worker, is listed with its
// project from the store, and is used and deleted through another serve.
TEST_F(StoreCli, ASandboxMadeThroughOneServeIsUsedThroughAnother) {
  const std::string tok = make_token(dir_ + "/api-a", "acme", {"--store", uri_});
  for (const std::string host : {"host-a", "host-b", "host-c"}) {
    start_worker(host, {"--worker-id", host, "--sandbox-mode", "per_run", "--door-listen",
                        "127.0.0.1:0", "--label", "zone=" + host.substr(5)});
  }
  auto s = store::Store::open(uri_);
  ASSERT_TRUE(s.ok());
  for (int i = 0; i < 1000; ++i) {
    auto w = (*s)->workers();
    size_t doors = 0;
    for (const auto& row : w ? *w : std::vector<store::WorkerRow>{}) doors += row.door.has_value();
    if (doors == 3) break;
    std::this_thread::sleep_for(20ms);
  }
  int port_a = 0, port_b = 0;
  auto serve_a = start_serve(dir_ + "/api-a", &port_a, {"--store", uri_});
  auto serve_b = start_serve(dir_ + "/api-b", &port_b, {"--store", uri_});
  ASSERT_NE(port_a, 0);
  ASSERT_NE(port_b, 0);
  HttpProbe a(port_a), b(port_b);
  auto made = a.request("POST", "/v1/sandboxes", tok, "{}");
  ASSERT_EQ(made.status, 201) << made.body;
  const auto sb = nlohmann::json::parse(made.body);
  const std::string id = sb["id"];
  const std::string worker = sb["worker"];
  EXPECT_THAT(worker, ::testing::StartsWith("host-"));
  // Recorded where every serve looks: mode api, its project, its worker.
  auto row = (*s)->sandbox(id);
  ASSERT_TRUE(row.ok() && row->has_value());
  EXPECT_EQ((*row)->mode, "api");
  EXPECT_EQ((*row)->project_id, "acme");
  EXPECT_EQ((*row)->worker_id, worker);
  // Written through one serve, read and run through the other.
  EXPECT_EQ(
      a.request("PUT", "/v1/sandboxes/" + id + "/files?path=/workspace/f", tok, "made on a").status,
      201);
  auto ran = b.request("POST", "/v1/sandboxes/" + id + "/exec", tok,
                       R"({"cmd": "cat /workspace/f; echo; hostname"})");
  ASSERT_EQ(ran.status, 200) << ran.body;
  EXPECT_THAT(nlohmann::json::parse(ran.body)["stdout"].get<std::string>(), HasSubstr("made on a"));
  auto listed = nlohmann::json::parse(b.request("GET", "/v1/sandboxes", tok).body);
  ASSERT_EQ(listed["sandboxes"].size(), 1u) << listed.dump();
  EXPECT_EQ(listed["sandboxes"][0]["worker"], worker);
  // Placed by labels, as calls are routed.
  auto in_c = a.request("POST", "/v1/sandboxes", tok, R"({"requires": {"labels": {"zone": "c"}}})");
  ASSERT_EQ(in_c.status, 201) << in_c.body;
  const auto c_made = nlohmann::json::parse(in_c.body);
  EXPECT_EQ(c_made["worker"], "host-c");
  auto nowhere =
      a.request("POST", "/v1/sandboxes", tok, R"({"requires": {"labels": {"zone": "z"}}})");
  EXPECT_EQ(nowhere.status, 503) << nowhere.body;
  EXPECT_THAT(nowhere.body, HasSubstr("zone=z"));
  EXPECT_EQ(b.request("DELETE", "/v1/sandboxes/" + c_made["id"].get<std::string>(), tok).status,
            204);
  // The call is the worker's, recorded and receipted like every other.
  EXPECT_EQ(b.request("DELETE", "/v1/sandboxes/" + id, tok).status, 204);
  EXPECT_EQ(a.request("GET", "/v1/sandboxes/" + id, tok).status, 404);
  Cli receipts({"audit", "show", "--store", uri_, "--json"});
  EXPECT_EQ(receipts.wait(), 0) << receipts.err();
  EXPECT_THAT(receipts.out(), HasSubstr("\"sandbox.create\""));
  EXPECT_THAT(receipts.out(), HasSubstr("\"sandbox.destroy\""));
  EXPECT_THAT(receipts.out(), HasSubstr("\"proof.receipt\""));
  for (auto* server : {serve_a.get(), serve_b.get()}) {
    server->signal(SIGTERM);
    EXPECT_EQ(server->wait(30s), 0) << server->err();
  }
}

}  // namespace
}  // namespace rf::testing
