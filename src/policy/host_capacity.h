// What this host has (issue 39): no limit a tenant or an operator asks for is
// ever above it. Memory from /proc/meminfo (MemTotal), cpus from the cpus
// this process may run on.
#pragma once

#include <cstdint>

#include "core/result.h"
#include "sandbox/limits.h"

namespace rf::policy {

struct HostCapacity {
  uint64_t memory_bytes = 0;
  double cpus = 0;
};

// Read once and kept: a host's memory and cpus do not change under a process.
const HostCapacity& host_capacity();

// Limits no host could give: memory, or /workspace and /tmp (tmpfs, held in
// memory), above the host's memory; cpus above its cpus. The local
// operator's own bound (`sandbox exec --mem 1t`), which no operator policy
// raises either. The error names the spec field (limits.memory: map it with
// limit_of_spec_error) and what the host has.
Status check_host_capacity(const Limits& limits, const HostCapacity& host = host_capacity());

}  // namespace rf::policy
