#include "policy/host_capacity.h"

#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

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

}  // namespace rf::policy
