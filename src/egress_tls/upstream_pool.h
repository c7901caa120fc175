// A sandbox's TLS connections to its upstreams, kept between its requests
// (issue 13): a gateway or proxy-delivered request whose whole body is in
// hand goes out with `Connection: keep-alive`, and when its response ended by
// its framing the connection waits here for the sandbox's next request to
// the same host and port, so that request costs no TCP or TLS handshake
// upstream. Per sandbox: nothing of one sandbox's requests shares a
// connection with another's. An idle connection goes after 30 s, or when the
// upstream closed it; the sandbox's end drops them all.
#pragma once

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "egress_tls/tls_side.h"

namespace rf::egress_tls {

class UpstreamPool {
 public:
  static constexpr std::chrono::seconds kIdle{30};
  static constexpr size_t kPerKey = 4;

  // An idle connection to `key` ("host:port") that still looks open, if any.
  std::unique_ptr<Side> take(const std::string& key);
  // Keeps `side` for `key` (dropped when the pool is closed or full).
  void give(const std::string& key, std::unique_ptr<Side> side);
  // Drops every connection; what is given afterwards is dropped too.
  void close();

 private:
  struct Idle {
    std::unique_ptr<Side> side;
    std::chrono::steady_clock::time_point since;
  };
  std::mutex mu_;
  bool closed_ = false;
  std::map<std::string, std::deque<Idle>> idle_;
};

}  // namespace rf::egress_tls
