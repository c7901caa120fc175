#include "native/doctor.h"

#include <linux/landlock.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "core/io.h"
#include "core/log.h"
#include "host/runner_binary.h"
#include "host/uid_slots.h"
#include "proto/messages.h"

namespace rf::native {
namespace {

// Runs `fn` in a forked child (so nothing it changes reaches us) and returns
// its errno, or 0 when it succeeded.
template <class Fn>
int in_child(Fn fn) {
  const pid_t pid = ::fork();
  if (pid < 0) return errno;
  if (pid == 0) _exit(fn());
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return EINTR;
}

int clone_and_exit(unsigned long flags) {
  const long pid = ::syscall(SYS_clone, flags | SIGCHLD, nullptr, nullptr, nullptr, nullptr);
  if (pid < 0) return errno;
  if (pid == 0) _exit(0);
  int status = 0;
  ::waitpid(static_cast<pid_t>(pid), &status, 0);
  return 0;
}

HealthCheck check(std::string name, int err, std::string ok_detail, std::string remedy,
                  bool required = true) {
  HealthCheck c;
  c.name = std::move(name);
  c.ok = err == 0;
  c.detail = c.ok ? std::move(ok_detail) : std::string(std::strerror(err));
  if (!c.ok) c.remedy = std::move(remedy);
  c.required = required;
  return c;
}

std::string trimmed(const std::string& path) {
  auto t = read_file(path);
  if (!t) return "?";
  std::string s = *t;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

HealthCheck user_namespaces() {
  return check(
      "user namespaces", in_child([] { return clone_and_exit(CLONE_NEWUSER); }),
      "max_user_namespaces=" + trimmed("/proc/sys/user/max_user_namespaces"),
      "sysctl -w user.max_user_namespaces=15000 (and kernel.unprivileged_userns_clone=1 on Debian "
      "kernels that have it)");
}

HealthCheck pid_net_namespaces() {
  return check("pid, net, mount, ipc, uts namespaces", in_child([] {
                 return clone_and_exit(CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWNS |
                                       CLONE_NEWIPC | CLONE_NEWUTS);
               }),
               "created and ended",
               "a kernel built with CONFIG_PID_NS, CONFIG_NET_NS, CONFIG_UTS_NS, CONFIG_IPC_NS");
}

HealthCheck seccomp(const host::SeccompFilters* filters) {
  if (!filters)
    return check("seccomp", EINVAL, "", "a kernel with CONFIG_SECCOMP_FILTER and libseccomp 2.5");
  const int err = in_child([filters] {
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
    return host::load_seccomp_filters(*filters);
  });
  return check("seccomp", err,
               "default profile loads (" +
                   std::to_string(filters->allowlist.size() + filters->arg_rules.size()) +
                   " BPF instructions in 2 filters)",
               "a kernel with CONFIG_SECCOMP_FILTER");
}

HealthCheck cgroups(const DoctorInputs& in) {
  HealthCheck c;
  c.name = "cgroups";
  if (!in.layout) {
    c.detail = in.layout_error;
    c.remedy =
        "mount cgroup2 at /sys/fs/cgroup with memory, pids and cpu enabled, or cgroup v1 memory, "
        "pids, "
        "cpu and cpuacct hierarchies";
    return c;
  }
  std::string detail;
  if (in.layout->version == host::CgroupVersion::kV2) {
    detail = "v2 at " + in.layout->v2_root;
  } else {
    detail = "v1:";
    for (const auto& [ctl, _] : in.layout->v1_mounts) detail += " " + ctl;
  }
  // Create and remove a real cgroup: permissions and delegation are what fail in practice.
  auto cg =
      host::create_cgroup(*in.layout, in.cgroup_parent, "doctor-" + std::to_string(::getpid()));
  if (!cg) {
    c.detail = detail + "; " + cg.error().to_string();
    c.remedy = "run as root, or delegate a cgroup subtree to this user";
    return c;
  }
  auto applied = (*cg)->apply(host::CgroupLimits{1.0, 64ull << 20, 16});
  if (auto gone = (*cg)->remove(); !gone) {
    c.detail = "the test cgroup could not be removed: " + gone.error().to_string();
    c.remedy = "look for leftover cgroups under " + in.cgroup_parent;
    return c;
  }
  c.ok = applied.ok();
  c.detail =
      applied ? detail + "; limits apply under " + in.cgroup_parent : applied.error().to_string();
  if (!c.ok) c.remedy = "enable the memory, pids and cpu controllers for " + in.cgroup_parent;
  return c;
}

HealthCheck filesystem_support(const char* name, const char* fs) {
  auto text = read_file("/proc/filesystems");
  const bool ok = text && text->find(std::string("\t") + fs + "\n") != std::string::npos;
  return check(name, ok ? 0 : ENODEV, std::string(fs) + " available", std::string("modprobe ") + fs,
               /*required=*/false);
}

HealthCheck landlock() {
  const long abi =
      ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return check("landlock", abi >= 0 ? 0 : errno, "ABI v" + std::to_string(abi),
               "boot with lsm=...,landlock (not required by the native backend today)",
               /*required=*/false);
}

}  // namespace

// Each live sandbox holds one host uid range; a host at capacity creates none.
HealthCheck uid_ranges() {
  HealthCheck c;
  c.name = "host uid ranges";
  auto slot = host::acquire_uid_slot();
  c.ok = slot.ok();
  c.detail = c.ok ? "a free range of " + std::to_string(host::kUidRangeSize) + " uids (" +
                        std::to_string(host::kSlotCount) + " ranges in all, one per live sandbox)"
                  : slot.error().to_string();
  if (!c.ok) {
    c.remedy =
        "destroy sandboxes or reap orphans (ringfence sandbox reap --older-than 10m); each live "
        "sandbox holds one range";
  }
  return c;
}

std::vector<HealthCheck> native_health(const DoctorInputs& in) {
  // Free disk is a host check (sandbox/host_health.h): native sandboxes write to tmpfs.
  return {user_namespaces(),
          pid_net_namespaces(),
          seccomp(in.seccomp),
          cgroups(in),
          host::runner_health(in.runner_path),
          filesystem_support("overlayfs", "overlay"),
          landlock(),
          uid_ranges()};
}

}  // namespace rf::native
