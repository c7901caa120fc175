// A client of `ringfence serve` following a stream of server-sent events
// (a process's output, a watch), read raw from its socket, so that a test
// can wait for what it expects and then leave mid-stream.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <string>

#include "support/http_probe.h"

namespace rf::testing {

// One client following a stream, its bytes kept as they came.
class Follower {
 public:
  Follower(int port, const std::string& target, const std::string& token) : probe_(port) {
    EXPECT_TRUE(probe_.connected());
    EXPECT_TRUE(probe_.send_raw("GET " + target +
                                " HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\n"
                                "Authorization: Bearer " +
                                token + "\r\n\r\n"));
  }
  // True once what came so far holds `needle` (within `within`).
  bool shows(const std::string& needle,
             std::chrono::milliseconds within = std::chrono::seconds(30)) {
    const auto end = std::chrono::steady_clock::now() + within;
    while (seen_.find(needle) == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          end - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{probe_.fd(), POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
      char buf[8192];
      const ssize_t n = ::recv(probe_.fd(), buf, sizeof buf, 0);
      if (n <= 0) return seen_.find(needle) != std::string::npos;
      seen_.append(buf, static_cast<size_t>(n));
    }
    return true;
  }
  const std::string& seen() const { return seen_; }

 private:
  HttpProbe probe_;
  std::string seen_;
};

}  // namespace rf::testing
