// A client giving up on a queued call (`call --wait-timeout`) against a worker
// claiming it: exactly one wins, and a cancelled call never runs. Also which
// workers serve a project, and the v2 → v3 migration that made room for both.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <latch>
#include <thread>

#include "store/db.h"
#include "store/migrations.h"
#include "store/store.h"
#include "support/store_fixture.h"
#include "support/store_target.h"

namespace rf::store {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;

class StoreCancel : public rf::testing::StoreFixture {
 protected:
  StoreCancel() : StoreFixture("rf-cancel") {}

  // Project p, worker w1 registered.
  std::unique_ptr<Store> ready() {
    auto s = open();
    EXPECT_TRUE(s->ensure_project("p", Environment::development).ok());
    EXPECT_TRUE(s->register_worker("w1", 100, "host-a").ok());
    return s;
  }
  static int64_t enqueue(Store& s, const std::string& run = "r1") {
    NewCall c;
    c.project = "p";
    c.run = run;
    c.argv = {"echo", "hi"};
    auto id = s.enqueue_call(c);
    EXPECT_TRUE(id.ok()) << id.error().to_string();
    return id.ok() ? *id : 0;
  }
};

TEST_F(StoreCancel, ACancelledCallIsNeverClaimed) {
  auto s = ready();
  const int64_t id = enqueue(*s);
  clock_ += 250;
  auto cancelled = s->cancel_queued_call(id, "no worker claimed it within --wait-timeout 2s");
  ASSERT_TRUE(cancelled.ok()) << cancelled.error().to_string();
  EXPECT_TRUE(*cancelled);
  auto v = s->call(id);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->state, CallState::cancelled);
  EXPECT_EQ(v->error, "no worker claimed it within --wait-timeout 2s");
  EXPECT_EQ(v->finished_at, clock_.load());
  EXPECT_FALSE(v->claimed_at.has_value());
  EXPECT_FALSE(v->worker_id.has_value());
  EXPECT_EQ(to_string(v->state), "cancelled");
  // Neither way of claiming takes it, and it shows in its run.
  EXPECT_FALSE(s->claim_next("w1", milliseconds(5000))->has_value());
  EXPECT_TRUE(s->claim_running("w1", milliseconds(5000), 8)->empty());
  EXPECT_EQ(s->run("r1")->calls.at(0).state, CallState::cancelled);
  // Cancelling again changes nothing; ending the run leaves it cancelled.
  EXPECT_FALSE(*s->cancel_queued_call(id, "again"));
  ASSERT_TRUE(s->end_run("r1").ok());
  EXPECT_EQ(s->call(id)->error, "no worker claimed it within --wait-timeout 2s");
  EXPECT_EQ(s->call(id)->state, CallState::cancelled);
}

TEST_F(StoreCancel, ACallAWorkerClaimedIsNotCancelled) {
  auto s = ready();
  const int64_t claimed = enqueue(*s);
  ASSERT_TRUE(s->claim_next("w1", milliseconds(5000))->has_value());
  const int64_t running = enqueue(*s);
  ASSERT_EQ(s->claim_running("w1", milliseconds(5000), 1)->size(), 1u);
  const int64_t done = enqueue(*s);
  ASSERT_EQ(s->claim_running("w1", milliseconds(5000), 1)->size(), 1u);
  ASSERT_TRUE(s->finish_call(done, "w1", 0, "{}").ok());
  for (int64_t id : {claimed, running, done}) {
    const CallState before = s->call(id)->state;
    auto cancelled = s->cancel_queued_call(id, "too late");
    ASSERT_TRUE(cancelled.ok()) << cancelled.error().to_string();
    EXPECT_FALSE(*cancelled) << id;
    EXPECT_EQ(s->call(id)->state, before) << id;
    EXPECT_NE(s->call(id)->error, "too late") << id;
  }
  // The worker still holds what it claimed.
  EXPECT_TRUE(s->mark_running(claimed, "w1").ok());
  EXPECT_TRUE(s->finish_call(running, "w1", 0, "{}").ok());
  auto missing = s->cancel_queued_call(999, "x");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().to_string(), "cancel call 999: call 999 does not exist");
}

// The client's cancel and a worker's claim, at the same instant, from two
// connections: every time exactly one of them gets the call, and a call the
// cancel got is never taken later.
TEST_F(StoreCancel, CancelAndClaimAtTheSameInstantExactlyOneWins) {
  auto setup = ready();
  auto worker = open();
  auto client = open();
  constexpr int kRounds = 300;
  int cancels = 0, claims = 0;
  for (int round = 0; round < kRounds; ++round) {
    const int64_t id = enqueue(*client, "r" + std::to_string(round));
    std::latch start(2);
    Result<std::vector<ClaimedCall>> batch = std::vector<ClaimedCall>{};
    Result<bool> cancelled = false;
    std::thread claimer([&] {
      start.arrive_and_wait();
      batch = worker->claim_running("w1", milliseconds(5000), 4);
    });
    std::thread canceller([&] {
      start.arrive_and_wait();
      cancelled = client->cancel_queued_call(id, "gave up");
    });
    claimer.join();
    canceller.join();
    ASSERT_TRUE(batch.ok()) << batch.error().to_string();
    ASSERT_TRUE(cancelled.ok()) << cancelled.error().to_string();
    const bool claimed = batch->size() == 1 && (*batch)[0].id == id;
    ASSERT_LE(batch->size(), 1u);
    ASSERT_NE(claimed, *cancelled)
        << "round " << round << ": claimed " << claimed << ", cancelled " << *cancelled;
    const CallState state = client->call(id)->state;
    if (*cancelled) {
      ++cancels;
      ASSERT_EQ(state, CallState::cancelled);
      // It stays out of reach: a later claim finds nothing.
      ASSERT_TRUE(worker->claim_running("w1", milliseconds(5000), 4)->empty());
      ASSERT_EQ(client->call(id)->state, CallState::cancelled);
    } else {
      ++claims;
      ASSERT_EQ(state, CallState::running);
      ASSERT_TRUE(worker->finish_call(id, "w1", 0, "{}").ok());
    }
  }
  EXPECT_EQ(cancels + claims, kRounds);
  RecordProperty("cancels", cancels);
  RecordProperty("claims", claims);
}

TEST_F(StoreCancel, WorkersServingAProjectAreRunningFreshAndUnpinnedOrPinnedToIt) {
  auto s = open();
  ASSERT_TRUE(s->register_worker("any", 1, "h").ok());
  ASSERT_TRUE(s->register_worker("mine", 2, "h", std::string("p")).ok());
  ASSERT_TRUE(s->register_worker("theirs", 3, "h", std::string("q")).ok());
  ASSERT_TRUE(s->register_worker("stopped", 4, "h").ok());
  ASSERT_TRUE(s->stop_worker("stopped").ok());
  clock_ -= 20'000;
  ASSERT_TRUE(s->register_worker("stale", 5, "h").ok());  // last beat 20 s ago
  clock_ += 20'000;
  auto names = [&](const std::string& project) {
    std::vector<std::string> out;
    auto rows = s->workers_serving(project, clock_ - 10'000);
    EXPECT_TRUE(rows.ok()) << rows.error().to_string();
    for (const auto& w : *rows) out.push_back(w.id);
    return out;
  };
  EXPECT_EQ(names("p"), (std::vector<std::string>{"any", "mine"}));
  EXPECT_EQ(names("q"), (std::vector<std::string>{"any", "theirs"}));
  EXPECT_EQ(names("r"), (std::vector<std::string>{"any"}));
  // A heartbeat makes the stale one live again; a fallback out of per_worker unpins.
  ASSERT_TRUE(s->heartbeat("stale", milliseconds(30'000)).ok());
  ASSERT_TRUE(s->set_worker_project("theirs", std::nullopt).ok());
  EXPECT_EQ(names("r"), (std::vector<std::string>{"any", "stale", "theirs"}));
  // Registering again replaces the pin.
  ASSERT_TRUE(s->register_worker("any", 1, "h", std::string("q")).ok());
  EXPECT_EQ(names("p"), (std::vector<std::string>{"mine", "stale", "theirs"}));
  auto rows = s->workers();
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->front().id, "any");
  EXPECT_EQ(rows->front().project, "q");
  auto nobody = s->set_worker_project("nobody", std::nullopt);
  ASSERT_FALSE(nobody.ok());
  EXPECT_EQ(nobody.error().to_string(),
            "set the project of worker nobody: worker nobody is not registered");
}

// A store written by the previous version keeps its rows, output and
// references through the rebuild of tool_calls.
TEST_F(StoreCancel, VersionTwoFilesMigrateKeepingEveryRow) {
  auto db = Db::open(path_);
  ASSERT_TRUE(db.ok());
  const Migration v2[] = {migrations()[0], migrations()[1]};
  ASSERT_TRUE(migrate(*db, v2).ok());
  const bool pg = rf::testing::store_tests_on_postgres();
  // A blob literal in each engine's SQL.
  auto bytes = [pg](const std::string& hex) {
    return pg ? "decode('" + hex + "', 'hex')" : "x'" + hex + "'";
  };
  ASSERT_TRUE(db->exec("INSERT INTO projects VALUES ('p', 'development', 1);"
                       "INSERT INTO runs VALUES ('r1', 'p', 'open', 1, NULL);"
                       "INSERT INTO workers VALUES ('w1', 7, 'h', 1, 1, 'running');"
                       "INSERT INTO tool_calls (run_id, project_id, argv_json, env_json, cwd, "
                       "stdin, timeout_ms, state, worker_id, lease_expires_at, exit_code, "
                       "result_json, enqueued_at, claimed_at, finished_at, sandbox_image) "
                       "VALUES ('r1', 'p', '[\"echo\",\"old\"]', '{}', '', " +
                       bytes("00") +
                       ", 1000, 'done', 'w1', 5, 0, '{}', 1, 2, 3, 'img');"
                       "INSERT INTO call_output VALUES (1, 1, 1, " +
                       bytes("6f6c640a") + ");")
                  .ok());
  ASSERT_TRUE(migrate(*db).ok());
  auto version = schema_version(*db);
  ASSERT_TRUE(version.ok());
  EXPECT_EQ(*version, migrations().back().version);
  if (!pg) {
    // Foreign keys are on again for the connection that migrated, and hold.
    auto fk = db->prepare("PRAGMA foreign_keys");
    ASSERT_TRUE(fk.ok() && *fk->step());
    EXPECT_EQ(fk->int64(0), 1);
    auto check = db->prepare("PRAGMA foreign_key_check");
    ASSERT_TRUE(check.ok());
    EXPECT_FALSE(*check->step());
  }
  auto orphan = db->exec("INSERT INTO call_output VALUES (999, 1, 1, " + bytes("00") + ")");
  ASSERT_FALSE(orphan.ok());
  EXPECT_THAT(orphan.error().to_string(),
              HasSubstr(pg ? "violates foreign key constraint" : "FOREIGN KEY"));
  // The indexes came back with the table (SQLite rebuilds it).
  auto indexes = db->prepare(
      pg ? "SELECT count(*) FROM pg_indexes WHERE schemaname = current_schema() AND "
           "tablename = 'tool_calls' AND indexname LIKE 'tool_calls_%' AND "
           "indexname <> 'tool_calls_pkey'"
         : "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = 'tool_calls' "
           "AND name LIKE 'tool_calls_%'");
  ASSERT_TRUE(indexes.ok() && *indexes->step());
  EXPECT_EQ(indexes->int64(0), 5);

  auto s = open();
  ASSERT_NE(s, nullptr);
  auto v = s->call(1);
  ASSERT_TRUE(v.ok()) << v.error().to_string();
  EXPECT_EQ(v->argv, (std::vector<std::string>{"echo", "old"}));
  EXPECT_EQ(v->state, CallState::done);
  EXPECT_EQ(v->exit_code, 0);
  EXPECT_EQ(v->finished_at, 3);
  EXPECT_EQ(s->output(1)->at(0).data, "old\n");
  EXPECT_EQ(s->workers()->at(0).project, std::nullopt);
  // New calls get the next id, and can be cancelled.
  const int64_t next = enqueue(*s);
  EXPECT_EQ(next, 2);
  EXPECT_TRUE(*s->cancel_queued_call(next, "x"));
}

}  // namespace
}  // namespace rf::store
