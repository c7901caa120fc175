// The bidirectional copy between a sandbox's connection and its origin, once
// the proxy has decided: splice(2) through a pipe per direction (the bytes
// never enter user space), or read/write through a buffer. Counts the bytes
// each way, enforces the sandbox's cap on bytes sent and the idle timeout.
// Half-closes are passed on: EOF from one side shuts down writing to the other.
#pragma once

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/unique_fd.h"

namespace rf::proxy {

// The bytes a sandbox may still send, shared by all its connections. Bytes are
// reserved before they are read from the sandbox, so the cap holds exactly
// even with many connections at once.
class ByteBudget {
 public:
  explicit ByteBudget(uint64_t cap) : cap_(cap) {}  // 0: unlimited
  uint64_t cap() const { return cap_; }
  uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  bool exhausted() const { return cap_ != 0 && used() >= cap_; }
  // Grants up to `want` bytes; 0 when the cap is reached.
  uint64_t reserve(uint64_t want);
  void refund(uint64_t n) { used_.fetch_sub(n, std::memory_order_relaxed); }

 private:
  const uint64_t cap_;
  std::atomic<uint64_t> used_{0};
};

struct TunnelOptions {
  bool splice = true;  // false: read/write through a buffer
  size_t pipe_size =
      1 << 18;  // F_SETPIPE_SZ per direction (best effort); also the copy buffer size
  std::chrono::milliseconds idle_timeout{300000};
  bool end_on_down_eof = false;  // plain HTTP: done when the origin closes
};

class Tunnel {
 public:
  enum class End { closed, byte_cap, idle, error };
  using Done = std::function<void(End, std::string error)>;

  // `up_budget` (may be null) is charged for every byte sent to `upstream`.
  Tunnel(boost::asio::local::stream_protocol::socket& client,
         boost::asio::ip::tcp::socket& upstream, ByteBudget* up_budget, TunnelOptions options);
  Tunnel(const Tunnel&) = delete;
  Tunnel& operator=(const Tunnel&) = delete;

  // Sends `initial_up` to the origin first, then copies both ways. `keep`
  // keeps the owner (and so this tunnel and the sockets) alive while an
  // operation is pending. `done` is called once, on the sockets' io thread.
  void start(std::shared_ptr<void> keep, std::string initial_up, Done done);
  // No more callbacks; the owner closes the sockets, which cancels what is pending.
  void stop();

  uint64_t bytes_up() const { return up_.bytes; }
  uint64_t bytes_down() const { return down_.bytes; }

 private:
  struct Dir {
    int src = -1, dst = -1;
    UniqueFd pipe_r, pipe_w;
    std::vector<char> buf;
    size_t buf_off = 0;
    size_t chunk = 0;
    size_t pending = 0;  // read from src, not yet written to dst
    uint64_t bytes = 0;  // written to dst
    ByteBudget* budget = nullptr;
    bool eof = false;
    int err = 0;
  };
  enum class Step { wait_read, wait_write, yield, eof, cap, error };

  Step run(Dir& d);
  void drive(bool up);
  template <class Socket>
  void wait(Socket& s, bool read, bool up);
  void arm_idle();
  void finish(End e, std::string error);

  boost::asio::local::stream_protocol::socket& client_;
  boost::asio::ip::tcp::socket& upstream_;
  TunnelOptions opts_;
  boost::asio::steady_timer idle_timer_;
  std::chrono::steady_clock::time_point last_activity_;
  Dir up_, down_;
  std::string initial_;
  std::shared_ptr<void> keep_;
  Done done_;
  bool stopped_ = false;
};

}  // namespace rf::proxy
