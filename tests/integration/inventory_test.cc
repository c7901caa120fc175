// `sandbox list`, `sandbox reap` and `sandbox doctor` against real sandboxes.
#include <sys/stat.h>

#include "host/cgroup.h"
#include "integration/harness.h"

namespace rf::testing {
namespace {

// Each test gets its own cgroup parent: a reap in one (ctest runs tests in
// parallel) must never meet another test's sandboxes.
class Inventory : public SandboxTest {
 protected:
  void SetUp() override {
    SandboxTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    parent_ = std::string("ringfence-inv-") +
              ::testing::UnitTest::GetInstance()->current_test_info()->name();
    auto b = native::make_native_backend(native::NativeOptions{RF_RUNNER_PATH, parent_});
    ASSERT_TRUE(b.ok()) << b.error().to_string();
    inv_ = std::move(*b);
  }
  std::unique_ptr<Sandbox> make_here() {
    auto sb = inv_->create(SandboxSpec{});
    EXPECT_TRUE(sb.ok()) << sb.error().to_string();
    return sb.ok() ? std::move(*sb) : nullptr;
  }
  const SandboxInfo* find(const std::vector<SandboxInfo>& all, const std::string& id) {
    for (const auto& i : all) {
      if (i.id == id) return &i;
    }
    return nullptr;
  }
  bool cgroup_exists(const std::string& id) {
    struct stat st {};
    return ::stat(("/sys/fs/cgroup/memory/" + parent_ + "/" + id).c_str(), &st) == 0 ||
           ::stat(("/sys/fs/cgroup/" + parent_ + "/" + id).c_str(), &st) == 0;
  }

  std::string parent_;
  std::unique_ptr<Backend> inv_;
};

TEST_F(Inventory, ListFindsALiveSandboxAndItsOwner) {
  auto sb = make_here();
  ASSERT_TRUE(sb);
  auto all = inv_->list();
  ASSERT_TRUE(all.ok()) << all.error().to_string();
  const SandboxInfo* info = find(*all, sb->id());
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->backend, "native");
  EXPECT_EQ(info->pid, sb->init_pid());
  EXPECT_EQ(info->owner_pid, ::getpid());
  EXPECT_FALSE(info->orphaned());
  EXPECT_GT(info->memory_bytes.value_or(0), 0u);
}

TEST_F(Inventory, ReapSparesYoungSandboxesWithALiveOwner) {
  auto sb = make_here();
  ASSERT_TRUE(sb);
  auto reaped = inv_->reap(std::chrono::hours(1), /*dry_run=*/false);
  ASSERT_TRUE(reaped.ok());
  EXPECT_EQ(find(*reaped, sb->id()), nullptr);
  EXPECT_EQ(sh(*sb, "echo alive").out, "alive\n");
}

TEST_F(Inventory, ReapOlderThanKillsAndRemovesEveryTrace) {
  auto sb = make_here();
  ASSERT_TRUE(sb);
  const int init = sb->init_pid();
  auto dry = inv_->reap(std::chrono::seconds(0), /*dry_run=*/true);
  ASSERT_TRUE(dry.ok());
  EXPECT_NE(find(*dry, sb->id()), nullptr);
  EXPECT_EQ(sh(*sb, "echo untouched").out, "untouched\n");  // dry run did nothing

  auto reaped = inv_->reap(std::chrono::seconds(0), /*dry_run=*/false);
  ASSERT_TRUE(reaped.ok()) << reaped.error().to_string();
  EXPECT_NE(find(*reaped, sb->id()), nullptr);
  EXPECT_FALSE(cgroup_exists(sb->id()));
  Captured c;
  ExecCall call;
  call.argv = {"true"};
  auto r = sb->exec(call, c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().to_string(), "sandbox ended: tool runner (pid " + std::to_string(init) +
                                       ") killed by signal 9 (Killed)");
  auto again = inv_->reap(std::chrono::seconds(0), /*dry_run=*/false);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->empty());  // idempotent
  EXPECT_TRUE(sb->destroy().ok());
}

TEST_F(Inventory, ReapRemovesACgroupLeftWithoutProcesses) {
  // What a janitor killed together with its owner leaves behind.
  auto layout = host::detect_cgroup_layout();
  ASSERT_TRUE(layout.ok());
  auto stale = host::create_cgroup(*layout, parent_, "rf-stale0000000");
  ASSERT_TRUE(stale.ok()) << stale.error().to_string();
  auto all = inv_->list();
  ASSERT_TRUE(all.ok());
  const SandboxInfo* info = find(*all, "rf-stale0000000");
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->pid, 0);
  EXPECT_TRUE(info->orphaned());
  // Young, it may be a sandbox being set up (no PID 1 yet): a reap at worker
  // start must not touch it. (Found when two workers started side by side.)
  auto young = inv_->reap(std::chrono::hours(1), /*dry_run=*/false);
  ASSERT_TRUE(young.ok());
  EXPECT_EQ(find(*young, "rf-stale0000000"), nullptr);
  EXPECT_TRUE(cgroup_exists("rf-stale0000000"));
  auto reaped = inv_->reap(std::chrono::seconds(0), /*dry_run=*/false);
  ASSERT_TRUE(reaped.ok());
  EXPECT_NE(find(*reaped, "rf-stale0000000"), nullptr);
  EXPECT_FALSE(cgroup_exists("rf-stale0000000"));
}

TEST_F(Inventory, DoctorIsHealthyHereAndNamesWhatIsMissing) {
  for (const auto& c : native::native_doctor(native::NativeOptions{RF_RUNNER_PATH, parent_})) {
    if (c.required) {
      EXPECT_TRUE(c.ok) << c.name << ": " << c.detail;
    }
  }
  bool runner_checked = false;
  for (const auto& c :
       native::native_doctor(native::NativeOptions{"/nonexistent/runner", parent_})) {
    if (c.name != "tool runner") continue;
    runner_checked = true;
    EXPECT_FALSE(c.ok);
    EXPECT_TRUE(c.required);
    EXPECT_NE(c.remedy.find("RINGFENCE_TOOL_RUNNER"), std::string::npos) << c.remedy;
  }
  EXPECT_TRUE(runner_checked);
}

TEST_F(Inventory, CliListReapAndDoctor) {
  char state[] = "/tmp/rf-doctor-state-XXXXXX";
  ASSERT_NE(::mkdtemp(state), nullptr);
  CliRun r = run_cli({"sandbox", "doctor", "--state-dir", std::string(state) + "/new"});
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("\u2713 seccomp"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\u2713 state dir writable: " + std::string(state) +
                       "/new (created, synced and removed a file)\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\u2713 free disk (state dir): "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\u2713 free disk (scratch root): "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("native backend: healthy"), std::string::npos) << r.out;
  ::rmdir((std::string(state) + "/new").c_str());  // the probe file is gone: both are empty
  EXPECT_EQ(::rmdir(state), 0);
  r = run_cli({"sandbox", "list", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.front(), '[');
  r = run_cli({"sandbox", "reap", "--older-than", "soon"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--older-than"), std::string::npos) << r.err;
  r = run_cli({"sandbox", "reap"});
  EXPECT_EQ(r.exit_code, 2);  // --older-than is required
}

}  // namespace
}  // namespace rf::testing
