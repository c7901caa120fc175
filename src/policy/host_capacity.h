// What this host has (issue 39): no limit a tenant or an operator asks for is
// ever above it. Memory from /proc/meminfo (MemTotal), cpus from the cpus
// this process may run on.
#pragma once

#include <cstdint>

namespace rf::policy {

struct HostCapacity {
  uint64_t memory_bytes = 0;
  double cpus = 0;
};

// Read once and kept: a host's memory and cpus do not change under a process.
const HostCapacity& host_capacity();

}  // namespace rf::policy
