// The janitor at scale: a host process tracks more cgroup directories than
// the janitor used to hold (4,096: 1,024 sandboxes of four v1 hierarchies;
// it holds five a sandbox now, with the freezer),
// untracks some, tracks some again, then dies; the janitor removes exactly
// the directories still tracked. Plain directories stand in for cgroups (no
// root needed: one without a cgroup.procs file has no processes to kill).
#include "host/janitor.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace rf::host {
namespace {

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

TEST(Janitor, RemovesExactlyWhatIsStillTrackedWhenItsHostDies) {
  constexpr int kDirs = 6000;
  // On tmpfs where there is one: thousands of rmdirs on a disk file system take seconds.
  std::string pattern =
      exists("/dev/shm") ? "/dev/shm/rf-janitor-XXXXXX" : "/tmp/rf-janitor-XXXXXX";
  std::vector<char> tmpl(pattern.begin(), pattern.end());
  tmpl.push_back('\0');
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  const std::string root = tmpl.data();
  std::vector<std::string> dirs;
  for (int i = 0; i < kDirs; ++i) {
    // Long, alike names, as cgroup paths are: many share a prefix.
    dirs.push_back(root + "/sys-fs-cgroup-memory-ringfence-rf-" + std::to_string(100000 + i));
    ASSERT_EQ(::mkdir(dirs.back().c_str(), 0755), 0) << dirs.back();
  }
  // Kept: every third is untracked; every ninth of those tracked again.
  auto kept = [](int i) { return i % 3 == 0 && i % 9 != 0; };

  const pid_t host = ::fork();
  ASSERT_GE(host, 0);
  if (host == 0) {
    auto j = Janitor::get();
    if (!j.ok()) ::_exit(2);
    for (const auto& d : dirs) (*j)->track(d);
    for (int i = 0; i < kDirs; i += 3) (*j)->untrack(dirs[i]);
    for (int i = 0; i < kDirs; i += 9) (*j)->track(dirs[i]);
    ::_exit(0);  // the janitor's pipe reaches EOF: it cleans up
  }
  int status = 0;
  ASSERT_EQ(::waitpid(host, &status, 0), host);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  auto removed_all_tracked = [&] {
    for (int i = 0; i < kDirs; ++i) {
      if (!kept(i) && exists(dirs[i])) return false;
    }
    return true;
  };
  while (!removed_all_tracked() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  int tracked_left = 0, kept_gone = 0;
  for (int i = 0; i < kDirs; ++i) {
    if (kept(i)) {
      kept_gone += !exists(dirs[i]);
    } else {
      tracked_left += exists(dirs[i]);
    }
  }
  EXPECT_EQ(tracked_left, 0);
  EXPECT_EQ(kept_gone, 0);
  std::system(("rm -rf " + root).c_str());
}

}  // namespace
}  // namespace rf::host
