// Traffic to a port a process listens on inside the sandbox, from outside
// (port_exchange, protocol 0.5; issue 41): the host sends a request's bytes,
// the runner connects to 127.0.0.1:PORT in the sandbox's own network
// namespace, writes them, and sends back everything the connection answers
// until it closes. The sandbox gets no route and no listener of the host's:
// the traffic enters through the runner, over the protocol. Driven by the
// runner's epoll loop (non-blocking sockets); at most kMaxExchanges at once,
// each answer at most kMaxAnswer bytes (more ends it with an error).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "core/result.h"
#include "core/unique_fd.h"

namespace rf::runner {

class PortExchanges {
 public:
  static constexpr size_t kMaxExchanges = 64;
  static constexpr size_t kMaxAnswer = 256u << 20;

  // How the loop is told which fds to watch (0 events: none), and where the
  // answer's bytes and the end go (id, bytes) / (id, error or "").
  using WatchFn = std::function<void(int fd, uint32_t id, uint32_t events)>;
  using DataFn = std::function<void(uint32_t id, std::string_view bytes)>;
  using EndFn = std::function<void(uint32_t id, const std::string& error)>;
  PortExchanges(WatchFn watch, DataFn data, EndFn end)
      : watch_(std::move(watch)), data_(std::move(data)), end_(std::move(end)) {}

  // Starts one; an error (nothing started) names the port or the bound.
  Status start(uint32_t id, int port, std::string request);
  void on_event(uint32_t id, uint32_t events);
  bool has(uint32_t id) const { return open_.count(id) != 0; }

 private:
  struct Open {
    UniqueFd fd;
    std::string pending;  // request bytes not yet written
    bool connected = false;
    size_t answered = 0;
  };
  void finish(uint32_t id, const std::string& error);

  WatchFn watch_;
  DataFn data_;
  EndFn end_;
  std::map<uint32_t, Open> open_;
};

}  // namespace rf::runner
