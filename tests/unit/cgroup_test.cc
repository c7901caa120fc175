#include "host/cgroup.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "core/io.h"
#include "host/call_usage.h"
#include "support/ci_skip.h"

namespace rf::host {
namespace {

namespace fs = std::filesystem;

// This machine's /proc/self/mountinfo (v1 hybrid: an empty v2 at .../unified).
constexpr char kHybridMountinfo[] =
    "23 1 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
    "34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "36 31 0:33 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices\n"
    "37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer\n"
    "38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio\n"
    "39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
    "40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

// A typical systemd host with only the unified hierarchy.
constexpr char kV2Mountinfo[] =
    "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
    "25 22 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:2 - sysfs sysfs rw\n"
    "30 25 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 "
    "rw,nsdelegate,memory_recursiveprot\n";

// Older distributions: cpu and cpuacct share one hierarchy.
constexpr char kCoMountedMountinfo[] =
    "31 23 0:28 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755\n"
    "33 31 0:30 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid - cgroup cgroup rw,cpu,cpuacct\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,nosuid shared:9 - cgroup cgroup rw,memory\n"
    "39 31 0:36 / /sys/fs/cgroup/pids rw,nosuid - cgroup cgroup rw,pids\n";

constexpr char kNoPidsMountinfo[] =
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

TEST(CgroupLayout, V2OnlyHostPicksTheUnifiedMount) {
  auto layout = detect_cgroup_layout(kV2Mountinfo);
  ASSERT_TRUE(layout.ok()) << layout.error().to_string();
  EXPECT_EQ(layout->version, CgroupVersion::kV2);
  EXPECT_EQ(layout->v2_root, "/sys/fs/cgroup");
  EXPECT_TRUE(layout->v1_mounts.empty());
  EXPECT_FALSE(layout->fake);
}

TEST(CgroupLayout, V2IsPickedOnlyWhenItsControllersListMemoryPidsAndCpu) {
  std::string asked;
  auto layout = detect_cgroup_layout(kV2Mountinfo, [&](const std::string& root) {
    asked = root;
    return std::string("cpuset cpu io memory hugetlb pids rdma misc\n");
  });
  ASSERT_TRUE(layout.ok()) << layout.error().to_string();
  EXPECT_EQ(asked, "/sys/fs/cgroup");
  EXPECT_EQ(layout->version, CgroupVersion::kV2);

  auto lacking = detect_cgroup_layout(
      kV2Mountinfo, [](const std::string&) { return std::string("cpuset io memory\n"); });
  ASSERT_FALSE(lacking.ok());
  EXPECT_EQ(lacking.error().to_string(),
            "cgroup v2 at /sys/fs/cgroup: controllers not available: pids cpu");
}

TEST(CgroupLayout, HybridHostLikeThisOneUsesV1) {
  auto layout = detect_cgroup_layout(kHybridMountinfo);
  ASSERT_TRUE(layout.ok()) << layout.error().to_string();
  EXPECT_EQ(layout->version, CgroupVersion::kV1);
  // The freezer too, where mounted (pause; never required).
  const std::map<std::string, std::string> want = {{"cpu", "/sys/fs/cgroup/cpu"},
                                                   {"cpuacct", "/sys/fs/cgroup/cpuacct"},
                                                   {"freezer", "/sys/fs/cgroup/freezer"},
                                                   {"memory", "/sys/fs/cgroup/memory"},
                                                   {"pids", "/sys/fs/cgroup/pids"}};
  EXPECT_EQ(layout->v1_mounts, want);

  // The unified mount's cgroup.controllers as on this machine.
  auto read = detect_cgroup_layout(kHybridMountinfo,
                                   [](const std::string&) { return std::string("hugetlb\n"); });
  ASSERT_TRUE(read.ok()) << read.error().to_string();
  EXPECT_EQ(read->version, CgroupVersion::kV1);
}

TEST(CgroupLayout, CoMountedCpuAndCpuacctShareOneMountPoint) {
  auto layout = detect_cgroup_layout(kCoMountedMountinfo);
  ASSERT_TRUE(layout.ok()) << layout.error().to_string();
  EXPECT_EQ(layout->version, CgroupVersion::kV1);
  EXPECT_EQ(layout->v1_mounts.at("cpu"), "/sys/fs/cgroup/cpu,cpuacct");
  EXPECT_EQ(layout->v1_mounts.at("cpuacct"), "/sys/fs/cgroup/cpu,cpuacct");
  EXPECT_EQ(layout->v1_mounts.at("memory"), "/sys/fs/cgroup/memory");
}

TEST(CgroupLayout, MissingPidsControllerIsAnErrorNamingIt) {
  auto layout = detect_cgroup_layout(kNoPidsMountinfo);
  ASSERT_FALSE(layout.ok());
  EXPECT_EQ(layout.error().to_string(), "cgroup v1: controllers not mounted: pids");
}

TEST(CgroupLayout, NoCgroupMountsIsAnError) {
  auto layout = detect_cgroup_layout("22 1 8:1 / / rw - ext4 /dev/sda1 rw\n");
  ASSERT_FALSE(layout.ok());
  EXPECT_EQ(layout.error().to_string(), "cgroups: no cgroup file system mounted");
}

TEST(CgroupLayout, EscapedMountPointIsDecoded) {
  auto layout = detect_cgroup_layout("30 25 0:26 / /mnt/my\\040cgroup rw - cgroup2 cgroup2 rw\n");
  ASSERT_TRUE(layout.ok()) << layout.error().to_string();
  EXPECT_EQ(layout->v2_root, "/mnt/my cgroup");
}

// A fresh directory under /tmp, deleted with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "rf-cgroup-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string slurp(const std::string& path) {
  auto text = read_file(path);
  return text ? *text : "<" + text.error().to_string() + ">";
}

void put(const std::string& path, const std::string& text) {
  ASSERT_TRUE(write_file_atomic(path, text).ok()) << path;
}

// Rewrites a file in place, as the kernel changes a counter that open
// descriptors read (put() renames a new file over it).
void rewrite(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::trunc);
  f << text;
  f.close();
  ASSERT_TRUE(f) << path;
}

constexpr uint64_t kMiB = 1 << 20;

class CgroupFakeV2 : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(tmp_.path().empty());
    layout_.version = CgroupVersion::kV2;
    layout_.v2_root = tmp_.path();
    layout_.fake = true;
  }
  std::string dir(const std::string& name) const { return tmp_.path() + "/ringfence/" + name; }

  TempDir tmp_;
  CgroupLayout layout_;
};

TEST_F(CgroupFakeV2, CreateEnablesControllersAndApplyWritesLimits) {
  auto cg = create_cgroup(layout_, "ringfence", "sb1");
  ASSERT_TRUE(cg.ok()) << cg.error().to_string();
  EXPECT_EQ(slurp(tmp_.path() + "/cgroup.subtree_control"), "+memory +pids +cpu");
  EXPECT_EQ(slurp(tmp_.path() + "/ringfence/cgroup.subtree_control"), "+memory +pids +cpu");
  EXPECT_EQ((*cg)->paths(), std::vector<std::string>{dir("sb1")});
  EXPECT_GE((*cg)->clone_into_fd(), 0);

  put(dir("sb1") + "/memory.swap.max", "max\n");  // present with swap accounting
  ASSERT_TRUE((*cg)->apply({1.5, 64ull << 20, 32}).ok());
  EXPECT_EQ(slurp(dir("sb1") + "/memory.max"), "67108864");
  EXPECT_EQ(slurp(dir("sb1") + "/memory.swap.max"), "0");
  EXPECT_EQ(slurp(dir("sb1") + "/pids.max"), "32");
  EXPECT_EQ(slurp(dir("sb1") + "/cpu.max"), "150000 100000");
}

TEST_F(CgroupFakeV2, NoSwapFileMeansNoSwapWriteAndZeroMeansMax) {
  auto cg = create_cgroup(layout_, "ringfence", "sb1");
  ASSERT_TRUE(cg.ok()) << cg.error().to_string();
  ASSERT_TRUE((*cg)->apply({0, 0, 0}).ok());
  EXPECT_FALSE(fs::exists(dir("sb1") + "/memory.swap.max"));
  EXPECT_EQ(slurp(dir("sb1") + "/memory.max"), "max");
  EXPECT_EQ(slurp(dir("sb1") + "/pids.max"), "max");
  EXPECT_EQ(slurp(dir("sb1") + "/cpu.max"), "max 100000");
}

TEST_F(CgroupFakeV2, ControllersAlreadyEnabledAreNotRewritten) {
  put(tmp_.path() + "/cgroup.subtree_control", "cpu memory pids io\n");
  ASSERT_TRUE(create_cgroup(layout_, "ringfence", "sb1").ok());
  EXPECT_EQ(slurp(tmp_.path() + "/cgroup.subtree_control"), "cpu memory pids io\n");
}

TEST_F(CgroupFakeV2, UsageParsesCounterFiles) {
  auto cg = create_cgroup(layout_, "ringfence", "sb1");
  ASSERT_TRUE(cg.ok()) << cg.error().to_string();
  put(dir("sb1") + "/memory.current", "1000\n");
  put(dir("sb1") + "/memory.peak", "8192\n");
  put(dir("sb1") + "/memory.events", "low 0\nhigh 0\nmax 4\noom 3\noom_kill 3\noom_group_kill 0\n");
  put(dir("sb1") + "/pids.events", "max 5\n");
  auto u = (*cg)->usage();
  ASSERT_TRUE(u.ok()) << u.error().to_string();
  EXPECT_EQ(u->memory_peak_bytes, 8192u);
  EXPECT_EQ(u->oom_kills, 3u);
  EXPECT_EQ(u->pids_max_hits, 5u);

  fs::remove(dir("sb1") + "/memory.peak");  // before Linux 5.19
  u = (*cg)->usage();
  ASSERT_TRUE(u.ok()) << u.error().to_string();
  EXPECT_EQ(u->memory_peak_bytes, 1000u);

  fs::remove(dir("sb1") + "/pids.events");
  u = (*cg)->usage();
  ASSERT_FALSE(u.ok());
  EXPECT_EQ(u.error().to_string(),
            "open " + dir("sb1") + "/pids.events: No such file or directory");
}

TEST_F(CgroupFakeV2, CallPeakIsReadThroughADescriptorResetAtTheCallsStart) {
  auto cg = create_cgroup(layout_, "ringfence", "sb1");
  ASSERT_TRUE(cg.ok()) << cg.error().to_string();
  put(dir("sb1") + "/memory.peak", "314572800\n");  // an earlier call's 300 MiB
  auto peak = (*cg)->start_call_peak();
  ASSERT_TRUE(peak.ok()) << peak.error().to_string();
  EXPECT_EQ(slurp(dir("sb1") + "/memory.peak"), "reset");
  rewrite(dir("sb1") + "/memory.peak", "4096\n");  // what the descriptor says since
  auto read = (*peak)->finish();
  ASSERT_TRUE(read.ok()) << read.error().to_string();
  EXPECT_EQ(*read, 4096u);
  auto again = (*peak)->finish();
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().to_string(),
            dir("sb1") + "/memory.peak: this call's peak was already read");
}

// Linux sets the other descriptors to the usage at a reset, forgetting the
// peak they reached before it: a call started later must not erase it.
TEST_F(CgroupFakeV2, ACallStartedLaterDoesNotEraseTheRunningCallsPeak) {
  auto cg = create_cgroup(layout_, "ringfence", "sb1");
  ASSERT_TRUE(cg.ok()) << cg.error().to_string();
  put(dir("sb1") + "/memory.peak", "0\n");
  auto first = (*cg)->start_call_peak();
  ASSERT_TRUE(first.ok()) << first.error().to_string();
  rewrite(dir("sb1") + "/memory.peak", "300\n");  // the first call's peak so far
  auto second = (*cg)->start_call_peak();
  ASSERT_TRUE(second.ok()) << second.error().to_string();
  rewrite(dir("sb1") + "/memory.peak", "20\n");  // both descriptors after the reset
  EXPECT_EQ(*(*second)->finish(), 20u);
  EXPECT_EQ(*(*first)->finish(), 300u);
  // A call dropped unread is forgotten: later starts do not read it.
  auto dropped = (*cg)->start_call_peak();
  ASSERT_TRUE(dropped.ok());
  dropped->reset();
  auto third = (*cg)->start_call_peak();
  ASSERT_TRUE(third.ok()) << third.error().to_string();
}

// Before Linux 6.12 memory.peak takes no write (the open for writing fails
// with EACCES, or a write with EINVAL; here /dev/full's ENOSPC stands in):
// no call peak, and later calls do not ask again.
TEST_F(CgroupFakeV2, ARefusedResetMeansNoCallPeakAndIsNotAskedAgain) {
  auto cg = create_cgroup(layout_, "ringfence", "sb1");
  ASSERT_TRUE(cg.ok()) << cg.error().to_string();
  const std::string file = dir("sb1") + "/memory.peak";
  fs::create_symlink("/dev/full", file);
  auto peak = (*cg)->start_call_peak();
  ASSERT_FALSE(peak.ok());
  EXPECT_EQ(peak.error().to_string(), "write " + file + ": No space left on device");
  fs::remove(file);
  put(file, "4096\n");
  peak = (*cg)->start_call_peak();
  ASSERT_FALSE(peak.ok());
  EXPECT_EQ(peak.error().to_string(),
            "reset " + file + " (refused before): No space left on device");
  EXPECT_EQ(slurp(file), "4096\n") << "not written";
}

TEST_F(CgroupFakeV2, NoPeakFileMeansNoCallPeak) {  // before Linux 5.19
  auto cg = create_cgroup(layout_, "ringfence", "sb1");
  ASSERT_TRUE(cg.ok()) << cg.error().to_string();
  auto peak = (*cg)->start_call_peak();
  ASSERT_FALSE(peak.ok());
  EXPECT_EQ(peak.error().sys_errno, ENOENT);
}

// What a call's result says, given what the cgroup could tell.
class CallUsageFakeV2 : public CgroupFakeV2 {
 protected:
  void SetUp() override {
    CgroupFakeV2::SetUp();
    auto cg = create_cgroup(layout_, "ringfence", "sb1");
    ASSERT_TRUE(cg.ok()) << cg.error().to_string();
    cg_ = std::move(*cg);
    put(file("memory.events"), "oom 0\noom_kill 0\n");
    put(file("pids.events"), "max 0\n");
  }
  std::string file(const std::string& name) const { return dir("sb1") + "/" + name; }
  // A call whose own ru_maxrss was `max_rss`, with `during` run while it is watched.
  ExecResult call(
      uint64_t max_rss, const std::function<void()>& during = [] {}) {
    CallWatch watch = watch_call(cg_.get());
    during();
    ExecResult r;
    r.peak_memory_bytes = max_rss;
    usage_.fold(watch, r);
    return r;
  }

  std::unique_ptr<Cgroup> cg_;
  CallUsage usage_;
};

TEST_F(CallUsageFakeV2, TheSandboxsPeakDuringTheCallRaisesTheCallsOwnMaxRss) {
  put(file("memory.peak"), "0\n");
  ExecResult r = call(5 * kMiB, [&] { rewrite(file("memory.peak"), std::to_string(64 * kMiB)); });
  EXPECT_EQ(r.peak_memory_bytes, 64 * kMiB);
  r = call(5 * kMiB, [&] { rewrite(file("memory.peak"), std::to_string(1 * kMiB)); });
  EXPECT_EQ(r.peak_memory_bytes, 5 * kMiB);
}

TEST_F(CallUsageFakeV2, WithoutACallPeakTheResultIsTheCallsOwnMaxRss) {
  fs::create_symlink("/dev/full", file("memory.peak"));  // the kernel refuses the reset
  put(file("memory.current"), std::to_string(300 * kMiB));
  ExecResult r = call(5 * kMiB);
  EXPECT_EQ(r.peak_memory_bytes, 5 * kMiB) << "never the sandbox's lifetime peak";
  EXPECT_FALSE(r.oom_killed);
  // OOM kills and the pids limit are still told, per call.
  put(file("memory.events"), "oom 1\noom_kill 1\n");
  r = call(5 * kMiB);
  EXPECT_TRUE(r.oom_killed);
  EXPECT_EQ(r.limit, "memory");
  put(file("pids.events"), "max 2\n");
  r = call(5 * kMiB);
  EXPECT_FALSE(r.oom_killed) << "the kill was the last call's";
  EXPECT_EQ(r.limit, "pids");
  EXPECT_EQ(r.peak_memory_bytes, 5 * kMiB);
}

TEST_F(CgroupFakeV2, PidsReadsCgroupProcs) {
  auto cg = create_cgroup(layout_, "ringfence", "sb1");
  ASSERT_TRUE(cg.ok()) << cg.error().to_string();
  ASSERT_TRUE((*cg)->add_process(1234).ok());
  EXPECT_EQ(slurp(dir("sb1") + "/cgroup.procs"), "1234");
  put(dir("sb1") + "/cgroup.procs", "12\n7\n");
  auto pids = (*cg)->pids();
  ASSERT_TRUE(pids.ok()) << pids.error().to_string();
  EXPECT_EQ(*pids, (std::vector<pid_t>{7, 12}));
}

TEST_F(CgroupFakeV2, ListAndRemove) {
  auto a = create_cgroup(layout_, "ringfence", "a");
  auto b = create_cgroup(layout_, "ringfence", "b");
  ASSERT_TRUE(a.ok() && b.ok());
  auto names = list_cgroups(layout_, "ringfence");
  ASSERT_TRUE(names.ok()) << names.error().to_string();
  EXPECT_EQ(*names, (std::vector<std::string>{"a", "b"}));  // not cgroup.subtree_control

  ASSERT_TRUE((*a)->apply({1, 1 << 20, 4}).ok());  // leaves files in the directory
  ASSERT_TRUE((*a)->remove().ok());
  EXPECT_FALSE(fs::exists(dir("a")));
  EXPECT_TRUE(fs::is_directory(tmp_.path() + "/ringfence"));  // the parent stays
  EXPECT_TRUE((*a)->remove().ok());                           // already gone is fine
  EXPECT_EQ(*list_cgroups(layout_, "ringfence"), std::vector<std::string>{"b"});
  EXPECT_TRUE(list_cgroups(layout_, "nothing-here")->empty());
}

TEST_F(CgroupFakeV2, FailureHalfwayLeavesNoSandboxDirectory) {
  // The parent's cgroup.subtree_control cannot be written: a directory.
  ASSERT_TRUE(fs::create_directories(tmp_.path() + "/ringfence/cgroup.subtree_control"));
  auto cg = create_cgroup(layout_, "ringfence", "sb1");
  ASSERT_FALSE(cg.ok());
  EXPECT_EQ(cg.error().to_string(),
            "open " + tmp_.path() + "/ringfence/cgroup.subtree_control: Is a directory");
  EXPECT_FALSE(fs::exists(dir("sb1")));
}

TEST_F(CgroupFakeV2, ExistingSandboxDirectoryIsAnErrorAndIsKept) {
  ASSERT_TRUE(fs::create_directories(dir("sb1")));
  auto cg = create_cgroup(layout_, "ringfence", "sb1");
  ASSERT_FALSE(cg.ok());
  EXPECT_EQ(cg.error().to_string(), "mkdir " + dir("sb1") + ": File exists");
  EXPECT_TRUE(fs::is_directory(dir("sb1")));
}

TEST_F(CgroupFakeV2, BadNamesAreRejected) {
  EXPECT_EQ(create_cgroup(layout_, "ringfence", "../x").error().to_string(),
            "cgroup name: invalid: \"../x\"");
  EXPECT_EQ(create_cgroup(layout_, "/abs", "x").error().to_string(),
            "cgroup parent: invalid: \"/abs\"");
}

class CgroupFakeV1 : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(tmp_.path().empty());
    layout_.version = CgroupVersion::kV1;
    layout_.fake = true;
    for (const char* mount : {"memory", "pids", "cpu,cpuacct"}) {
      ASSERT_TRUE(fs::create_directory(tmp_.path() + "/" + mount));
    }
    layout_.v1_mounts = {{"memory", tmp_.path() + "/memory"},
                         {"pids", tmp_.path() + "/pids"},
                         {"cpu", tmp_.path() + "/cpu,cpuacct"},
                         {"cpuacct", tmp_.path() + "/cpu,cpuacct"}};
  }
  std::string dir(const std::string& mount, const std::string& name = "sb1") const {
    return tmp_.path() + "/" + mount + "/ringfence/" + name;
  }

  TempDir tmp_;
  CgroupLayout layout_;
};

TEST_F(CgroupFakeV1, CoMountedControllersShareOneDirectory) {
  auto cg = create_cgroup(layout_, "ringfence", "sb1");
  ASSERT_TRUE(cg.ok()) << cg.error().to_string();
  EXPECT_EQ((*cg)->paths(),
            (std::vector<std::string>{dir("memory"), dir("pids"), dir("cpu,cpuacct")}));
  EXPECT_EQ((*cg)->clone_into_fd(), -1);
}

// Pause (issue 42): the freezer's hierarchy where it is mounted, its state
// written; without it, an error saying so. v2: cgroup.freeze.
TEST_F(CgroupFakeV1, TheFreezerIsUsedWhereMountedAndNamedWhereNot) {
  auto without = create_cgroup(layout_, "ringfence", "sb0");
  ASSERT_TRUE(without.ok()) << without.error().to_string();
  auto refused = (*without)->freeze(true);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("freezer is not mounted"), std::string::npos);
  ASSERT_TRUE(fs::create_directory(tmp_.path() + "/freezer"));
  layout_.v1_mounts["freezer"] = tmp_.path() + "/freezer";
  auto cg = create_cgroup(layout_, "ringfence", "sb1");
  ASSERT_TRUE(cg.ok()) << cg.error().to_string();
  EXPECT_EQ((*cg)->paths().back(), dir("freezer"));
  ASSERT_TRUE((*cg)->freeze(true).ok());
  EXPECT_EQ(slurp(dir("freezer") + "/freezer.state"), "FROZEN");
  ASSERT_TRUE((*cg)->freeze(false).ok());
  EXPECT_EQ(slurp(dir("freezer") + "/freezer.state"), "THAWED");
}

TEST_F(CgroupFakeV2, FreezeWritesCgroupFreeze) {
  auto cg = create_cgroup(layout_, "ringfence", "sb1");
  ASSERT_TRUE(cg.ok()) << cg.error().to_string();
  ASSERT_TRUE((*cg)->freeze(true).ok());
  EXPECT_EQ(slurp(dir("sb1") + "/cgroup.freeze"), "1");
  ASSERT_TRUE((*cg)->freeze(false).ok());
  EXPECT_EQ(slurp(dir("sb1") + "/cgroup.freeze"), "0");
}

TEST_F(CgroupFakeV1, ApplyWritesV1LimitFiles) {
  auto cg = create_cgroup(layout_, "ringfence", "sb1");
  ASSERT_TRUE(cg.ok()) << cg.error().to_string();
  put(dir("memory") + "/memory.memsw.limit_in_bytes", "9223372036854771712\n");
  ASSERT_TRUE((*cg)->apply({1.5, 64ull << 20, 32}).ok());
  EXPECT_EQ(slurp(dir("memory") + "/memory.limit_in_bytes"), "67108864");
  EXPECT_EQ(slurp(dir("memory") + "/memory.memsw.limit_in_bytes"), "67108864");
  EXPECT_EQ(slurp(dir("pids") + "/pids.max"), "32");
  EXPECT_EQ(slurp(dir("cpu,cpuacct") + "/cpu.cfs_period_us"), "100000");
  EXPECT_EQ(slurp(dir("cpu,cpuacct") + "/cpu.cfs_quota_us"), "150000");
}

TEST_F(CgroupFakeV1, NoMemswFileIsSkippedAndZeroMeansUnlimited) {
  auto cg = create_cgroup(layout_, "ringfence", "sb1");
  ASSERT_TRUE(cg.ok()) << cg.error().to_string();
  ASSERT_TRUE((*cg)->apply({0, 0, 0}).ok());
  EXPECT_FALSE(fs::exists(dir("memory") + "/memory.memsw.limit_in_bytes"));
  EXPECT_EQ(slurp(dir("memory") + "/memory.limit_in_bytes"), "-1");
  EXPECT_EQ(slurp(dir("pids") + "/pids.max"), "max");
  EXPECT_EQ(slurp(dir("cpu,cpuacct") + "/cpu.cfs_quota_us"), "-1");
}

TEST_F(CgroupFakeV1, AddProcessWritesEveryDirectory) {
  auto cg = create_cgroup(layout_, "ringfence", "sb1");
  ASSERT_TRUE(cg.ok()) << cg.error().to_string();
  ASSERT_TRUE((*cg)->add_process(4321).ok());
  for (const char* mount : {"memory", "pids", "cpu,cpuacct"}) {
    EXPECT_EQ(slurp(dir(mount) + "/cgroup.procs"), "4321") << mount;
  }
  put(dir("pids") + "/cgroup.procs", "4321\n99\n");
  EXPECT_EQ(*(*cg)->pids(), (std::vector<pid_t>{99, 4321}));
}

TEST_F(CgroupFakeV1, UsageParsesV1CounterFiles) {
  auto cg = create_cgroup(layout_, "ringfence", "sb1");
  ASSERT_TRUE(cg.ok()) << cg.error().to_string();
  put(dir("memory") + "/memory.max_usage_in_bytes", "16777216\n");
  put(dir("memory") + "/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n");
  put(dir("pids") + "/pids.events", "max 7\n");
  auto u = (*cg)->usage();
  ASSERT_TRUE(u.ok()) << u.error().to_string();
  EXPECT_EQ(u->memory_peak_bytes, 16777216u);
  EXPECT_EQ(u->oom_kills, 2u);
  EXPECT_EQ(u->pids_max_hits, 7u);

  // Kernels before 4.13 have no oom_kill line.
  put(dir("memory") + "/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\n");
  EXPECT_EQ((*cg)->usage()->oom_kills, 0u);

  // Held, a fake tree's files are opened at each read: the test rewrites them.
  auto held = (*cg)->hold_counters();
  EXPECT_EQ(held->read()->pids_max_hits, 7u);
  put(dir("pids") + "/pids.events", "max 8\n");
  EXPECT_EQ(held->read()->pids_max_hits, 8u);
}

TEST_F(CgroupFakeV1, CallPeakResetsMaxUsageOfACgroupMadeHere) {
  auto cg = create_cgroup(layout_, "ringfence", "sb1");
  ASSERT_TRUE(cg.ok()) << cg.error().to_string();
  const std::string file = dir("memory") + "/memory.max_usage_in_bytes";
  put(file, "314572800\n");
  auto first = (*cg)->start_call_peak();
  ASSERT_TRUE(first.ok()) << first.error().to_string();
  EXPECT_EQ(slurp(file), "0");
  rewrite(file, "8192\n");
  // One counter for all: a second call's reset would erase the first's 8192.
  auto second = (*cg)->start_call_peak();
  ASSERT_TRUE(second.ok()) << second.error().to_string();
  EXPECT_EQ(slurp(file), "0");
  rewrite(file, "4096\n");
  EXPECT_EQ(*(*first)->finish(), 8192u);
  EXPECT_EQ(*(*second)->finish(), 4096u);
}

TEST_F(CgroupFakeV1, CallPeakIsNotResetInACgroupFoundNotMade) {
  ASSERT_TRUE(create_cgroup(layout_, "ringfence", "sb1").ok());
  const std::string file = dir("memory") + "/memory.max_usage_in_bytes";
  put(file, "314572800\n");
  auto found = open_cgroup(layout_, "ringfence", "sb1");  // as docker's is found
  ASSERT_TRUE(found.ok()) << found.error().to_string();
  auto peak = (*found)->start_call_peak();
  ASSERT_FALSE(peak.ok());
  EXPECT_EQ(slurp(file), "314572800\n");
}

TEST_F(CgroupFakeV1, ListAndRemove) {
  auto a = create_cgroup(layout_, "ringfence", "a");
  auto b = create_cgroup(layout_, "ringfence", "b");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*list_cgroups(layout_, "ringfence"), (std::vector<std::string>{"a", "b"}));
  ASSERT_TRUE((*a)->apply({1, 1 << 20, 4}).ok());
  ASSERT_TRUE((*a)->remove().ok());
  for (const char* mount : {"memory", "pids", "cpu,cpuacct"}) {
    EXPECT_FALSE(fs::exists(dir(mount, "a"))) << mount;
    EXPECT_TRUE(fs::is_directory(tmp_.path() + "/" + mount + "/ringfence")) << mount;
  }
  EXPECT_EQ(*list_cgroups(layout_, "ringfence"), std::vector<std::string>{"b"});
}

TEST_F(CgroupFakeV1, FailureHalfwayRemovesWhatWasMade) {
  fs::remove(tmp_.path() + "/pids");  // memory's directory gets made, then pids fails
  auto cg = create_cgroup(layout_, "ringfence", "sb1");
  ASSERT_FALSE(cg.ok());
  EXPECT_EQ(cg.error().to_string(),
            "mkdir " + tmp_.path() + "/pids/ringfence: No such file or directory");
  EXPECT_FALSE(fs::exists(dir("memory")));
  EXPECT_TRUE(fs::is_directory(tmp_.path() + "/memory/ringfence"));
  EXPECT_FALSE(fs::exists(dir("cpu,cpuacct")));
}

TEST_F(CgroupFakeV1, UnmountedControllerIsAnErrorNamingIt) {
  layout_.v1_mounts.erase("cpuacct");
  auto cg = create_cgroup(layout_, "ringfence", "sb1");
  ASSERT_FALSE(cg.ok());
  EXPECT_EQ(cg.error().to_string(), "cgroup v1: cpuacct not mounted");
  EXPECT_FALSE(fs::exists(dir("memory")));
  EXPECT_FALSE(fs::exists(dir("pids")));
}

// The real cgroupfs of this machine: needs root.
class CgroupReal : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) RF_SKIP() << "needs root to create cgroups";
    auto layout = detect_cgroup_layout();
    if (!layout) RF_SKIP() << "no usable cgroups: " << layout.error().to_string();
    layout_ = *layout;
    const std::string name = "unit-" + std::to_string(::getpid()) + "-" +
                             ::testing::UnitTest::GetInstance()->current_test_info()->name();
    auto cg = create_cgroup(layout_, kParent, name);
    ASSERT_TRUE(cg.ok()) << cg.error().to_string();
    cg_ = std::move(*cg);
    name_ = name;
  }
  void TearDown() override {
    if (!cg_) return;
    EXPECT_TRUE(cg_->kill_all().ok());
    EXPECT_TRUE(cg_->remove().ok());
  }

  bool v2() const { return layout_.version == CgroupVersion::kV2; }
  std::string file(const std::string& controller, const std::string& name) const {
    const std::string root = v2() ? layout_.v2_root : layout_.v1_mounts.at(controller);
    return root + "/" + kParent + "/" + name_ + "/" + name;
  }

  // A child that waits for a byte on a pipe, joins the cgroup in between, then
  // runs `body` and _exits with its result.
  template <class F>
  pid_t fork_in_cgroup(F body) {
    int p[2];
    if (::pipe(p) != 0) return -1;
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(p[1]);
      char c;
      if (::read(p[0], &c, 1) != 1) ::_exit(100);
      ::_exit(body());
    }
    ::close(p[0]);
    if (pid > 0) {
      const bool added = cg_->add_process(pid).ok();
      if (!added) ::kill(pid, SIGKILL);
      (void)!::write(p[1], "x", 1);
    }
    ::close(p[1]);
    return pid;
  }

  // Touches `mib` MiB in a child in the cgroup, which then exits.
  void touch(size_t mib) {
    const pid_t child = fork_in_cgroup([mib] {
      const size_t size = mib << 20;
      void* mem = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (mem == MAP_FAILED) return 2;
      for (size_t i = 0; i < size; i += 4096) static_cast<volatile char*>(mem)[i] = 1;
      return 0;
    });
    ASSERT_GT(child, 0);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  }

  static constexpr char kParent[] = "ringfence-test";
  CgroupLayout layout_;
  std::string name_;
  std::unique_ptr<Cgroup> cg_;
};

std::string trimmed(const std::string& path) {
  std::string s = slurp(path);
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

TEST_F(CgroupReal, LimitsProcessesUsageKillAndRemove) {
  ASSERT_TRUE(cg_->apply({0.5, 64ull << 20, 16}).ok());
  if (v2()) {
    EXPECT_EQ(trimmed(file("memory", "memory.max")), "67108864");
    if (fs::exists(file("memory", "memory.swap.max"))) {
      EXPECT_EQ(trimmed(file("memory", "memory.swap.max")), "0");
    }
    EXPECT_EQ(trimmed(file("cpu", "cpu.max")), "50000 100000");
  } else {
    EXPECT_EQ(trimmed(file("memory", "memory.limit_in_bytes")), "67108864");
    if (fs::exists(file("memory", "memory.memsw.limit_in_bytes"))) {
      EXPECT_EQ(trimmed(file("memory", "memory.memsw.limit_in_bytes")), "67108864");
    }
    EXPECT_EQ(trimmed(file("cpu", "cpu.cfs_period_us")), "100000");
    EXPECT_EQ(trimmed(file("cpu", "cpu.cfs_quota_us")), "50000");
  }
  EXPECT_EQ(trimmed(file("pids", "pids.max")), "16");
  auto names = list_cgroups(layout_, kParent);
  ASSERT_TRUE(names.ok()) << names.error().to_string();
  EXPECT_NE(std::find(names->begin(), names->end(), name_), names->end());

  const pid_t child = fork_in_cgroup([] {
    // Pages are charged to the cgroup they are first touched in.
    constexpr size_t kSize = 1 << 20;
    void* mem = ::mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) return 2;
    for (size_t i = 0; i < kSize; i += 4096) static_cast<volatile char*>(mem)[i] = 1;
    ::sleep(30);
    return 0;
  });
  ASSERT_GT(child, 0);
  auto pids = cg_->pids();
  ASSERT_TRUE(pids.ok()) << pids.error().to_string();
  EXPECT_EQ(*pids, std::vector<pid_t>{child});
  CgroupUsage usage;
  for (int i = 0; i < 200 && usage.memory_peak_bytes < (1u << 20); ++i) {
    if (i > 0) ::usleep(5000);
    auto u = cg_->usage();
    ASSERT_TRUE(u.ok()) << u.error().to_string();
    usage = *u;
  }
  EXPECT_GE(usage.memory_peak_bytes, 1u << 20);
  EXPECT_EQ(usage.oom_kills, 0u);
  EXPECT_EQ(usage.pids_max_hits, 0u);

  auto killed = cg_->kill_all();
  ASSERT_TRUE(killed.ok()) << killed.error().to_string();
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;

  const auto dirs = cg_->paths();
  auto removed = cg_->remove();
  ASSERT_TRUE(removed.ok()) << removed.error().to_string();
  for (const auto& d : dirs) EXPECT_FALSE(fs::exists(d)) << d;
  cg_.reset();
}

// The descriptors this process has open.
size_t open_fds() {
  return static_cast<size_t>(std::distance(fs::directory_iterator("/proc/self/fd"), {}));
}

TEST_F(CgroupReal, HeldCountersAreSharedAndClosedWithTheirLastHolder) {
  const size_t before = open_fds();
  auto first = cg_->hold_counters();
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(open_fds(), before) << "opened at the first read, not when held";
  auto read = first->read();
  ASSERT_TRUE(read.ok()) << read.error().to_string();
  const size_t reading = open_fds();
  EXPECT_EQ(reading, before + 2) << "OOM kills and pids events (each call has its own peak)";
  auto second = cg_->hold_counters();
  EXPECT_EQ(second.get(), first.get()) << "calls that overlap share one set";
  ASSERT_TRUE(second->read().ok());
  EXPECT_EQ(open_fds(), reading);
  first.reset();
  EXPECT_EQ(open_fds(), reading) << "still held by the second";
  second.reset();
  EXPECT_EQ(open_fds(), before) << "closed with the last holder";
  auto later = cg_->hold_counters();
  ASSERT_TRUE(later->read().ok()) << "a new set, opened again";
  EXPECT_EQ(open_fds(), reading);
}

TEST_F(CgroupReal, CallPeakCountsFromTheCallsStartNotFromTheCgroupsBirth) {
  ASSERT_NO_FATAL_FAILURE(touch(64));
  auto usage = cg_->usage();
  ASSERT_TRUE(usage.ok()) << usage.error().to_string();
  EXPECT_GE(usage->memory_peak_bytes, 64 * kMiB);

  const size_t before = open_fds();
  auto peak = cg_->start_call_peak();
  if (!peak.ok() && v2())
    RF_SKIP() << "this kernel cannot reset memory.peak (Linux 6.12+): " << peak.error().to_string();
  ASSERT_TRUE(peak.ok()) << peak.error().to_string();
  EXPECT_EQ(open_fds(), before + 1) << "a descriptor of the call's own";
  ASSERT_NO_FATAL_FAILURE(touch(8));
  auto read = (*peak)->finish();
  ASSERT_TRUE(read.ok()) << read.error().to_string();
  EXPECT_GE(*read, 8 * kMiB);
  EXPECT_LT(*read, 32 * kMiB) << "not the 64 MiB from before the call";
  peak->reset();
  EXPECT_EQ(open_fds(), before) << "closed with the call";
}

TEST_F(CgroupReal, CallsThatOverlapEachGetTheirOwnPeak) {
  auto first = cg_->start_call_peak();
  if (!first.ok() && v2())
    RF_SKIP() << "this kernel cannot reset memory.peak (Linux 6.12+): "
              << first.error().to_string();
  ASSERT_TRUE(first.ok()) << first.error().to_string();
  ASSERT_NO_FATAL_FAILURE(touch(64));
  auto second = cg_->start_call_peak();  // after the first call's peak has passed
  ASSERT_TRUE(second.ok()) << second.error().to_string();
  ASSERT_NO_FATAL_FAILURE(touch(8));
  auto second_peak = (*second)->finish();
  ASSERT_TRUE(second_peak.ok()) << second_peak.error().to_string();
  EXPECT_GE(*second_peak, 8 * kMiB);
  EXPECT_LT(*second_peak, 32 * kMiB);
  auto first_peak = (*first)->finish();
  ASSERT_TRUE(first_peak.ok()) << first_peak.error().to_string();
  EXPECT_GE(*first_peak, 64 * kMiB) << "kept through the second call's reset";
}

TEST_F(CgroupReal, MemoryLimitOomKills) {
  ASSERT_TRUE(cg_->apply({1, 16ull << 20, 64}).ok());
  // Held across the kill, as a call holds them: a kept file read again
  // must show what changed since its first read.
  auto held = cg_->hold_counters();
  auto before = held->read();
  ASSERT_TRUE(before.ok()) << before.error().to_string();
  EXPECT_EQ(before->oom_kills, 0u);
  const pid_t child = fork_in_cgroup([] {
    constexpr size_t kSize = 64ull << 20;
    void* mem = ::mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) return 2;
    auto* bytes = static_cast<volatile char*>(mem);
    for (size_t i = 0; i < kSize; i += 4096) bytes[i] = 1;
    return 0;  // survived: the limit did not hold
  });
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
  auto after = held->read();
  ASSERT_TRUE(after.ok()) << after.error().to_string();
  EXPECT_GE(after->oom_kills, 1u);
  auto usage = cg_->usage();
  ASSERT_TRUE(usage.ok()) << usage.error().to_string();
  EXPECT_EQ(usage->oom_kills, after->oom_kills);
}

TEST_F(CgroupReal, PidsLimitMakesForkFailWithEagain) {
  ASSERT_TRUE(cg_->apply({1, 64ull << 20, 8}).ok());
  auto held = cg_->hold_counters();  // as above
  auto before = held->read();
  ASSERT_TRUE(before.ok()) << before.error().to_string();
  EXPECT_EQ(before->pids_max_hits, 0u);
  const pid_t child = fork_in_cgroup([] {
    pid_t kids[20];
    int forked = 0;
    bool eagain = false;
    for (int i = 0; i < 20; ++i) {
      const pid_t k = ::fork();
      if (k == 0) {
        ::pause();
        ::_exit(0);
      }
      if (k > 0) kids[forked++] = k;
      if (k < 0 && errno == EAGAIN) eagain = true;
    }
    for (int i = 0; i < forked; ++i) {
      ::kill(kids[i], SIGKILL);
      ::waitpid(kids[i], nullptr, 0);
    }
    return eagain ? 42 : 1;
  });
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 42) << "no fork failed with EAGAIN";
  auto after = held->read();
  ASSERT_TRUE(after.ok()) << after.error().to_string();
  EXPECT_GE(after->pids_max_hits, 1u);
  auto usage = cg_->usage();
  ASSERT_TRUE(usage.ok()) << usage.error().to_string();
  EXPECT_EQ(usage->pids_max_hits, after->pids_max_hits);
}

}  // namespace
}  // namespace rf::host
