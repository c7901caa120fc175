// Host side: who owns a docker sandbox, as its labels say (host name, pid and
// the pid's start time, so a reused pid is not mistaken for the owner), and
// whether that owner still lives — which only this host can tell.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>

namespace rf::docker {

struct Owner {
  std::string host;
  int pid = 0;
  uint64_t start = 0;  // /proc/<pid>/stat field 22, clock ticks since boot
};

// This process.
const Owner& self_owner();

enum class OwnerState { kAlive, kGone, kUnknown /* another host, or no labels */ };
OwnerState owner_state(const std::map<std::string, std::string>& labels);

}  // namespace rf::docker
