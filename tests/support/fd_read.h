// Reading a pipe or a pty's master in tests, with a deadline.
#pragma once

#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <string>

namespace rf::testing {

// Reads from `fd` until `want` appears, the fd ends, or `within` passes;
// returns all that was read.
inline std::string read_until(int fd, const std::string& want,
                              std::chrono::seconds within = std::chrono::seconds(20)) {
  std::string seen;
  const auto end = std::chrono::steady_clock::now() + within;
  while (seen.find(want) == std::string::npos && std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    seen.append(buf, static_cast<size_t>(n));
  }
  return seen;
}

}  // namespace rf::testing
