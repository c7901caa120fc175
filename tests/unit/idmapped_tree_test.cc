// What `sandbox reap` does with the volume mounts a docker worker that died
// left on the host (host/idmapped_tree.h detach_trees_under): each mount
// point under a sandbox's directory unmounted and removed, then the
// directory; gone already is no error.
#include "host/idmapped_tree.h"

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "support/ci_skip.h"

namespace rf::host {
namespace {

bool mounted(const std::string& path) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, point;
    fields >> id >> parent >> dev >> root >> point;
    if (point == path) return true;
  }
  return false;
}

TEST(IdmappedTree, WhatADeadWorkerLeftAttachedIsDetachedAndRemoved) {
  if (::geteuid() != 0) RF_SKIP() << "mounting needs root";
  char tmpl[] = "/tmp/rf-attached-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = std::string(tmpl) + "/rf-0123456789ab";
  for (const char* v : {"/0", "/1"}) {
    std::filesystem::create_directories(dir + v);
    ASSERT_EQ(::mount("tmpfs", (dir + v).c_str(), "tmpfs", 0, "size=1m"), 0) << v;
    std::ofstream(dir + v + "/data") << "volume data";
  }
  ASSERT_TRUE(mounted(dir + "/0"));
  auto s = detach_trees_under(dir);
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  EXPECT_FALSE(mounted(dir + "/0"));
  EXPECT_FALSE(mounted(dir + "/1"));
  EXPECT_FALSE(std::filesystem::exists(dir));
  EXPECT_TRUE(detach_trees_under(dir).ok()) << "gone already: nothing to do";
  std::filesystem::remove_all(tmpl);
}

}  // namespace
}  // namespace rf::host
