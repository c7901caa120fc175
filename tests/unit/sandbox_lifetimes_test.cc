// store::SandboxLifetimes (issue 41): names unique among a project's live
// sandboxes, expiries and why each ended. On both engines (ctest's store
// suites run it with RF_TEST_STORE=postgres too).
#include "store/sandbox_lifetimes.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "support/store_target.h"

namespace rf::store {
namespace {

class StoreLifetimes : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rf-lifetimes-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    auto s = Store::open(testing::fresh_store_target(dir_ + "/ringfence.db"));
    ASSERT_TRUE(s.ok()) << s.error().to_string();
    store_ = std::move(*s);
    for (const char* p : {"acme", "beta"}) {
      ASSERT_TRUE(store_->ensure_project(p, Environment::development).ok());
    }
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  void live(const std::string& id, const std::string& project) {
    SandboxRow row;
    row.id = id;
    row.backend = "native";
    row.project_id = project;
    row.mode = "api";
    ASSERT_TRUE(store_->record_sandbox(row).ok());
  }
  std::string dir_;
  std::unique_ptr<Store> store_;
};

TEST_F(StoreLifetimes, ANameIsOneLiveSandboxsPerProject) {
  SandboxLifetimes lifetimes(*store_);
  live("sb-1", "acme");
  ASSERT_TRUE(lifetimes.record({"sb-1", "acme", "dev", {{"team", "a"}}, 5000, 0, {}}).ok());
  live("sb-2", "acme");
  auto twice = lifetimes.record({"sb-2", "acme", "dev", {}, std::nullopt, 0, {}});
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.error().code, ErrorCode::kConflict);
  EXPECT_NE(twice.error().to_string().find("project acme has a live sandbox named dev (sb-1)"),
            std::string::npos)
      << twice.error().to_string();
  live("sb-3", "beta");
  EXPECT_TRUE(lifetimes.record({"sb-3", "beta", "dev", {}, std::nullopt, 0, {}}).ok())
      << "another project's name is its own";

  auto acme = lifetimes.of_live("acme");
  ASSERT_TRUE(acme.ok());
  ASSERT_EQ(acme->size(), 1u);
  EXPECT_EQ(acme->at("sb-1").metadata.at("team"), "a");
  EXPECT_EQ(*acme->at("sb-1").expires_at, 5000);
  ASSERT_TRUE(lifetimes.set_expiry("sb-1", 9000).ok());
  EXPECT_EQ(*lifetimes.of_live("acme")->at("sb-1").expires_at, 9000);

  // Once it ends, the name is free again.
  ASSERT_TRUE(lifetimes.ended("sb-1", "timeout").ok());
  ASSERT_TRUE(store_->set_sandbox_state("sb-1", SandboxState::destroyed).ok());
  EXPECT_TRUE(lifetimes.of_live("acme")->empty());
  EXPECT_TRUE(lifetimes.record({"sb-2", "acme", "dev", {}, std::nullopt, 0, {}}).ok());
  EXPECT_EQ(lifetimes.of_live("")->size(), 2u);
}

}  // namespace
}  // namespace rf::store
