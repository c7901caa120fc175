#include "host/pid1_readback.h"

#include <linux/filter.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/io.h"
#include "proto/probe_facts.h"

namespace rf::host {

std::map<std::string, uint64_t> namespace_inodes(pid_t pid) {
  std::map<std::string, uint64_t> out;
  const std::string dir =
      pid == 0 ? std::string("/proc/self/ns/") : "/proc/" + std::to_string(pid) + "/ns/";
  for (const char* n : {"user", "mnt", "pid", "net", "ipc", "uts", "cgroup"}) {
    char buf[64];
    const ssize_t len = ::readlink((dir + n).c_str(), buf, sizeof buf - 1);
    if (len <= 0) continue;
    buf[len] = '\0';
    if (const char* open = std::strchr(buf, '[')) out[n] = std::strtoull(open + 1, nullptr, 10);
  }
  return out;
}

Result<std::vector<std::string>> read_seccomp_programs(pid_t pid) {
  const std::string where = "read seccomp filters of pid " + std::to_string(pid);
  if (pid <= 0) return make_error(where, "no process");
  if (::ptrace(PTRACE_SEIZE, pid, nullptr, nullptr) != 0) return sys_error(where + ": attach");
  struct Detach {
    pid_t pid;
    ~Detach() { ::ptrace(PTRACE_DETACH, pid, nullptr, nullptr); }
  } detach{pid};
  if (::ptrace(PTRACE_INTERRUPT, pid, nullptr, nullptr) != 0) return sys_error(where + ": stop");
  int status = 0;
  for (;;) {
    const pid_t w = ::waitpid(pid, &status, __WALL);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) return sys_error(where + ": wait");
  }
  if (!WIFSTOPPED(status)) return make_error(where, "the process ended");
  std::vector<std::string> out;
  for (unsigned long i = 0;; ++i) {
    const long n = ::ptrace(PTRACE_SECCOMP_GET_FILTER, pid, reinterpret_cast<void*>(i), nullptr);
    if (n < 0) {
      if (errno == ENOENT) break;  // past the last program
      return sys_error(where + ": PTRACE_SECCOMP_GET_FILTER");
    }
    std::string bytes(static_cast<size_t>(n) * sizeof(sock_filter), '\0');
    if (::ptrace(PTRACE_SECCOMP_GET_FILTER, pid, reinterpret_cast<void*>(i), bytes.data()) != n)
      return sys_error(where + ": PTRACE_SECCOMP_GET_FILTER");
    out.push_back(std::move(bytes));
  }
  return out;
}

StartReadback read_back_pid1(pid_t pid, bool shared_files) {
  StartReadback r;
  if (auto programs = read_seccomp_programs(pid)) {
    r.seccomp_programs = std::move(*programs);
  } else {
    r.seccomp_error = programs.error().to_string();
  }
  r.ns = namespace_inodes(pid);
  const std::string proc = "/proc/" + std::to_string(pid) + "/";
  const auto read = [&](const char* name) {
    auto text = read_file(proc + name);
    return text ? std::move(*text) : std::string();
  };
  r.uid_map = read("uid_map");
  r.gid_map = read("gid_map");
  if (!shared_files) return r;
  r.status = read("status");
  r.mountinfo = read("mountinfo");
  r.net_dev = read("net/dev");
  for (const auto& [name, res] : proto::kReportedRlimits) {
    rlimit rl{};
    if (::prlimit(pid, static_cast<__rlimit_resource>(res), nullptr, &rl) != 0) continue;
    r.rlimits.push_back(
        {name, static_cast<uint64_t>(rl.rlim_cur), static_cast<uint64_t>(rl.rlim_max)});
  }
  return r;
}

}  // namespace rf::host
