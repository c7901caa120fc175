// Traffic to a port a process listens on inside the sandbox, from outside
// (port_exchange, protocol 0.5; issue 41): the host sends a request's bytes,
// the runner connects to 127.0.0.1:PORT in the sandbox's own network
// namespace, writes them, and sends back everything the connection answers
// until it closes. The sandbox gets no route and no listener of the host's:
// the traffic enters through the runner, over the protocol. Driven by the
// runner's epoll loop (non-blocking sockets); at most kMaxExchanges at once.
// An answer is at most the exchange's `max` bytes (more ends it with an
// error; 0 is no bound: a host that streams answers as they come). Protocol
// 0.6 keeps the connection open both ways: port_input brings more bytes
// (a WebSocket's frames), port_close ends it. Reading pauses while the
// runner's queue to the host is full (set_paused), as call output does.
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
  static constexpr size_t kMaxAnswer = 256u << 20;  // when the host names no max
  // Input not yet written to the port past which more is refused.
  static constexpr size_t kMaxPending = 8u << 20;

  // How the loop is told which fds to watch (0 events: none), and where the
  // answer's bytes and the end go (id, bytes) / (id, error or "").
  using WatchFn = std::function<void(int fd, uint32_t id, uint32_t events)>;
  using DataFn = std::function<void(uint32_t id, std::string_view bytes)>;
  using EndFn = std::function<void(uint32_t id, const std::string& error)>;
  PortExchanges(WatchFn watch, DataFn data, EndFn end)
      : watch_(std::move(watch)), data_(std::move(data)), end_(std::move(end)) {}

  // Starts one; an error (nothing started) names the port or the bound.
  Status start(uint32_t id, int port, std::string request, size_t max = kMaxAnswer);
  // More bytes for an open one; an error (it ends) past kMaxPending unwritten.
  void input(uint32_t id, std::string_view bytes);
  // The host's client left: the connection closes and its end is sent.
  void close(uint32_t id) { finish(id, ""); }
  void on_event(uint32_t id, uint32_t events);
  void set_paused(bool paused);
  bool has(uint32_t id) const { return open_.count(id) != 0; }

 private:
  struct Open {
    UniqueFd fd;
    std::string pending;  // request bytes not yet written
    bool connected = false;
    size_t answered = 0;
    size_t max = kMaxAnswer;  // 0: no bound
  };
  void finish(uint32_t id, const std::string& error);
  // Watches what `o` waits for now: writable while it has bytes to write (or
  // is connecting), readable unless paused.
  void rearm(uint32_t id, const Open& o);

  WatchFn watch_;
  DataFn data_;
  EndFn end_;
  std::map<uint32_t, Open> open_;
  bool paused_ = false;
};

}  // namespace rf::runner
