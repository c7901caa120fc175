#include "docker/owner.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "core/io.h"
#include "docker/container_spec.h"

namespace rf::docker {

uint64_t process_start_time(pid_t pid) {
  auto stat = rf::read_file("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return 0;
  // The command name (field 2) may hold spaces and parentheses: count from the last ')'.
  const auto close = stat->rfind(')');
  if (close == std::string::npos) return 0;
  size_t pos = close + 2;
  for (int field = 3; field < 22; ++field) {
    pos = stat->find(' ', pos);
    if (pos == std::string::npos) return 0;
    ++pos;
  }
  return std::strtoull(stat->c_str() + pos, nullptr, 10);
}

const Owner& self_owner() {
  static const Owner me = [] {
    Owner o;
    char name[256] = {};
    if (::gethostname(name, sizeof name - 1) == 0) o.host = name;
    o.pid = ::getpid();
    o.start = process_start_time(o.pid);
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
  const uint64_t now = process_start_time(pid);
  if (now == 0 || (start != 0 && now != start)) return OwnerState::kGone;
  return OwnerState::kAlive;
}

}  // namespace rf::docker
