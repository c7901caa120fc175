#include "native/inventory.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>

#include "core/io.h"
#include "core/proc_stat.h"

namespace rf::native {
namespace {

// Set-up takes milliseconds; a cgroup this old without processes is left over.
constexpr std::chrono::seconds kSetupGrace{60};

// "NSpid:\t4242\t1": a process that is PID 1 in its own namespace.
bool is_namespace_init(pid_t pid) {
  auto status = read_file("/proc/" + std::to_string(pid) + "/status");
  if (!status) return false;
  const auto at = status->find("NSpid:");
  if (at == std::string::npos) return false;
  const auto end = status->find('\n', at);
  const std::string line = status->substr(at, end - at);
  return line.size() > 2 && line.compare(line.size() - 2, 2, "\t1") == 0;
}

std::chrono::seconds age_of(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return std::chrono::seconds(0);
  const auto now = std::time(nullptr);
  return std::chrono::seconds(std::max<int64_t>(0, now - st.st_ctim.tv_sec));
}

SandboxInfo describe(const std::string& name, const host::Cgroup& cg) {
  SandboxInfo info;
  info.id = name;
  info.backend = "native";
  if (auto pids = cg.pids()) {
    for (pid_t p : *pids) {
      if (is_namespace_init(p)) info.pid = p;
    }
  }
  // The owner is the init's parent; once the owner dies the init is killed
  // (parent-death signal), so a live init with parent 1 is an orphan too.
  const auto stat = info.pid ? read_proc_stat(info.pid) : std::nullopt;
  const pid_t owner = stat ? stat->ppid : 0;
  info.owner_pid = owner > 1 ? owner : 0;
  const auto paths = cg.paths();
  if (!paths.empty()) info.age = age_of(paths.front());
  // On v1 the peak since the last call started, which reset it (each call
  // measures its own peak: host::Cgroup::start_call_peak); on v2 over the
  // sandbox's life.
  if (auto usage = cg.usage()) info.memory_bytes = usage->memory_peak_bytes;
  return info;
}

}  // namespace

Result<std::vector<SandboxInfo>> list_native_sandboxes(const host::CgroupLayout& layout,
                                                       const std::string& parent) {
  auto names = host::list_cgroups(layout, parent);
  if (!names) return names.take_error();
  std::vector<SandboxInfo> out;
  for (const auto& name : *names) {
    auto cg = host::open_cgroup(layout, parent, name);
    if (!cg) continue;  // removed while we looked
    out.push_back(describe(name, **cg));
  }
  return out;
}

Result<std::vector<SandboxInfo>> reap_native_sandboxes(const host::CgroupLayout& layout,
                                                       const std::string& parent,
                                                       std::chrono::seconds older_than,
                                                       bool dry_run) {
  auto names = host::list_cgroups(layout, parent);
  if (!names) return names.take_error();
  std::vector<SandboxInfo> reaped;
  for (const auto& name : *names) {
    auto cg = host::open_cgroup(layout, parent, name);
    if (!cg) continue;
    SandboxInfo info = describe(name, **cg);
    // A cgroup without a PID 1 is either left over (janitor killed too) or a
    // sandbox still being set up (the child joins it as its first step): only
    // the former is old. A live PID 1 whose owner is gone is an orphan at once.
    const bool leftover = info.pid == 0 && info.age >= kSetupGrace;
    const bool orphan = info.pid != 0 && info.owner_pid == 0;
    if (!leftover && !orphan && info.age < older_than) continue;
    if (!dry_run) {
      // PID 1 first: the kernel then ends its whole namespace.
      if (info.pid) ::kill(info.pid, SIGKILL);
      RF_TRY((*cg)->kill_all());
      RF_TRY((*cg)->remove());
    }
    reaped.push_back(info);
  }
  return reaped;
}

}  // namespace rf::native
