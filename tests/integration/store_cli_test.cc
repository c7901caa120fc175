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
#include <string>
#include <thread>
#include <vector>

#include "store/store.h"
#include "support/cli_process.h"
#include "support/postgres_server.h"

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
  void start_worker(const std::string& name) {
    const std::string state = dir_ + "/" + name;
    workers_.push_back(std::make_unique<Cli>(
        std::vector<std::string>{"worker", "start", "--store", uri_, "--state-dir", state}));
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

TEST_F(StoreCli, APasswordOnTheCommandLineIsRefusedWithoutEchoingIt) {
  const std::string with_password =
      "postgresql://rf:S3cretPw@127.0.0.1:" + std::to_string(pg_.port()) + "/postgres";
  Cli worker({"worker", "start", "--store", with_password, "--state-dir", dir_ + "/w"});
  EXPECT_NE(worker.wait(), 0);
  EXPECT_THAT(worker.err(), HasSubstr("--store: the URI holds a password"));
  EXPECT_THAT(worker.err(), Not(HasSubstr("S3cretPw")));
  // `worker config --explain` names where the store came from, without a password.
  Cli explain({"worker", "config", "--explain", "--store", uri_, "--state-dir", dir_ + "/w"});
  EXPECT_EQ(explain.wait(), 0) << explain.err();
  EXPECT_THAT(explain.out(), HasSubstr("store: " + uri_ + " (flag --store)"));
}

}  // namespace
}  // namespace rf::testing
