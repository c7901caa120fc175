// The store's PostgreSQL engine on its own: what the shared store suites
// (run on both engines, tests/CMakeLists.txt) cannot show. Each test uses a
// cluster of the process's own (support/postgres_server.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "store/db.h"
#include "store/store.h"
#include "support/store_target.h"

namespace rf::store {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class StorePostgres : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(pg().ok()) << pg().error();
    uri_ = pg().fresh_schema_uri();
    ASSERT_FALSE(uri_.empty());
  }
  static rf::testing::PostgresServer& pg() { return rf::testing::shared_postgres(); }
  std::string uri_;
};

TEST_F(StorePostgres, APasswordInTheUriIsInNoError) {
  const std::string uri = "postgresql://rf:Hunter2Secret@127.0.0.1:" + std::to_string(pg().port()) +
                          "/no_such_database";
  auto db = Db::open(uri);
  ASSERT_FALSE(db.ok());
  const std::string e = db.error().to_string();
  EXPECT_THAT(e, Not(HasSubstr("Hunter2Secret")));
  EXPECT_THAT(e, HasSubstr("postgresql://rf:***@127.0.0.1:"));
  EXPECT_THAT(e, HasSubstr("no_such_database"));
  EXPECT_EQ(engine::redact_uri("postgres://h/db?user=u&password=p%20w&sslmode=require"),
            "postgres://h/db?user=u&password=***&sslmode=require");
}

// Issue 40, 4: libpq's keyword strings are PostgreSQL (never a SQLite file
// named after them), and their password is hidden like a URI's.
TEST(StoreTarget, AKeywordStringIsPostgresAndItsPasswordIsHidden) {
  EXPECT_TRUE(is_postgres_uri("host=/run/pg dbname=rf"));
  EXPECT_TRUE(is_postgres_uri("  dbname = rf"));
  EXPECT_TRUE(is_postgres_uri("postgresql://rf@/x"));
  EXPECT_FALSE(is_postgres_uri("/var/lib/rf/ringfence.db"));
  EXPECT_FALSE(is_postgres_uri("sqlite:/x/a=b.db"));
  EXPECT_FALSE(is_postgres_uri("ringfence.db"));
  EXPECT_FALSE(is_postgres_uri("Host=x"));
  EXPECT_EQ(engine::redact_uri("host=/run/pg password=PW dbname=x"),
            "host=/run/pg password=*** dbname=x");
  EXPECT_EQ(engine::redact_uri("host=h password = 'P W\\' x' dbname=x"),
            "host=h password = *** dbname=x");
  EXPECT_EQ(engine::redact_uri("password=PW"), "password=***");
  EXPECT_TRUE(holds_password("host=h password=PW"));
  EXPECT_TRUE(holds_password("postgres://u:PW@h/db"));
  EXPECT_FALSE(holds_password("host=h dbname=x"));
  EXPECT_FALSE(holds_password("/tmp/password=x.db"));
}

TEST_F(StorePostgres, TextWithANulByteIsRefusedNamingTheParameter) {
  auto s = Store::open(uri_);
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  auto done = (*s)->ensure_project(std::string("p\0q", 3), Environment::development);
  ASSERT_FALSE(done.ok());
  EXPECT_THAT(done.error().to_string(),
              HasSubstr("bind parameter 1 of \"SELECT environment FROM projects WHERE id = ?1\": "
                        "the value holds a NUL byte, which PostgreSQL text cannot"));
}

// Statements are prepared once per connection: the same SQL a thousand times
// leaves one prepared statement on the server.
TEST_F(StorePostgres, EachStatementIsPreparedOncePerConnection) {
  auto s = Store::open(uri_);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->ensure_project("p", Environment::development).ok());
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE((*s)->project("p").ok());
  auto count = (*s)->locked([](Db& db) -> Result<int64_t> {
    auto st = db.prepare(
        "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE '%FROM projects%'");
    if (!st.ok()) return st.take_error();
    auto row = st->step();
    if (!row.ok()) return row.take_error();
    return st->int64(0);
  });
  ASSERT_TRUE(count.ok()) << count.error().to_string();
  EXPECT_GE(*count, 1);
  EXPECT_LE(*count, 3);  // the read, and the writes' own statements
}

// The server goes away and comes back: an open store says so while it is
// gone, and works again once it is back, without being opened again.
TEST_F(StorePostgres, AStoreReconnectsWhenTheServerIsBack) {
  rf::testing::PostgresServer own;
  ASSERT_TRUE(own.ok()) << own.error();
  const std::string uri = own.fresh_schema_uri();
  auto s = Store::open(uri);
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  ASSERT_TRUE((*s)->ensure_project("p", Environment::development).ok());
  ASSERT_TRUE((*s)->register_worker("w1", 1, "h").ok());

  own.stop_server();
  auto lost = (*s)->project("p");
  ASSERT_FALSE(lost.ok());
  EXPECT_THAT(lost.error().to_string(), HasSubstr("read project p"));

  own.start();
  ASSERT_TRUE(own.ok()) << own.error();
  auto back = (*s)->project("p");
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  NewCall c;
  c.project = "p";
  c.run = "r1";
  c.argv = {"echo", "again"};
  auto id = (*s)->enqueue_call(c);
  ASSERT_TRUE(id.ok()) << id.error().to_string();
  auto claimed = (*s)->claim_next("w1", std::chrono::milliseconds(5000));
  ASSERT_TRUE(claimed.ok() && *claimed) << (claimed.ok() ? "none" : claimed.error().to_string());
  EXPECT_EQ((*claimed)->id, *id);
}

// A claim locks only the rows it takes: it goes on while another connection
// holds the write lock (a long write elsewhere), where an enqueue waits.
TEST_F(StorePostgres, AClaimDoesNotWaitForTheWriteLock) {
  auto s = Store::open(uri_);
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  ASSERT_TRUE((*s)->ensure_project("p", Environment::development).ok());
  ASSERT_TRUE((*s)->register_worker("w1", 1, "h").ok());
  NewCall c;
  c.project = "p";
  c.run = "r1";
  c.argv = {"true"};
  auto id = (*s)->enqueue_call(c);
  ASSERT_TRUE(id.ok());

  auto other = Db::open(uri_, DbOptions{std::chrono::milliseconds(300)});
  ASSERT_TRUE(other.ok());
  auto held = Transaction::begin(*other, Transaction::Kind::write);
  ASSERT_TRUE(held.ok()) << held.error().to_string();

  const auto t0 = std::chrono::steady_clock::now();
  auto claimed = (*s)->claim_running("w1", std::chrono::milliseconds(5000), 4);
  ASSERT_TRUE(claimed.ok()) << claimed.error().to_string();
  ASSERT_EQ(claimed->size(), 1u);
  EXPECT_EQ(claimed->front().id, *id);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  // A write of the same store waits for the lock (up to its busy timeout,
  // 300 ms for this connection) and says so.
  auto third = Db::open(uri_, DbOptions{std::chrono::milliseconds(300)});
  ASSERT_TRUE(third.ok());
  auto blocked = Transaction::begin(*third, Transaction::Kind::write);
  ASSERT_FALSE(blocked.ok());
  EXPECT_THAT(blocked.error().to_string(), HasSubstr("lock timeout"));
  ASSERT_TRUE(held->commit().ok());
}

// LISTEN/NOTIFY: a waiter on one connection wakes when another, with a bell
// of its own (as on another host), enqueues: well before its timeout.
TEST_F(StorePostgres, AnEnqueueOnAnotherConnectionWakesAWaiterAtOnce) {
  auto waiter = Store::open(uri_);
  auto writer = Store::open(uri_);
  ASSERT_TRUE(waiter.ok() && writer.ok());
  ASSERT_TRUE((*writer)->ensure_project("p", Environment::development).ok());
  const uint32_t seen = (*waiter)->queue_version();
  std::thread enqueue([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    NewCall c;
    c.project = "p";
    c.run = "r1";
    c.argv = {"true"};
    EXPECT_TRUE((*writer)->enqueue_call(c).ok());
  });
  const auto t0 = std::chrono::steady_clock::now();
  while ((*waiter)->queue_version() == seen &&
         std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30)) {
    (*waiter)->wait_for_queue(seen, std::chrono::seconds(30));
  }
  const auto waited = std::chrono::steady_clock::now() - t0;
  enqueue.join();
  EXPECT_NE((*waiter)->queue_version(), seen);
  EXPECT_LT(waited, std::chrono::seconds(10));  // a wake-up, not the 30 s timeout
}

// Every NOTIFY wakes every listening backend: the Stores of one process share
// one listening connection (and one bell), however many it opens. (That a
// forked child listens on a connection of its own, not on its parent's relay
// whose threads it lacks, StoreTest.DoorbellWakesAWaiterInAnotherProcess
// shows on this engine: its child's ring would never arrive. No fork here:
// ThreadSanitizer refuses threads started after a multi-threaded fork.)
TEST_F(StorePostgres, TheStoresOfOneProcessListenOnOneConnection) {
  auto listeners = [&](Store& s) -> int64_t {
    auto n = s.locked([](Db& db) -> Result<int64_t> {
      auto st = db.prepare(
          "SELECT count(*) FROM pg_stat_activity WHERE query = 'LISTEN rf_bell' AND "
          "state = 'idle'");
      if (!st.ok()) return st.take_error();
      auto row = st->step();
      if (!row.ok()) return row.take_error();
      return st->int64(0);
    });
    return n.ok() ? *n : -1;
  };
  // Until `want` backends listen (their relay threads connect on their own).
  auto wait_for = [&](Store& s, int64_t want) {
    const auto t0 = std::chrono::steady_clock::now();
    while (listeners(s) != want && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10))
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return listeners(s);
  };
  std::vector<std::unique_ptr<Store>> stores;
  for (int i = 0; i < 4; ++i) {
    auto s = Store::open(uri_);
    ASSERT_TRUE(s.ok()) << s.error().to_string();
    stores.push_back(std::move(*s));
  }
  const int64_t mine = wait_for(*stores[0], 1);
  EXPECT_EQ(mine, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(listeners(*stores[0]), mine);  // not one per Store, late
}

}  // namespace
}  // namespace rf::store
