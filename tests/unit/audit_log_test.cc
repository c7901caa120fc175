// The audit log's hash chain (issue 11) against a real store in a temp dir:
// every way of changing the record directly in the database file (an edit, a
// deletion in the middle or of the newest events, a reordering, a forged
// event) is found by verify(), which names the first bad event; appends from
// two stores on one file at once keep one unbroken chain.
#include "store/audit_log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "store/db.h"
#include "store/store.h"
#include "support/store_target.h"

namespace rf::store {
namespace {

class AuditLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rf-audit-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    target_ = rf::testing::fresh_store_target(dir_ + "/ringfence.db");
    store_ = open();
    log_ = std::make_unique<AuditLog>(*store_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<Store> open() {
    auto s = Store::open(target_);
    EXPECT_TRUE(s.ok()) << s.error().to_string();
    return s.ok() ? std::move(*s) : nullptr;
  }
  void append(int n) {
    for (int i = 0; i < n; ++i) {
      AuditEvent e;
      e.kind = "secret.set";
      e.actor = "test";
      e.project_id = "acme";
      e.detail_json = R"({"name":"s)" + std::to_string(i) + R"(","version":1})";
      ASSERT_TRUE(log_->append(e).ok());
    }
  }
  // SQL run directly on the file, as someone with write access to it would.
  void tamper(const std::string& sql) {
    auto s = store_->locked([&](Db& db) { return db.exec(sql); });
    ASSERT_TRUE(s.ok()) << s.error().to_string();
  }
  AuditVerdict verify() {
    auto v = log_->verify();
    EXPECT_TRUE(v.ok()) << v.error().to_string();
    return v.ok() ? *v : AuditVerdict{};
  }

  std::string dir_;
  std::string target_;  // the store: a file in dir_, or a PostgreSQL schema
  std::unique_ptr<Store> store_;
  std::unique_ptr<AuditLog> log_;
};

TEST_F(AuditLogTest, AnUntouchedChainIsIntact) {
  append(5);
  const auto v = verify();
  EXPECT_TRUE(v.intact) << v.reason;
  EXPECT_EQ(v.events, 5);
  auto events = log_->list({});
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 5u);
  EXPECT_EQ((*events)[0].prev_hash, std::string(64, '0'));
  for (size_t i = 1; i < events->size(); ++i) {
    EXPECT_EQ((*events)[i].prev_hash, (*events)[i - 1].hash);
    EXPECT_EQ((*events)[i].seq, static_cast<int64_t>(i + 1));
  }
}

TEST_F(AuditLogTest, AnEditedFieldIsFoundAndNamed) {
  append(5);
  tamper("UPDATE audit_events SET actor = 'someone else' WHERE seq = 3");
  const auto v = verify();
  EXPECT_FALSE(v.intact);
  EXPECT_EQ(v.first_bad, 3);
  EXPECT_NE(v.reason.find("event 3"), std::string::npos) << v.reason;
}

TEST_F(AuditLogTest, AnEditedHashIsFound) {
  append(5);
  // Fields and hash both changed: without the chain's hash function over the
  // new fields, the event's own hash check fails first.
  tamper("UPDATE audit_events SET detail_json = '{}', hash = 'f' || substr(hash, 2) WHERE seq = 2");
  const auto v = verify();
  EXPECT_FALSE(v.intact);
  EXPECT_EQ(v.first_bad, 2);
}

TEST_F(AuditLogTest, ADeletedMiddleEventIsFound) {
  append(5);
  tamper("DELETE FROM audit_events WHERE seq = 3");
  const auto v = verify();
  EXPECT_FALSE(v.intact);
  EXPECT_EQ(v.first_bad, 3) << v.reason;
  EXPECT_NE(v.reason.find("event 3 is missing"), std::string::npos) << v.reason;
}

TEST_F(AuditLogTest, DeletedNewestEventsAreFoundThroughTheHead) {
  append(5);
  tamper("DELETE FROM audit_events WHERE seq >= 4");
  const auto v = verify();
  EXPECT_FALSE(v.intact);
  EXPECT_NE(v.reason.find("head"), std::string::npos) << v.reason;
  // And with the head gone as well.
  tamper("DELETE FROM audit_head");
  EXPECT_FALSE(verify().intact);
}

TEST_F(AuditLogTest, AReorderingIsFound) {
  append(5);
  tamper(
      "UPDATE audit_events SET seq = 1000 WHERE seq = 2;"
      "UPDATE audit_events SET seq = 2 WHERE seq = 4;"
      "UPDATE audit_events SET seq = 4 WHERE seq = 1000;");
  const auto v = verify();
  EXPECT_FALSE(v.intact);
  EXPECT_EQ(v.first_bad, 2) << v.reason;
}

TEST_F(AuditLogTest, AForgedEventAppendedDirectlyIsFound) {
  append(3);
  tamper(
      "INSERT INTO audit_events (seq, at, kind, actor, detail_json, prev_hash, hash) "
      "SELECT 4, at, 'secret.revoke', 'forger', '{}', hash, hash FROM audit_events WHERE seq = 3");
  const auto v = verify();
  EXPECT_FALSE(v.intact);
  EXPECT_EQ(v.first_bad, 4) << v.reason;
}

TEST_F(AuditLogTest, DetailMustBeAJsonObject) {
  AuditEvent e;
  e.kind = "secret.set";
  for (const char* bad : {"", "[]", "\"text\"", "{", "42"}) {
    e.detail_json = bad;
    auto r = log_->append(e);
    EXPECT_FALSE(r.ok()) << bad;
  }
  e.kind = "";
  e.detail_json = "{}";
  EXPECT_FALSE(log_->append(e).ok());
  EXPECT_EQ(verify().events, 0);
}

TEST_F(AuditLogTest, TwoStoresAppendingAtOnceKeepOneChain) {
  auto other = open();
  ASSERT_NE(other, nullptr);
  AuditLog second(*other);
  constexpr int kEach = 200;
  auto writer = [](AuditLog& log, const char* actor) {
    for (int i = 0; i < kEach; ++i) {
      AuditEvent e;
      e.kind = "identity.resolve";
      e.actor = actor;
      ASSERT_TRUE(log.append(e).ok());
    }
  };
  std::thread a(writer, std::ref(*log_), "a");
  std::thread b(writer, std::ref(second), "b");
  a.join();
  b.join();
  const auto v = verify();
  EXPECT_TRUE(v.intact) << v.reason;
  EXPECT_EQ(v.events, 2 * kEach);
}

}  // namespace
}  // namespace rf::store
