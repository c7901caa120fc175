#include "docker/owner.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "core/proc_stat.h"
#include "docker/container_spec.h"

namespace rf::docker {

const Owner& self_owner() {
  static const Owner me = [] {
    Owner o;
    char name[256] = {};
    if (::gethostname(name, sizeof name - 1) == 0) o.host = name;
    o.pid = ::getpid();
    o.start = start_time_of(o.pid);
    return o;
  }();
  return me;
}

OwnerState owner_state(const std::map<std::string, std::string>& labels) {
  auto get = [&](const char* key) {
    auto it = labels.find(key);
    return it == labels.end() ? std::string() : it->second;
  };
  const std::string host = get(kLabelOwnerHost);
  if (host.empty() || host != self_owner().host) return OwnerState::kUnknown;
  const int pid = std::atoi(get(kLabelOwnerPid).c_str());
  const uint64_t start = std::strtoull(get(kLabelOwnerStart).c_str(), nullptr, 10);
  if (pid <= 0) return OwnerState::kUnknown;
  const uint64_t now = start_time_of(pid);
  if (now == 0 || (start != 0 && now != start)) return OwnerState::kGone;
  return OwnerState::kAlive;
}

}  // namespace rf::docker
