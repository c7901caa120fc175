#include "store/store.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <latch>
#include <set>
#include <thread>

#include "store/db.h"
#include "store/migrations.h"
#include "support/store_fixture.h"
#include "support/store_target.h"

namespace rf::store {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;

class StoreTest : public rf::testing::StoreFixture {
 protected:
  // state/ does not exist yet: the store makes it (on SQLite).
  StoreTest() : StoreFixture("rf-store", "state/ringfence.db") {}

  // A raw connection, to look at the file behind the Store's back.
  Db raw() {
    auto db = Db::open(path_);
    EXPECT_TRUE(db.ok()) << db.error().to_string();
    return std::move(*db);
  }

  int64_t scalar(const std::string& sql) {
    Db db = raw();
    auto st = db.prepare(sql);
    EXPECT_TRUE(st.ok()) << st.error().to_string();
    auto row = st->step();
    EXPECT_TRUE(row.ok() && *row) << sql;
    return st->int64(0);
  }
  int64_t count(const std::string& table) { return scalar("SELECT count(*) FROM " + table); }
  // SQL that counts the tables called `name` (0 or 1), on either engine.
  static std::string tables_named(const std::string& name) {
    if (rf::testing::store_tests_on_postgres()) {
      return "SELECT count(*) FROM information_schema.tables WHERE table_schema = "
             "current_schema() AND table_name = '" +
             name + "'";
    }
    return "SELECT count(*) FROM sqlite_master WHERE name = '" + name + "'";
  }

  static NewCall make_call(const std::string& project, const std::string& run,
                           std::vector<std::string> argv = {"echo", "hi"}) {
    NewCall c;
    c.project = project;
    c.run = run;
    c.argv = std::move(argv);
    return c;
  }

  // A store with project p (development), worker w1 registered.
  std::unique_ptr<Store> ready() {
    auto s = open();
    EXPECT_TRUE(s->ensure_project("p", Environment::development).ok());
    EXPECT_TRUE(s->register_worker("w1", 100, "host-a").ok());
    return s;
  }

  std::vector<int64_t> enqueue_many(Store& s, int n, const std::string& project = "p") {
    std::vector<int64_t> ids;
    for (int i = 0; i < n; ++i) {
      auto id = s.enqueue_call(make_call(project, "r-" + project, {"echo", std::to_string(i)}));
      EXPECT_TRUE(id.ok()) << id.error().to_string();
      ids.push_back(*id);
    }
    return ids;
  }
};

// ---- migrations

// The newest schema version this build knows.
int latest() { return migrations().back().version; }

TEST_F(StoreTest, OpenCreatesTheSchemaAndReopenIsANoOp) {
  ASSERT_NE(open(), nullptr);
  EXPECT_EQ(scalar("SELECT max(version) FROM schema_version"), latest());
  EXPECT_EQ(latest(), static_cast<int>(migrations().size()));
  for (const char* table : {"projects", "runs", "tool_calls", "call_output", "sandboxes", "workers",
                            "events", "secrets", "secret_versions", "identity_profiles",
                            "profile_entries", "injections", "audit_events", "audit_head"}) {
    EXPECT_EQ(scalar(tables_named(table)), 1) << table;
  }
  ASSERT_NE(open(), nullptr);
  Db db = raw();
  ASSERT_TRUE(migrate(db).ok());
  EXPECT_EQ(count("schema_version"), latest());
  if (rf::testing::store_tests_on_postgres()) return;  // SQLite's journal, below
  auto mode = db.prepare("PRAGMA journal_mode");
  ASSERT_TRUE(mode.ok() && *mode->step());
  EXPECT_EQ(mode->text(0), "wal");
}

// SQLite's "disk I/O error" and "unable to open" say which call failed, and why.
TEST_F(StoreTest, ASqliteFileThatCannotBeOpenedSaysTheErrno) {
  if (rf::testing::store_tests_on_postgres()) return;  // SQLite's own errors
  auto db = Db::open("/nonexistent-rf-dir/ringfence.db");
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.error().to_string(),
            "open database /nonexistent-rf-dir/ringfence.db: unable to open database file "
            "(extended code 14, errno 2: No such file or directory)");
}

// The store holds what calls printed, the tool calls' environments and the
// sealed secrets: a new one, its WAL and the directories made for it are its
// owner's alone, whatever the umask. Before, they were 0644 and 0755.
TEST(StoreFiles, ANewStoreAndTheDirectoriesMadeForItAreTheOwnersOnly) {
  char tmpl[] = "/tmp/rf-store-mode-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string root = tmpl;
  const mode_t old_umask = ::umask(022);
  {
    auto store = Store::open(root + "/a/b/ringfence.db");
    ASSERT_TRUE(store.ok()) << store.error().to_string();
  }
  ::umask(old_umask);
  auto mode_of = [](const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? static_cast<int>(st.st_mode & 07777) : -1;
  };
  EXPECT_EQ(mode_of(root + "/a"), 0700);
  EXPECT_EQ(mode_of(root + "/a/b"), 0700);
  EXPECT_EQ(mode_of(root + "/a/b/ringfence.db"), 0600);
  for (const char* side : {"-wal", "-shm"}) {
    const int mode = mode_of(root + "/a/b/ringfence.db" + side);
    if (mode != -1) {
      EXPECT_EQ(mode & 077, 0) << side;
    }
  }
  std::filesystem::remove_all(root);
}

// A mistyped URI is an error naming it, not a SQLite file of that name made
// in the current directory.
TEST(StoreFiles, AMistypedUriIsRefusedAndMakesNoFile) {
  char tmpl[] = "/tmp/rf-store-uri-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string root = tmpl;
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(root);
  auto store = Store::open("postgress://db.example/rf");
  std::filesystem::current_path(cwd);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.error().to_string(),
            "open store postgress://db.example/rf: an unknown scheme: expected postgres://, "
            "postgresql://, a keyword string (host=... dbname=...), sqlite:PATH or a file path");
  EXPECT_TRUE(std::filesystem::is_empty(root));
  std::filesystem::remove_all(root);
}

TEST_F(StoreTest, ConnectionsOpeningANewFileAtOnceMigrateItOnce) {
  constexpr int kThreads = 8;
  std::latch start(kThreads);
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      start.arrive_and_wait();
      auto s = Store::open(path_);
      if (!s.ok()) {
        ADD_FAILURE() << s.error().to_string();
        ++errors;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(count("schema_version"), latest());
}

TEST_F(StoreTest, NewerSchemaIsRefusedNamingBothVersions) {
  ASSERT_NE(open(), nullptr);
  const std::string next = std::to_string(latest() + 1);
  ASSERT_TRUE(
      raw().exec("INSERT INTO schema_version (version, applied_at) VALUES (" + next + ", 0)").ok());
  auto s = Store::open(path_);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().to_string(), HasSubstr(path_));
  EXPECT_THAT(s.error().to_string(),
              HasSubstr("schema version " + next + " is newer than this build's (version " +
                        std::to_string(latest()) + ")"));
}

// A rolling upgrade (issue 40, docs/fleet.md): a newer build migrated the
// store; this build's workers and clients keep using it while every version
// past their own keeps older builds, and are refused, naming the version that
// does not, once one breaks them.
TEST_F(StoreTest, ANewerBuildsAdditiveSchemaKeepsThisBuildWorkingAndABreakingOneDoesNot) {
  ASSERT_NE(open(), nullptr);
  std::vector<Migration> newer(migrations().begin(), migrations().end());
  constexpr std::string_view kAdd = "ALTER TABLE workers ADD COLUMN newer_note TEXT";
  newer.push_back({latest() + 1, kAdd, kAdd, false, /*keeps_older_builds=*/true});
  {
    Db db = raw();
    auto migrated = migrate(db, newer);
    ASSERT_TRUE(migrated.ok()) << migrated.error().to_string();
  }
  auto s = Store::open(path_);
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  ASSERT_TRUE((*s)->ensure_project("p", Environment::development).ok());
  ASSERT_TRUE((*s)->register_worker("w1", 1, "vm").ok());
  auto id = (*s)->enqueue_call(make_call("p", "r1", {"true"}));
  ASSERT_TRUE(id.ok()) << id.error().to_string();
  auto claimed = (*s)->claim_next("w1", milliseconds(5000));
  ASSERT_TRUE(claimed.ok() && *claimed) << (claimed.ok() ? "none" : claimed.error().to_string());
  ASSERT_TRUE((*s)->finish_call(*id, "w1", 0, "{}").ok());
  s->reset();

  constexpr std::string_view kBreak = "ALTER TABLE workers RENAME COLUMN pid TO process_id";
  newer.push_back({latest() + 2, kBreak, kBreak, false, /*keeps_older_builds=*/false});
  {
    Db db = raw();
    auto migrated = migrate(db, newer);
    ASSERT_TRUE(migrated.ok()) << migrated.error().to_string();
  }
  auto refused = Store::open(path_);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.error().to_string(),
              HasSubstr("the store's schema version " + std::to_string(latest() + 2) +
                        " is newer than this build's (version " + std::to_string(latest()) +
                        ") and version " + std::to_string(latest() + 2) +
                        " changed it in a way older builds cannot use; use a ringfence that "
                        "knows version " +
                        std::to_string(latest() + 2) + " or later"));
}

TEST_F(StoreTest, FailedMigrationLeavesNoTrace) {
  ASSERT_NE(open(), nullptr);
  std::vector<Migration> list(migrations().begin(), migrations().end());
  constexpr std::string_view kHalf =
      "CREATE TABLE half (x INTEGER); INSERT INTO nowhere VALUES (1);";
  list.push_back({latest() + 1, kHalf, kHalf});
  Db db = raw();
  auto migrated = migrate(db, list);
  ASSERT_FALSE(migrated.ok());
  EXPECT_THAT(migrated.error().to_string(), HasSubstr("migration " + std::to_string(latest() + 1)));
  EXPECT_EQ(scalar("SELECT max(version) FROM schema_version"), latest());
  EXPECT_EQ(scalar(tables_named("half")), 0);
}

// ---- projects and calls

TEST_F(StoreTest, ProjectEnvironmentIsFixed) {
  auto s = open();
  ASSERT_TRUE(s->ensure_project("p", Environment::production).ok());
  ASSERT_TRUE(s->ensure_project("p", Environment::production).ok());
  auto other = s->ensure_project("p", Environment::staging);
  ASSERT_FALSE(other.ok());
  EXPECT_THAT(other.error().to_string(), HasSubstr("project p is production, not staging"));
  EXPECT_EQ(s->project("p")->environment, Environment::production);
  auto missing = s->project("q");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.error().to_string(), HasSubstr("project q does not exist"));
}

TEST_F(StoreTest, EnqueueClaimRunOutputFinishRoundTrip) {
  auto s = ready();
  NewCall c = make_call("p", "r1", {"sh", "-c", "cat"});
  c.env = {{"A", "1"}, {"B", "two"}};
  c.cwd = "/workspace";
  c.stdin_bytes = std::string("in\0put", 6);
  c.timeout = milliseconds(1500);
  auto id = s->enqueue_call(c);
  ASSERT_TRUE(id.ok()) << id.error().to_string();
  EXPECT_EQ(s->call(*id)->state, CallState::queued);
  EXPECT_EQ(s->run("r1")->state, RunState::open);

  auto claimed = s->claim_next("w1", milliseconds(10'000));
  ASSERT_TRUE(claimed.ok()) << claimed.error().to_string();
  ASSERT_TRUE(claimed->has_value());
  const ClaimedCall& got = **claimed;
  EXPECT_EQ(got.id, *id);
  EXPECT_EQ(got.call.project, "p");
  EXPECT_EQ(got.call.run, "r1");
  EXPECT_EQ(got.call.argv, c.argv);
  EXPECT_EQ(got.call.env, c.env);
  EXPECT_EQ(got.call.cwd, "/workspace");
  EXPECT_EQ(got.call.stdin_bytes, c.stdin_bytes);
  EXPECT_EQ(got.call.timeout, milliseconds(1500));
  EXPECT_EQ(got.lease_expires_at, clock_ + 10'000);
  EXPECT_EQ(s->call(*id)->state, CallState::claimed);
  EXPECT_EQ(s->call(*id)->worker_id, "w1");

  ASSERT_TRUE(s->mark_running(*id, "w1").ok());
  EXPECT_EQ(s->call(*id)->state, CallState::running);
  EXPECT_EQ(*s->append_output(*id, "w1", Stream::out, "hello "), 1);
  EXPECT_EQ(*s->append_output(*id, "w1", Stream::err, std::string("oops\0", 5)), 2);
  EXPECT_EQ(*s->append_output(*id, "w1", Stream::out, "world"), 3);

  auto all = s->output(*id);
  ASSERT_TRUE(all.ok()) << all.error().to_string();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].seq, 1);
  EXPECT_EQ((*all)[0].stream, Stream::out);
  EXPECT_EQ((*all)[0].data, "hello ");
  EXPECT_EQ((*all)[1].stream, Stream::err);
  EXPECT_EQ((*all)[1].data, std::string("oops\0", 5));
  EXPECT_EQ((*all)[2].data, "world");
  auto tail = s->output(*id, 2);
  ASSERT_EQ(tail->size(), 1u);
  EXPECT_EQ((*tail)[0].seq, 3);

  auto bad = s->finish_call(*id, "w1", 0, "{not json");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.error().to_string(), HasSubstr("finish call " + std::to_string(*id)));
  EXPECT_EQ(s->call(*id)->state, CallState::running);

  ASSERT_TRUE(s->finish_call(*id, "w1", 3, R"({"exit_code":3})").ok());
  auto done = s->call(*id);
  EXPECT_EQ(done->state, CallState::done);
  EXPECT_EQ(done->exit_code, 3);
  EXPECT_EQ(done->result_json, R"({"exit_code":3})");
  EXPECT_EQ(done->finished_at, clock_.load());
  auto run = s->run("r1");
  ASSERT_TRUE(run.ok());
  ASSERT_EQ(run->calls.size(), 1u);
  EXPECT_EQ(run->calls[0].argv, c.argv);
  EXPECT_FALSE(s->claim_next("w1", milliseconds(1000))->has_value());
  EXPECT_THAT(s->call(999).error().to_string(), HasSubstr("call 999 does not exist"));
}

TEST_F(StoreTest, ClaimRunningTakesABatchOldestFirstStraightToRunning) {
  auto s = ready();
  ASSERT_TRUE(s->ensure_project("q", Environment::development).ok());
  auto p = enqueue_many(*s, 3, "p");
  auto q = enqueue_many(*s, 2, "q");
  auto batch = s->claim_running("w1", milliseconds(5000), 2);
  ASSERT_TRUE(batch.ok()) << batch.error().to_string();
  ASSERT_EQ(batch->size(), 2u);
  EXPECT_EQ((*batch)[0].id, p[0]);
  EXPECT_EQ((*batch)[1].id, p[1]);
  EXPECT_EQ((*batch)[1].call.argv, (std::vector<std::string>{"echo", "1"}));
  EXPECT_EQ(s->call(p[0])->state, CallState::running);
  EXPECT_EQ(s->call(p[1])->worker_id, "w1");
  EXPECT_EQ(s->call(p[2])->state, CallState::queued);
  // A project filter skips the other project's older call.
  auto only_q = s->claim_running("w1", milliseconds(5000), 10, ClaimFilter{"q"});
  ASSERT_EQ(only_q->size(), 2u);
  EXPECT_EQ((*only_q)[0].id, q[0]);
  EXPECT_EQ(s->call(p[2])->state, CallState::queued);
  // Held calls are finished like claimed ones; an empty queue gives an empty batch.
  ASSERT_TRUE(s->finish_call(p[0], "w1", 0, "{}").ok());
  EXPECT_EQ(s->claim_running("w1", milliseconds(5000), 10)->size(), 1u);
  EXPECT_TRUE(s->claim_running("w1", milliseconds(5000), 10)->empty());
  // An empty queue is answered from a read, before the worker is checked;
  // with a call queued, an unknown worker is refused by name.
  EXPECT_TRUE(s->claim_running("nobody", milliseconds(5000), 1)->empty());
  ASSERT_TRUE(s->enqueue_call(make_call("p", "r-p")).ok());
  auto nobody = s->claim_running("nobody", milliseconds(5000), 1);
  ASSERT_FALSE(nobody.ok());
  EXPECT_THAT(nobody.error().to_string(), HasSubstr("worker nobody is not registered"));
}

TEST_F(StoreTest, FinishWritesHeldBackOutputAfterEarlierChunksInOneTransaction) {
  auto s = ready();
  auto id = *s->enqueue_call(make_call("p", "r1"));
  ASSERT_EQ(s->claim_running("w1", milliseconds(5000), 1)->size(), 1u);
  EXPECT_EQ(*s->append_outputs(id, "w1", {{Stream::out, "a"}, {Stream::err, "b"}}), 2);
  EXPECT_EQ(*s->append_outputs(id, "w1", {}), 0);
  ASSERT_TRUE(s->finish_call(id, "w1", 0, "{}", {{Stream::out, "c"}, {Stream::out, "d"}}).ok());
  auto all = s->output(id);
  ASSERT_EQ(all->size(), 4u);
  std::string text;
  for (const auto& c : *all) text += std::to_string(c.seq) + c.data;
  EXPECT_EQ(text, "1a2b3c4d");
  EXPECT_EQ((*all)[1].stream, Stream::err);
  // A refused finish writes none of its output either.
  auto other = *s->enqueue_call(make_call("p", "r1"));
  ASSERT_EQ(s->claim_running("w1", milliseconds(5000), 1)->size(), 1u);
  ASSERT_FALSE(s->finish_call(other, "w1", 0, "{bad", {{Stream::out, "lost"}}).ok());
  EXPECT_TRUE(s->output(other)->empty());
  ASSERT_TRUE(s->fail_call(other, "w1", "boom", {{Stream::err, "last words"}}).ok());
  EXPECT_EQ(s->output(other)->at(0).data, "last words");
  EXPECT_EQ(s->call(other)->error, "boom");
}

// The doorbell wakes a waiter in another process at once; without a ring the
// wait lasts its timeout. (Bounds are 10x apart: a check of function, not speed.)
TEST_F(StoreTest, DoorbellWakesAWaiterInAnotherProcess) {
  auto s = ready();
  const uint32_t seen = s->queue_version();
  auto t0 = std::chrono::steady_clock::now();
  s->wait_for_queue(seen, milliseconds(200));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, milliseconds(150));  // nothing rang

  const uint32_t before = s->queue_version();
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto mine = Store::open(path_);
    if (!mine.ok()) _exit(2);
    std::this_thread::sleep_for(milliseconds(100));
    const bool queued = (*mine)->enqueue_call(make_call("p", "r1")).ok();
    mine->reset();  // closing the store sends its last rings (pg_bell.cc)
    _exit(queued ? 0 : 1);
  }
  t0 = std::chrono::steady_clock::now();
  while (s->queue_version() == before &&
         std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20)) {
    s->wait_for_queue(before, std::chrono::seconds(20));
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  EXPECT_NE(s->queue_version(), before);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(s->claim_running("w1", milliseconds(5000), 5)->size(), 1u);
}

TEST_F(StoreTest, FinishingACallRingsItsSlot) {
  auto s = ready();
  auto id = *s->enqueue_call(make_call("p", "r1"));
  ASSERT_EQ(s->claim_running("w1", milliseconds(5000), 1)->size(), 1u);
  const uint32_t seen = s->call_version(id);
  std::thread finisher([&] {
    std::this_thread::sleep_for(milliseconds(50));
    EXPECT_TRUE(s->finish_call(id, "w1", 0, "{}").ok());
  });
  const auto t0 = std::chrono::steady_clock::now();
  s->wait_for_call(id, seen, std::chrono::seconds(20));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  finisher.join();
  EXPECT_EQ(s->call(id)->state, CallState::done);
}

TEST_F(StoreTest, RefusedEnqueueWritesNothing) {
  auto s = ready();
  ASSERT_TRUE(s->ensure_project("q", Environment::staging).ok());
  ASSERT_TRUE(s->enqueue_call(make_call("p", "r1")).ok());
  ASSERT_TRUE(s->enqueue_call(make_call("p", "r-ended")).ok());
  ASSERT_TRUE(s->end_run("r-ended").ok());
  int64_t runs = count("runs"), calls = count("tool_calls");

  struct Case {
    NewCall call;
    std::string error;
  };
  NewCall bad_utf8 = make_call("p", "r-new", {"echo", "\xff\xfe"});
  NewCall no_timeout = make_call("p", "r-new");
  no_timeout.timeout = milliseconds(0);
  const Case cases[] = {
      {make_call("ghost", "r-new"), "project ghost does not exist"},
      {make_call("p", "r-ended"), "run r-ended has ended"},
      {make_call("q", "r1"), "run r1 belongs to project p, not q"},
      {make_call("p", "r-new", {}), "argv is empty"},
      {bad_utf8, "argv[1] is not valid UTF-8"},
      {no_timeout, "timeout must be positive"},
  };
  for (const Case& c : cases) {
    auto id = s->enqueue_call(c.call);
    ASSERT_FALSE(id.ok()) << c.error;
    EXPECT_THAT(id.error().to_string(), HasSubstr("enqueue call in run " + c.call.run));
    EXPECT_THAT(id.error().to_string(), HasSubstr(c.error));
    EXPECT_EQ(count("runs"), runs) << c.error;
    EXPECT_EQ(count("tool_calls"), calls) << c.error;
  }
}

TEST_F(StoreTest, ProjectFilterClaimsOnlyThatProject) {
  auto s = ready();
  ASSERT_TRUE(s->ensure_project("q", Environment::production).ok());
  std::vector<int64_t> of_p, of_q;
  for (int i = 0; i < 3; ++i) {
    of_p.push_back(*s->enqueue_call(make_call("p", "rp")));
    of_q.push_back(*s->enqueue_call(make_call("q", "rq")));
  }
  for (int64_t want : of_q) {
    auto c = s->claim_next("w1", milliseconds(1000), ClaimFilter{"q"});
    ASSERT_TRUE(c.ok() && c->has_value());
    EXPECT_EQ((*c)->id, want);
    EXPECT_EQ((*c)->call.project, "q");
  }
  EXPECT_FALSE(s->claim_next("w1", milliseconds(1000), ClaimFilter{"q"})->has_value());
  auto any = s->claim_next("w1", milliseconds(1000));
  ASSERT_TRUE(any.ok() && any->has_value());
  EXPECT_EQ((*any)->id, of_p[0]);
}

TEST_F(StoreTest, ClaimNeedsARunningWorker) {
  auto s = ready();
  ASSERT_TRUE(s->enqueue_call(make_call("p", "r1")).ok());
  auto unknown = s->claim_next("nobody", milliseconds(1000));
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.error().to_string(), HasSubstr("worker nobody is not registered"));
  ASSERT_TRUE(s->stop_worker("w1").ok());
  auto stopped = s->claim_next("w1", milliseconds(1000));
  ASSERT_FALSE(stopped.ok());
  EXPECT_THAT(stopped.error().to_string(), HasSubstr("worker w1 is stopped"));
  EXPECT_EQ(s->workers()->at(0).state, WorkerState::stopped);
}

// ---- concurrent claims

TEST_F(StoreTest, SixteenConnectionsClaimEveryCallExactlyOnce) {
  constexpr int kThreads = 16, kCalls = 200;
  auto s = ready();
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_TRUE(s->register_worker("t" + std::to_string(t), t, "host").ok());
  }
  std::vector<int64_t> ids = enqueue_many(*s, kCalls);
  s.reset();

  std::vector<std::vector<int64_t>> got(kThreads);
  std::atomic<int> errors{0};
  std::latch opened(kThreads);  // all connections open before anyone claims
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto mine = Store::open(path_);
      opened.arrive_and_wait();
      if (!mine.ok()) return (void)++errors;
      while (true) {
        auto c = (*mine)->claim_next("t" + std::to_string(t), milliseconds(60'000));
        if (!c.ok()) return (void)++errors;
        if (!c->has_value()) return;
        got[t].push_back((*c)->id);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);

  std::multiset<int64_t> claimed;
  for (const auto& g : got) claimed.insert(g.begin(), g.end());
  EXPECT_EQ(claimed.size(), ids.size()) << "a call was claimed twice or lost";
  EXPECT_EQ(std::set<int64_t>(claimed.begin(), claimed.end()),
            std::set<int64_t>(ids.begin(), ids.end()));
  // The store agrees on who holds each call.
  auto store = open();
  for (int t = 0; t < kThreads; ++t) {
    for (int64_t id : got[t]) EXPECT_EQ(store->call(id)->worker_id, "t" + std::to_string(t));
  }
}

// Claims until the queue is empty, after a go byte on `go`; writes the ids to `out`.
[[noreturn]] void claim_in_child(const std::string& path, const std::string& worker, int go,
                                 int out) {
  char byte;
  if (read(go, &byte, 1) != 1) _exit(2);
  auto s = Store::open(path);
  if (!s.ok()) _exit(3);
  while (true) {
    auto c = (*s)->claim_next(worker, milliseconds(60'000));
    if (!c.ok()) _exit(4);
    if (!c->has_value()) break;
    int64_t id = (*c)->id;
    if (write(out, &id, sizeof id) != sizeof id) _exit(5);
  }
  s->reset();
  _exit(0);
}

// A second Store on the same SQLite file in one process (a worker's lease
// keeper has its own connection) must keep the first's locks: opening and
// closing the file to make it private dropped every POSIX lock the process
// held on it, so another process closing its connection thought itself the
// last, checkpointed and deleted the WAL under the first Store, which then
// read pages from the deleted WAL: what others wrote after never showed.
// (SQLite only: PostgreSQL has no file.)
TEST(StoreSqliteFile, ASecondStoreInTheProcessKeepsTheFirstsLocks) {
  char tmpl[] = "/tmp/rf-store-locks-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl, file = dir + "/ringfence.db";
  {
    auto first = Store::open(file);
    ASSERT_TRUE(first.ok()) << first.error().to_string();
    ASSERT_TRUE((*first)->ensure_project("p", Environment::development).ok());
    auto second = Store::open(file);
    ASSERT_TRUE(second.ok()) << second.error().to_string();
    // Other processes: one looks and leaves, one writes and leaves.
    auto python = [&](const std::string& sql) {
      const std::string cmd = "python3 -c \"import sqlite3; c = sqlite3.connect('" + file +
                              "'); c.execute(\\\"" + sql + "\\\"); c.commit(); c.close()\"";
      return std::system(cmd.c_str());
    };
    ASSERT_EQ(python("SELECT 1"), 0);
    ASSERT_EQ(python("UPDATE projects SET environment = 'production' WHERE id = 'p'"), 0);
    auto seen = (*first)->project("p");
    ASSERT_TRUE(seen.ok()) << seen.error().to_string();
    EXPECT_EQ(seen->environment, Environment::production);
    EXPECT_TRUE(std::filesystem::exists(file + "-wal"));
  }
  std::filesystem::remove_all(dir);
}

TEST_F(StoreTest, TwoProcessesNeverClaimTheSameCall) {
  constexpr int kCalls = 200;
  auto s = ready();
  ASSERT_TRUE(s->register_worker("w2", 200, "host-a").ok());
  std::vector<int64_t> ids = enqueue_many(*s, kCalls);
  s.reset();  // no connection crosses fork()

  int go[2];
  ASSERT_EQ(pipe2(go, O_CLOEXEC), 0);
  int out[2][2];
  pid_t pids[2];
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(pipe2(out[i], O_CLOEXEC), 0);
    pids[i] = fork();
    ASSERT_GE(pids[i], 0);
    if (pids[i] == 0) {
      close(go[1]);
      close(out[i][0]);
      claim_in_child(path_, i == 0 ? "w1" : "w2", go[0], out[i][1]);
    }
    close(out[i][1]);
  }
  close(go[0]);
  ASSERT_EQ(write(go[1], "gg", 2), 2);  // both start at once
  close(go[1]);

  std::multiset<int64_t> claimed;
  size_t per_child[2] = {0, 0};
  for (int i = 0; i < 2; ++i) {
    int64_t id;
    while (read(out[i][0], &id, sizeof id) == sizeof id) {
      claimed.insert(id);
      ++per_child[i];
    }
    close(out[i][0]);
    int status = 0;
    ASSERT_EQ(waitpid(pids[i], &status, 0), pids[i]);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child " << i << ": " << status;
  }
  EXPECT_EQ(claimed.size(), ids.size()) << "a call was claimed twice or lost";
  EXPECT_EQ(std::set<int64_t>(claimed.begin(), claimed.end()),
            std::set<int64_t>(ids.begin(), ids.end()));
  EXPECT_EQ(per_child[0] + per_child[1], static_cast<size_t>(kCalls));
}

// ---- leases

TEST_F(StoreTest, ExpiredLeaseInterruptsTheCallForGood) {
  auto s = ready();
  ASSERT_TRUE(s->register_worker("w2", 200, "host-b").ok());
  int64_t id = *s->enqueue_call(make_call("p", "r1"));
  ASSERT_TRUE(s->claim_next("w1", milliseconds(1000))->has_value());
  ASSERT_TRUE(s->mark_running(id, "w1").ok());

  clock_ += 1500;  // w1 stopped heartbeating
  EXPECT_EQ(*s->interrupt_orphaned_calls(clock_), 1);
  EXPECT_EQ(*s->interrupt_orphaned_calls(clock_), 0);
  auto v = s->call(id);
  EXPECT_EQ(v->state, CallState::interrupted);
  EXPECT_EQ(v->error, "worker w1 stopped heartbeating");
  // Not queued again: tool calls are not idempotent.
  EXPECT_FALSE(s->claim_next("w2", milliseconds(1000))->has_value());

  ASSERT_TRUE(s->heartbeat("w1", milliseconds(1000)).ok());  // too late to revive it
  auto refused = s->finish_call(id, "w1", 0, "{}");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kLeaseLost);
  EXPECT_THAT(refused.error().to_string(),
              HasSubstr("call " + std::to_string(id) + " is not held by worker w1 (lease lost)"));
  EXPECT_THAT(refused.error().to_string(), HasSubstr("it is interrupted"));
  EXPECT_FALSE(s->append_output(id, "w1", Stream::out, "x").ok());
  EXPECT_FALSE(s->fail_call(id, "w1", "boom").ok());
  EXPECT_EQ(s->call(id)->state, CallState::interrupted);
  EXPECT_EQ(count("call_output"), 0);
}

// Issue 40: a worker starved of CPU past its lease, whose call nobody swept,
// still holds it: its late heartbeat takes the lease again, and it finishes
// the call. A worker's own sweep never takes its own calls.
TEST_F(StoreTest, ALeaseThatRanOutIsTheWorkersUntilASweepEndsIt) {
  auto s = ready();
  int64_t a = *s->enqueue_call(make_call("p", "r1"));
  int64_t b = *s->enqueue_call(make_call("p", "r1"));
  ASSERT_TRUE(s->claim_next("w1", milliseconds(1000))->has_value());
  ASSERT_TRUE(s->claim_next("w1", milliseconds(1000))->has_value());
  ASSERT_TRUE(s->mark_running(a, "w1").ok());

  clock_ += 5000;  // starved: no heartbeat for five leases
  ASSERT_TRUE(s->append_output(a, "w1", Stream::out, "late\n").ok());
  // Its own sweep spares it; its heartbeat takes both leases again.
  EXPECT_EQ(*s->interrupt_orphaned_calls(clock_, "w1"), 0);
  ASSERT_TRUE(s->heartbeat("w1", milliseconds(1000)).ok());
  EXPECT_EQ(*s->interrupt_orphaned_calls(clock_), 0);
  EXPECT_EQ(scalar("SELECT lease_expires_at FROM tool_calls WHERE id = " + std::to_string(b)),
            clock_.load() + 1000);
  ASSERT_TRUE(s->finish_call(a, "w1", 0, "{}").ok());
  EXPECT_EQ(s->call(a)->state, CallState::done);

  clock_ += 5000;  // starved again, and this time another worker sweeps first
  EXPECT_EQ(*s->interrupt_orphaned_calls(clock_), 1);
  auto lost = s->finish_call(b, "w1", 0, "{}");
  ASSERT_FALSE(lost.ok());
  EXPECT_EQ(lost.error().code, ErrorCode::kLeaseLost);
  EXPECT_EQ(s->call(b)->state, CallState::interrupted);
}

// Issue 40: a paused worker past its lease, replaced by a new process under
// the same id, is fenced: its stop leaves the new process's row and calls
// alone, and every write it tries says "fenced".
TEST_F(StoreTest, AFencedProcessStoppingLeavesItsSuccessorAlone) {
  auto old_process = ready();
  auto successor = Store::open(path_);
  ASSERT_TRUE(successor.ok()) << successor.error().to_string();
  Store& s = **successor;
  s.set_clock([this] { return clock_.load(); });
  ASSERT_TRUE(s.register_worker("w1", 300, "host-a").ok());
  int64_t id = *s.enqueue_call(make_call("p", "r1"));
  ASSERT_TRUE(s.claim_next("w1", milliseconds(60'000))->has_value());
  ASSERT_TRUE(s.mark_running(id, "w1").ok());

  auto stop = old_process->stop_worker("w1");
  ASSERT_FALSE(stop.ok());
  EXPECT_EQ(stop.error().code, ErrorCode::kFenced);
  EXPECT_THAT(stop.error().to_string(), HasSubstr("fenced, another process serves as w1 now"));
  auto beat = old_process->heartbeat("w1", milliseconds(1000));
  ASSERT_FALSE(beat.ok());
  EXPECT_EQ(beat.error().code, ErrorCode::kFenced);
  EXPECT_EQ(old_process->finish_call(id, "w1", 0, "{}").error().code, ErrorCode::kFenced);

  EXPECT_EQ(s.worker("w1")->value().state, WorkerState::running);
  EXPECT_EQ(s.call(id)->state, CallState::running);
  ASSERT_TRUE(s.heartbeat("w1", milliseconds(1000)).ok());
  ASSERT_TRUE(s.finish_call(id, "w1", 0, "{}").ok());
  // The successor's own stop goes through.
  ASSERT_TRUE(s.stop_worker("w1").ok());
  EXPECT_EQ(s.worker("w1")->value().state, WorkerState::stopped);
}

TEST_F(StoreTest, HeartbeatExtendsTheLeasesOfTheWorker) {
  auto s = ready();
  ASSERT_TRUE(s->register_worker("w2", 200, "host-b").ok());
  int64_t a = *s->enqueue_call(make_call("p", "r1"));
  int64_t b = *s->enqueue_call(make_call("p", "r1"));
  ASSERT_TRUE(s->claim_next("w1", milliseconds(1000))->has_value());
  ASSERT_TRUE(s->claim_next("w2", milliseconds(1000))->has_value());
  ASSERT_TRUE(s->mark_running(a, "w1").ok());

  clock_ += 800;
  ASSERT_TRUE(s->heartbeat("w1", milliseconds(1000)).ok());
  EXPECT_EQ(s->workers()->at(0).heartbeat_at, clock_.load());
  EXPECT_THAT(s->heartbeat("w1", milliseconds(0)).error().to_string(),
              HasSubstr("the lease must be positive"));
  clock_ += 700;  // w1's lease runs to +1800, w2's ended at +1000
  EXPECT_EQ(*s->interrupt_orphaned_calls(clock_), 1);
  EXPECT_EQ(s->call(a)->state, CallState::running);
  EXPECT_EQ(s->call(b)->state, CallState::interrupted);
  EXPECT_EQ(s->call(b)->error, "worker w2 stopped heartbeating");
  EXPECT_TRUE(s->finish_call(a, "w1", 0, "{}").ok());
  auto wrong = s->mark_running(b, "w1");
  EXPECT_FALSE(wrong.ok());
}

TEST_F(StoreTest, RestartedOrStoppedWorkerLosesItsCalls) {
  auto s = ready();
  int64_t a = *s->enqueue_call(make_call("p", "r1"));
  int64_t b = *s->enqueue_call(make_call("p", "r1"));
  ASSERT_TRUE(s->claim_next("w1", milliseconds(60'000))->has_value());
  ASSERT_TRUE(s->register_worker("w1", 101, "host-a").ok());
  EXPECT_EQ(*s->interrupt_calls_of_worker("w1"), 1);
  EXPECT_EQ(s->call(a)->error, "worker w1 restarted");
  ASSERT_TRUE(s->claim_next("w1", milliseconds(60'000))->has_value());
  ASSERT_TRUE(s->stop_worker("w1").ok());
  EXPECT_EQ(s->call(b)->state, CallState::interrupted);
  EXPECT_EQ(s->call(b)->error, "worker w1 stopped");
  EXPECT_THAT(s->stop_worker("ghost").error().to_string(),
              HasSubstr("worker ghost is not registered"));
}

// ---- runs

TEST_F(StoreTest, EndRunFailsItsQueuedCalls) {
  auto s = ready();
  int64_t held = *s->enqueue_call(make_call("p", "r1"));
  int64_t queued = *s->enqueue_call(make_call("p", "r1"));
  int64_t other = *s->enqueue_call(make_call("p", "r2"));
  ASSERT_TRUE(s->claim_next("w1", milliseconds(60'000))->has_value());

  ASSERT_TRUE(s->end_run("r1").ok());
  ASSERT_TRUE(s->end_run("r1").ok());  // again: a no-op
  EXPECT_EQ(s->call(queued)->state, CallState::failed);
  EXPECT_EQ(s->call(queued)->error, "run ended before the call started");
  EXPECT_EQ(s->call(held)->state, CallState::claimed);  // goes on
  EXPECT_TRUE(s->finish_call(held, "w1", 0, "{}").ok());
  EXPECT_EQ(s->call(other)->state, CallState::queued);
  auto run = s->run("r1");
  EXPECT_EQ(run->state, RunState::ended);
  EXPECT_EQ(run->ended_at, clock_.load());
  EXPECT_EQ(run->calls.size(), 2u);
  EXPECT_THAT(s->end_run("nope").error().to_string(), HasSubstr("run nope does not exist"));
  EXPECT_THAT(s->run("nope").error().to_string(), HasSubstr("run nope does not exist"));
}

TEST_F(StoreTest, EndedRunsAreFoundAmongManyInOneQuery) {
  auto s = ready();
  std::vector<std::string> asked;
  for (int i = 0; i < 3000; ++i) {
    const std::string run = "run-" + std::to_string(i);
    if (i < 30) {
      ASSERT_TRUE(s->enqueue_call(make_call("p", run)).ok());
    }
    asked.push_back(run);
  }
  ASSERT_TRUE(s->end_run("run-3").ok());
  ASSERT_TRUE(s->end_run("run-17").ok());
  ASSERT_TRUE(s->enqueue_call(make_call("p", "not-asked")).ok());
  ASSERT_TRUE(s->end_run("not-asked").ok());
  asked.push_back("it's \"odd\"");  // unknown, and quoted: not an error
  auto ended = s->ended_runs(asked);
  ASSERT_TRUE(ended.ok()) << ended.error().to_string();
  std::sort(ended->begin(), ended->end());
  EXPECT_EQ(*ended, (std::vector<std::string>{"run-17", "run-3"}));
  EXPECT_TRUE(s->ended_runs({})->empty());
}

// ---- sandboxes and events

TEST_F(StoreTest, SandboxesLiveUntilDestroyed) {
  auto s = open();
  SandboxRow row{"sb1", "native", "p", "r1", "per_run", "w1", 4242, SandboxState::pooled};
  ASSERT_TRUE(s->record_sandbox(row).ok());
  row.id = "sb2";
  ASSERT_TRUE(s->record_sandbox(row).ok());
  EXPECT_THAT(s->record_sandbox(row).error().to_string(),
              HasSubstr("sandbox sb2 is already recorded"));
  row.id = "sb3";
  row.mode = "sometimes";
  EXPECT_THAT(s->record_sandbox(row).error().to_string(),
              HasSubstr("unknown sandbox mode \"sometimes\""));

  ASSERT_TRUE(s->set_sandbox_state("sb1", SandboxState::active).ok());
  ASSERT_TRUE(s->set_sandbox_state("sb2", SandboxState::destroyed).ok());
  auto live = s->live_sandboxes();
  ASSERT_TRUE(live.ok()) << live.error().to_string();
  ASSERT_EQ(live->size(), 1u);
  EXPECT_EQ((*live)[0].id, "sb1");
  EXPECT_EQ((*live)[0].state, SandboxState::active);
  EXPECT_EQ((*live)[0].host_pid, 4242);
  EXPECT_EQ((*live)[0].created_at, clock_.load());
  EXPECT_THAT(s->set_sandbox_state("sb2", SandboxState::active).error().to_string(),
              HasSubstr("sandbox sb2 is destroyed"));
  EXPECT_THAT(s->set_sandbox_state("sb9", SandboxState::active).error().to_string(),
              HasSubstr("sandbox sb9 does not exist"));
}

TEST_F(StoreTest, SandboxBatchesAreAllOrNothingAndDeadWorkersLoseTheirs) {
  auto s = ready();
  auto row = [](const std::string& id, const std::string& worker) {
    SandboxRow r;
    r.id = id;
    r.backend = "native";
    r.project_id = "p";
    r.mode = "per_tool";
    r.worker_id = worker;
    return r;
  };
  ASSERT_TRUE(s->record_sandboxes({row("a", "w1"), row("b", "w1"), row("c", "w2")}, {}).ok());
  ASSERT_TRUE(s->record_sandboxes({row("d", "w1")}, {"a"}).ok());
  EXPECT_EQ(s->live_sandboxes()->size(), 3u);
  // A duplicate refuses the whole batch: "e" is not written, "b" stays live.
  auto dup = s->record_sandboxes({row("e", "w1"), row("c", "w1")}, {"b"});
  ASSERT_FALSE(dup.ok());
  EXPECT_THAT(dup.error().to_string(), HasSubstr("sandbox c is already recorded"));
  EXPECT_EQ(s->live_sandboxes()->size(), 3u);
  EXPECT_EQ(*s->destroy_sandboxes_of_worker("w1"), 2);
  auto live = s->live_sandboxes();
  ASSERT_EQ(live->size(), 1u);
  EXPECT_EQ(live->front().id, "c");
  EXPECT_EQ(*s->destroy_sandboxes_of_worker("w1"), 0);
}

TEST_F(StoreTest, EventsFilterByRunAndCall) {
  auto s = open();
  Event e;
  e.kind = "call.enqueued";
  e.run_id = "r1";
  e.call_id = 7;
  e.detail_json = R"({"argv":["echo"]})";
  int64_t first = *s->append_event(e);
  e.call_id = 8;
  ASSERT_TRUE(s->append_event(e).ok());
  e.run_id = "r2";
  e.call_id = std::nullopt;
  e.detail_json = std::nullopt;
  ASSERT_TRUE(s->append_event(e).ok());
  e.detail_json = "{oops";
  EXPECT_THAT(s->append_event(e).error().to_string(), HasSubstr("detail is not valid JSON"));

  EXPECT_EQ(s->events({})->size(), 3u);
  EXPECT_EQ(s->events({.run_id = "r1"})->size(), 2u);
  auto of_call = s->events({.call_id = 7});
  ASSERT_EQ(of_call->size(), 1u);
  EXPECT_EQ((*of_call)[0].id, first);
  EXPECT_EQ((*of_call)[0].detail_json, R"({"argv":["echo"]})");
  EXPECT_EQ((*of_call)[0].at, clock_.load());
  EXPECT_EQ(s->events({.run_id = "r1", .after_id = first})->size(), 1u);
  EXPECT_EQ(s->events({.limit = 2})->size(), 2u);
}

}  // namespace
}  // namespace rf::store
