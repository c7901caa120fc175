// `store migrate` (issue 16): a store moved between the engines keeps every
// row and its audit chain, or moves nothing. SQLite -> PostgreSQL -> SQLite
// must give back the same rows, byte for byte (SQLite's quote() of every
// value, so a blob that came back as text shows). PostgreSQL is a cluster of
// the test process's own (support/postgres_server.h).
#include "store/store_copy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "store/audit_log.h"
#include "store/db.h"
#include "store/store.h"
#include "store/token_store.h"
#include "store/workflow_store.h"
#include "support/store_target.h"

namespace rf::store {
namespace {

using ::testing::HasSubstr;

// Every table of a SQLite store but schema_version (its applied_at is the
// migration's time) and store_moved (the source's mark of the move): each row as SQLite's quote()
// of its values, in rowid order.
std::map<std::string, std::vector<std::string>> dump(const std::string& path) {
  std::map<std::string, std::vector<std::string>> out;
  auto db = Db::open(path);
  EXPECT_TRUE(db.ok()) << db.error().to_string();
  if (!db.ok()) return out;
  auto tables = db->prepare(
      "SELECT name, wr FROM pragma_table_list WHERE schema = 'main' AND type = 'table' "
      "AND name NOT LIKE 'sqlite_%' AND name NOT IN ('schema_version', 'store_moved') "
      "ORDER BY name");
  EXPECT_TRUE(tables.ok());
  std::vector<std::pair<std::string, bool>> names;
  while (*tables->step()) names.emplace_back(tables->text(0), tables->int64(1) != 0);
  for (const auto& [name, without_rowid] : names) {
    auto cols = db->prepare("SELECT name FROM pragma_table_info(?1) ORDER BY cid");
    cols->bind(1, name);
    std::string expr;
    while (*cols->step())
      expr += (expr.empty() ? "quote(\"" : " || ',' || quote(\"") + cols->text(0) + "\")";
    auto rows = db->prepare("SELECT " + expr + " FROM \"" + name + "\"" +
                            (without_rowid ? "" : " ORDER BY rowid"));
    EXPECT_TRUE(rows.ok()) << rows.error().to_string();
    auto& lines = out[name];
    while (*rows->step()) lines.push_back(rows->text(0));
  }
  return out;
}

int64_t count(const std::string& target, const std::string& table) {
  auto db = Db::open(target);
  EXPECT_TRUE(db.ok()) << db.error().to_string();
  auto st = db->prepare("SELECT COUNT(*) FROM " + table);
  EXPECT_TRUE(st.ok()) << st.error().to_string();
  EXPECT_TRUE(*st->step());
  return st->int64(0);
}

class StoreCopy : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(pg().ok()) << pg().error();
    std::string tmpl = (std::filesystem::temp_directory_path() / "rf-copy-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    sqlite_ = dir_ + "/ringfence.db";
    pg_uri_ = pg().fresh_schema_uri();
    ASSERT_FALSE(pg_uri_.empty());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  static rf::testing::PostgresServer& pg() { return rf::testing::shared_postgres(); }

  // A store holding a bit of everything: calls with binary stdin and output,
  // a worker (stopped), sandboxes, events, audit events, a workflow run with
  // attempts (ordered by insertion) and an artifact, an API token.
  static void fill(Store& s) {
    ASSERT_TRUE(s.ensure_project("p", Environment::development).ok());
    ASSERT_TRUE(s.register_worker("w1", 42, "host-a", std::nullopt,
                                  WorkerSite{"rack-1", Labels{{"zone", "eu"}}})
                    .ok());
    std::vector<int64_t> ids;
    for (int i = 0; i < 3; ++i) {
      NewCall c;
      c.project = "p";
      c.run = "r1";
      c.argv = {"sh", "-c", "echo " + std::to_string(i)};
      c.env = {{"K", "v" + std::to_string(i)}};
      c.stdin_bytes = std::string("in\0\xff", 4) + std::to_string(i);
      c.requires_labels = Labels{{"zone", "eu"}};
      auto id = s.enqueue_call(c);
      ASSERT_TRUE(id.ok()) << id.error().to_string();
      ids.push_back(*id);
    }
    ClaimFilter f;
    f.labels = Labels{{"zone", "eu"}};
    for (int i = 0; i < 2; ++i) {
      auto c = s.claim_next("w1", std::chrono::milliseconds(60'000), f);
      ASSERT_TRUE(c.ok() && *c) << (c.ok() ? "none" : c.error().to_string());
      ASSERT_TRUE(s.append_output((**c).id, "w1", Stream::out, std::string("out\0\x80", 5)).ok());
    }
    ASSERT_TRUE(s.finish_call(ids[0], "w1", 0, R"({"wall_ms":3})").ok());
    ASSERT_TRUE(s.fail_call(ids[1], "w1", "the sandbox went away").ok());
    ASSERT_TRUE(s.record_sandbox({"sb-1", "native", "p", "r1", "per_run", "w1", 99,
                                  SandboxState::active, 0, std::nullopt})
                    .ok());
    ASSERT_TRUE(s.append_event({0, 0, "call.claimed", "p", "r1", ids[0], "sb-1", "w1", "{}"}).ok());
    AuditLog audit(s);
    for (int i = 0; i < 5; ++i) {
      AuditEvent e;
      e.kind = "sandbox.create";
      e.actor = "worker w1";
      e.project_id = "p";
      e.detail_json = R"({"n":)" + std::to_string(i) + "}";
      ASSERT_TRUE(audit.append(e).ok());
    }
    WorkflowStore wf(s);
    NewWorkflowRun run;
    run.run_id = "wf-1";
    run.project = "p";
    run.workflow = "w";
    run.file = "w.yaml";
    run.definition = "name: w";
    ASSERT_TRUE(wf.enqueue_run(run).ok());
    auto held = wf.claim_run("w1", std::chrono::milliseconds(60'000), Labels{{"zone", "eu"}});
    ASSERT_TRUE(held.ok() && *held) << (held.ok() ? "none" : held.error().to_string());
    for (const char* step : {"build", "test", "alpha"}) {
      AttemptRow a;
      a.worker_id = "w1";
      a.run_id = "wf-1";
      a.step_id = step;
      a.mode = "sandboxed";
      a.started_at = 5;
      ASSERT_TRUE(wf.start_attempt(a).ok());
    }
    ArtifactRow art;
    art.run_id = "wf-1";
    art.step_id = "build";
    art.dest = "store";
    art.data = std::string("tar\0bytes", 9);
    art.size = 9;
    art.sha256 = std::string(64, 'a');
    ASSERT_TRUE(wf.put_artifact(art).ok());
    TokenStore tokens(s);
    ASSERT_TRUE(
        tokens
            .add({"tok_0123456789ab", "p", "ci", 7, std::nullopt, std::nullopt, std::nullopt},
                 std::string(32, '\x01'))
            .ok());
    ASSERT_TRUE(s.stop_worker("w1").ok());
  }

  // The SQLite store, filled (fill); null, with the failure recorded, when
  // it cannot be.
  std::unique_ptr<Store> filled_source() {
    auto s = Store::open(sqlite_);
    EXPECT_TRUE(s.ok()) << s.error().to_string();
    if (!s.ok()) return nullptr;
    fill(**s);
    if (::testing::Test::HasFatalFailure()) return nullptr;
    return std::move(*s);
  }

  static Result<StoreCopyReport> copy(const std::string& from, const std::string& to,
                                      int64_t live_window_ms = 10'000) {
    auto a = Db::open(from);
    if (!a.ok()) return a.take_error();
    auto b = Db::open(to);
    if (!b.ok()) return b.take_error();
    return copy_store(*a, *b, live_window_ms);
  }

  std::string dir_, sqlite_, pg_uri_;
};

TEST_F(StoreCopy, SqliteToPostgresAndBackGivesEveryRowBackByteForByte) {
  ASSERT_NE(filled_source(), nullptr);
  auto there = copy("sqlite:" + sqlite_, pg_uri_);
  ASSERT_TRUE(there.ok()) << there.error().to_string();
  EXPECT_EQ(there->audit_events, 5);
  EXPECT_EQ(there->audit_head.size(), 64u);
  // Referenced tables go first.
  auto at = [&](const std::string& table) {
    for (size_t i = 0; i < there->tables.size(); ++i)
      if (there->tables[i].table == table) return static_cast<int>(i);
    return -1;
  };
  ASSERT_GE(at("tool_calls"), 0);
  EXPECT_LT(at("projects"), at("runs"));
  EXPECT_LT(at("runs"), at("tool_calls"));
  EXPECT_LT(at("tool_calls"), at("call_output"));
  EXPECT_LT(at("workflow_runs"), at("step_attempts"));

  const std::string back = dir_ + "/back.db";
  auto again = copy(pg_uri_, "sqlite:" + back);
  ASSERT_TRUE(again.ok()) << again.error().to_string();
  EXPECT_EQ(again->rows, there->rows);
  EXPECT_EQ(again->audit_head, there->audit_head);
  const auto before = dump(sqlite_), after = dump(back);
  ASSERT_FALSE(before.at("call_output").empty());
  ASSERT_EQ(before.size(), after.size());
  for (const auto& [table, rows] : before) EXPECT_EQ(after.at(table), rows) << "table " << table;
}

TEST_F(StoreCopy, ThePostgresStoreWorksOnAfterTheMove) {
  int64_t last_call = 0;
  {
    auto s = filled_source();
    ASSERT_NE(s, nullptr);
    auto r = s->run("r1");
    ASSERT_TRUE(r.ok());
    last_call = r->calls.back().id;
  }
  ASSERT_TRUE(copy(sqlite_, pg_uri_).ok());
  auto s = Store::open(pg_uri_);
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  auto out = (*s)->output(last_call - 1);
  ASSERT_TRUE(out.ok()) << out.error().to_string();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].data, std::string("out\0\x80", 5));
  // The ids go on past the copied ones (PostgreSQL's identity sequences).
  NewCall c;
  c.project = "p";
  c.run = "r2";
  c.argv = {"true"};
  auto id = (*s)->enqueue_call(c);
  ASSERT_TRUE(id.ok()) << id.error().to_string();
  EXPECT_EQ(*id, last_call + 1);
  // The chain verifies and grows.
  AuditLog audit(**s);
  auto seq = audit.append({0, 0, "secret.set", "cli", "p"});
  ASSERT_TRUE(seq.ok()) << seq.error().to_string();
  EXPECT_EQ(*seq, 6);
  auto v = audit.verify();
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->intact) << v->reason;
  EXPECT_EQ(v->events, 6);
  WorkflowStore wf(**s);
  auto attempts = wf.attempts("wf-1");
  ASSERT_TRUE(attempts.ok());
  ASSERT_EQ(attempts->size(), 3u);
  EXPECT_EQ((*attempts)[2].step_id, "alpha");  // in the order made, not by name
}

// Issue 40: after a move the source stayed writable with no mark, so a
// worker left on it served calls nobody read.
TEST_F(StoreCopy, TheSourceIsMarkedMovedAndRefusesEveryProcessAndAnotherMove) {
  ASSERT_NE(filled_source(), nullptr);
  ASSERT_TRUE(copy(sqlite_, pg_uri_).ok());
  auto s = Store::open(sqlite_);
  ASSERT_FALSE(s.ok());
  const std::string said = s.error().to_string();
  EXPECT_THAT(said, HasSubstr("open store " + sqlite_ + ": this store was moved to "));
  EXPECT_THAT(said, HasSubstr(" by `ringfence store migrate` at 20"));
  EXPECT_THAT(said, HasSubstr("Z and takes no more work; name "));  // ISO 8601, UTC
  EXPECT_THAT(said, HasSubstr(" to every worker and command (--store, or RINGFENCE_STORE)"));
  const std::string other = dir_ + "/again.db";
  auto again = copy(sqlite_, "sqlite:" + other);
  ASSERT_FALSE(again.ok());
  EXPECT_THAT(again.error().to_string(), HasSubstr("this store was moved to "));
  // The target is the store now, unmarked.
  auto t = Store::open(pg_uri_);
  ASSERT_TRUE(t.ok()) << t.error().to_string();
}

TEST_F(StoreCopy, ATargetThatHoldsDataIsRefusedAndKeepsIt) {
  {
    auto s = filled_source();
    ASSERT_NE(s, nullptr);
    auto t = Store::open(pg_uri_);
    ASSERT_TRUE(t.ok());
    ASSERT_TRUE((*t)->ensure_project("other", Environment::staging).ok());
  }
  auto r = copy(sqlite_, pg_uri_);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().to_string(),
              HasSubstr("already holds data (table projects has 1 rows): store migrate moves a "
                        "store into an empty one, and never merges"));
  EXPECT_EQ(count(pg_uri_, "projects"), 1);
  EXPECT_EQ(count(pg_uri_, "tool_calls"), 0);
}

TEST_F(StoreCopy, AStoreInUseIsNotMoved) {
  {
    auto s = filled_source();
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(s->register_worker("w2", 43, "host-b", std::nullopt).ok());
  }
  auto r = copy(sqlite_, pg_uri_);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().to_string(),
              HasSubstr("is in use: worker(s) w2 sent a heartbeat in the last 10 s; stop them "
                        "first"));
  EXPECT_EQ(count(pg_uri_, "projects"), 0);
}

TEST_F(StoreCopy, ABrokenAuditChainIsNotMoved) {
  ASSERT_NE(filled_source(), nullptr);
  {
    auto db = Db::open(sqlite_);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(db->exec("UPDATE audit_events SET detail_json = '{\"n\":9}' WHERE seq = 3").ok());
  }
  auto r = copy(sqlite_, pg_uri_);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().to_string(),
              HasSubstr("is broken (event 3: its hash does not match its fields (edited?)): "
                        "nothing was moved"));
  EXPECT_EQ(count(pg_uri_, "audit_events"), 0);
  EXPECT_EQ(count(pg_uri_, "projects"), 0);
}

// A row PostgreSQL refuses halfway through (text with a NUL byte, which
// SQLite keeps): the whole move rolls back.
TEST_F(StoreCopy, ARowTheTargetRefusesRollsTheWholeMoveBack) {
  ASSERT_NE(filled_source(), nullptr);
  {
    auto db = Db::open(sqlite_);
    ASSERT_TRUE(db.ok());
    auto st = db->prepare("UPDATE tool_calls SET cwd = ?1 WHERE id = 3");
    ASSERT_TRUE(st.ok());
    st->bind(1, std::string_view("/work\0space", 11));
    ASSERT_TRUE(st->run().ok());
  }
  auto r = copy(sqlite_, pg_uri_);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().to_string(),
              HasSubstr("copy table tool_calls: copy row 3 of table tool_calls"));
  EXPECT_THAT(r.error().to_string(), HasSubstr("NUL byte"));
  EXPECT_EQ(count(pg_uri_, "projects"), 0);
  EXPECT_EQ(count(pg_uri_, "tool_calls"), 0);
}

}  // namespace
}  // namespace rf::store
