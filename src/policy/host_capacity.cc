#include "policy/host_capacity.h"

#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "core/units.h"

namespace rf::policy {
namespace {

uint64_t mem_total() {
  FILE* f = std::fopen("/proc/meminfo", "re");
  if (f == nullptr) return 0;
  char line[256];
  uint64_t kib = 0;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::sscanf(line, "MemTotal: %lu kB", &kib) == 1) break;
  }
  std::fclose(f);
  return kib * 1024;
}

double cpu_count() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<double>(n) : 1.0;
}

}  // namespace

const HostCapacity& host_capacity() {
  static const HostCapacity capacity{mem_total(), cpu_count()};
  return capacity;
}

Status check_host_capacity(const Limits& limits, const HostCapacity& host) {
  const std::string memory = format_size_human(host.memory_bytes);
  if (host.memory_bytes > 0 && limits.memory_bytes > host.memory_bytes) {
    return make_error(
        find_limit("mem")->spec_field(),
        format_size(limits.memory_bytes) + " is more than this host's memory (" + memory + ")");
  }
  if (host.memory_bytes > 0 && limits.disk_bytes > host.memory_bytes) {
    return make_error(find_limit("disk")->spec_field(),
                      format_size(limits.disk_bytes) + " is more than this host's memory (" +
                          memory + "), which holds /workspace and /tmp");
  }
  if (host.cpus > 0 && limits.cpus > host.cpus) {
    return make_error(find_limit("cpu")->spec_field(),
                      find_limit("cpu")->get(limits) + " is more than this host's " +
                          std::to_string(static_cast<int>(host.cpus)) + " cpus");
  }
  return ok_status();
}

}  // namespace rf::policy
