// What a sandbox uses now, read from the cgroup its PID 1 is in (issue 41
// item 6; host/cgroup_now.h), on a fake /proc and /sys/fs/cgroup of v2 and
// of v1 with cpu and cpuacct apart, and on this machine's own.
#include "host/cgroup_now.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace rf::host {
namespace {

namespace fs = std::filesystem;

class CgroupNowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rf-cgroup-now-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  void put(const std::string& path, const std::string& text) {
    fs::create_directories(fs::path(dir_ + path).parent_path());
    std::ofstream(dir_ + path) << text;
  }
  std::string dir_;
};

TEST_F(CgroupNowTest, V2ReadsMemoryCurrentAndCpuStat) {
  put("/proc/42/cgroup", "0::/ringfence/rf-1\n");
  put("/cg/ringfence/rf-1/memory.current", "1048576\n");
  put("/cg/ringfence/rf-1/cpu.stat", "usage_usec 2500\nuser_usec 2000\nsystem_usec 500\n");
  auto now = resources_of_process(42, dir_ + "/proc", dir_ + "/cg");
  ASSERT_TRUE(now.ok()) << now.error().to_string();
  EXPECT_EQ(now->memory_bytes, 1048576u);
  EXPECT_EQ(now->cpu_usec, 2500u);
}

TEST_F(CgroupNowTest, V1ReadsTheMemoryAndCpuacctHierarchiesApart) {
  put("/proc/7/cgroup",
      "9:name=systemd:/\n4:memory:/rf/rf-2\n2:cpuacct:/rf/rf-2\n1:cpu:/rf/rf-2\n0::/\n");
  put("/cg/memory/rf/rf-2/memory.usage_in_bytes", "2097152\n");
  put("/cg/cpuacct/rf/rf-2/cpuacct.usage", "3000000\n");
  auto now = resources_of_process(7, dir_ + "/proc", dir_ + "/cg");
  ASSERT_TRUE(now.ok()) << now.error().to_string();
  EXPECT_EQ(now->memory_bytes, 2097152u);
  EXPECT_EQ(now->cpu_usec, 3000u) << "cpuacct.usage is in ns";
}

TEST_F(CgroupNowTest, AGoneProcessOrAnUnreadableCgroupIsAnErrorNamingIt) {
  auto gone = resources_of_process(99, dir_ + "/proc", dir_ + "/cg");
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(gone.error().where.find("/99/cgroup"), std::string::npos);
  put("/proc/5/cgroup", "0::/nowhere\n");
  auto missing = resources_of_process(5, dir_ + "/proc", dir_ + "/cg");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().where.find("memory.current"), std::string::npos);
}

TEST(CgroupNow, ThisProcessUsesSomeMemory) {
  auto now = resources_of_process(::getpid());
  ASSERT_TRUE(now.ok()) << now.error().to_string();
  EXPECT_GT(now->memory_bytes, 0u);
}

TEST(CgroupNow, ThePathOfAControllerIsFoundInAList) {
  EXPECT_EQ(cgroup_path_of("3:cpu,cpuacct:/a\n0::/b\n", "cpuacct"), "/a");
  EXPECT_EQ(cgroup_path_of("3:cpu,cpuacct:/a\n0::/b\n", ""), "/b");
  EXPECT_EQ(cgroup_path_of("3:cpu,cpuacct:/a\n", "memory"), "");
  EXPECT_EQ(cgroup_path_of("garbage", ""), "");
}

}  // namespace
}  // namespace rf::host
