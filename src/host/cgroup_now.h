// What a sandbox uses now (issue 41 item 6: the console shows memory and CPU
// in use beside their limits): read from the cgroup its PID 1 is in, found
// through /proc/PID/cgroup, so it works for any backend whose sandbox has a
// host pid (native; docker's container init). v2: memory.current and
// cpu.stat's usage_usec; v1: memory.usage_in_bytes and cpuacct.usage.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.h"

namespace rf::host {

struct ResourcesNow {
  uint64_t memory_bytes = 0;  // charged to the cgroup now (page cache included)
  uint64_t cpu_usec = 0;      // CPU time of every process in it, over its life
};

// `proc` and `cgroup_root` are for tests (a fake tree).
Result<ResourcesNow> resources_of_process(pid_t pid, const std::string& proc = "/proc",
                                          const std::string& cgroup_root = "/sys/fs/cgroup");

// The cgroup path of `controller` ("" for the v2 hierarchy) in the text of a
// /proc/PID/cgroup file; empty when it has none.
std::string cgroup_path_of(std::string_view proc_cgroup, std::string_view controller);

}  // namespace rf::host
