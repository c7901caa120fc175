// Faults: the host process killed mid-call, PID 1 killed from the host.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>

#include <set>
#include <sstream>
#include <thread>

#include "host/cgroup.h"
#include "host/uid_slots.h"
#include "integration/harness.h"

namespace rf::testing {
namespace {

using Fault = SandboxTest;

// Host pids whose uid lies in one sandbox's uid range (other tests may run
// sandboxes at the same time).
std::vector<int> processes_in_slot(uint32_t slot) {
  std::vector<int> out;
  DIR* d = ::opendir("/proc");
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    struct stat st {};
    if (::stat((std::string("/proc/") + e->d_name).c_str(), &st) != 0) continue;
    uint32_t s;
    if (host::uid_slot_of(st.st_uid, &s) && s == slot) out.push_back(std::atoi(e->d_name));
  }
  ::closedir(d);
  return out;
}

uint32_t slot_of_pid(int pid) {
  struct stat st {};
  uint32_t slot = UINT32_MAX;
  if (::stat(("/proc/" + std::to_string(pid)).c_str(), &st) == 0)
    host::uid_slot_of(st.st_uid, &slot);
  return slot;
}

// The sandbox init among `parent`'s children: the one running as a sandbox uid.
int sandbox_child_of(int parent) {
  DIR* d = ::opendir("/proc");
  int found = 0;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const std::string stat = slurp(std::string("/proc/") + e->d_name + "/stat");
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    const int ppid = std::atoi(stat.c_str() + close + 4);
    if (ppid == parent && slot_of_pid(std::atoi(e->d_name)) != UINT32_MAX)
      found = std::atoi(e->d_name);
  }
  ::closedir(d);
  return found;
}

// The name of the sandbox cgroup `pid` is in (under the "ringfence" parent),
// read from /proc/PID/cgroup lines "ID:CONTROLLERS:PATH"; "" when none.
std::string sandbox_cgroup_of(int pid) {
  std::istringstream lines(slurp("/proc/" + std::to_string(pid) + "/cgroup"));
  std::string line;
  while (std::getline(lines, line)) {
    const auto at = line.find("/ringfence/");
    if (at == std::string::npos) continue;
    return line.substr(at + std::string_view("/ringfence/").size());
  }
  return "";
}

bool eventually(const std::function<bool()>& cond, std::chrono::milliseconds within) {
  const auto end = std::chrono::steady_clock::now() + within;
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return cond();
}

TEST_F(Fault, KillNineOfTheCliMidCallLeavesNothingBehind) {
  const pid_t pid = fork();
  if (pid == 0) {
    const int devnull = ::open("/dev/null", O_RDWR);
    dup2(devnull, 0);
    dup2(devnull, 1);
    dup2(devnull, 2);
    execl(RF_CLI_PATH, RF_CLI_PATH, "sandbox", "exec", "--", "sh", "-c",
          "sleep 100 & setsid sleep 100 & sleep 100", nullptr);
    _exit(99);
  }
  // Wait until the sandbox's processes exist, then kill -9 the CLI.
  int init = 0;
  uint32_t slot = UINT32_MAX;
  ASSERT_TRUE(eventually(
      [&] {
        init = sandbox_child_of(pid);
        slot = init ? slot_of_pid(init) : UINT32_MAX;
        return init != 0 && processes_in_slot(slot).size() >= 5;
      },
      std::chrono::seconds(10)));
  // The sandbox's cgroup, as the host sees it ("4:memory:/ringfence/rf-..." on
  // v1, "0::/ringfence/rf-..." on v2), and its directories in this host's layout.
  const std::string id = sandbox_cgroup_of(init);
  ASSERT_FALSE(id.empty()) << slurp("/proc/" + std::to_string(init) + "/cgroup");
  auto layout = host::detect_cgroup_layout();
  ASSERT_TRUE(layout.ok()) << layout.error().to_string();
  auto cg = host::open_cgroup(*layout, "ringfence", id);
  ASSERT_TRUE(cg.ok()) << cg.error().to_string();
  const std::vector<std::string> dirs = (*cg)->paths();
  // One directory on v2; on v1 one per hierarchy of memory, pids, cpu,
  // cpuacct, and the freezer's where it is mounted (pause).
  std::set<std::string> hierarchies;
  for (const char* ctl : {"memory", "pids", "cpu", "cpuacct", "freezer"}) {
    if (layout->version == host::CgroupVersion::kV1 && layout->v1_mounts.count(ctl) != 0)
      hierarchies.insert(layout->v1_mounts.at(ctl));
  }
  EXPECT_EQ(dirs.size(), layout->version == host::CgroupVersion::kV2 ? 1u : hierarchies.size());
  struct stat st {};
  for (const auto& dir : dirs) ASSERT_EQ(::stat(dir.c_str(), &st), 0) << dir;

  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(eventually([&] { return processes_in_slot(slot).empty(); }, std::chrono::seconds(5)))
      << processes_in_slot(slot).size() << " sandbox processes left";
  for (const auto& dir : dirs) {
    EXPECT_TRUE(eventually([&] { return ::stat(dir.c_str(), &st) != 0; }, std::chrono::seconds(5)))
        << dir;
  }
}

TEST_F(Fault, KillingPid1FromTheHostEndsTheSandboxAndIsReported) {
  auto sb = make();
  ASSERT_TRUE(sb);
  const int init = sb->init_pid();
  const uint32_t slot_before = slot_of_pid(init);
  ASSERT_NE(slot_before, UINT32_MAX);
  std::thread killer([init] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ::kill(init, SIGKILL);
  });
  ExecCall call;
  call.argv = {"sleep", "30"};
  Captured c;
  auto r = sb->exec(call, c);
  killer.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().to_string(), "sandbox ended: tool runner (pid " + std::to_string(init) +
                                       ") killed by signal 9 (Killed)");
  // Later calls fail the same way; destroy still cleans up.
  auto again = sb->exec(call, c);
  ASSERT_FALSE(again.ok());
  const uint32_t slot = slot_before;
  EXPECT_TRUE(sb->destroy().ok());
  EXPECT_TRUE(eventually([&] { return processes_in_slot(slot).empty(); }, std::chrono::seconds(5)));
}

}  // namespace
}  // namespace rf::testing
