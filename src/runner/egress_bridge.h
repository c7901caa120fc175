// The egress bridge of a sandbox with `--network proxy` (issue 4): the tool
// runner listens on a loopback TCP address inside the sandbox (127.0.0.1:3128)
// and, for every connection it accepts, connects to the host's egress proxy
// through a unix socket mounted into the sandbox (/.ringfence/proxy.sock) and
// copies bytes both ways. No handshake, no parsing: the proxy reads the
// client's HTTP or SOCKS5 request itself (src/proxy/egress_proxy.h).
//
// Half-closes are passed on: when one side reads EOF, the other side's write
// end is shut down once everything before the EOF was written to it. A
// connection ends when both directions are done, or at the first error on
// either socket (both are closed then). One exception: when the proxy stops
// reading (it answered and closed, e.g. a 403 to an upload, or cut an upload
// at the byte cap), what it sent still reaches the client, the client's
// further bytes are read and dropped meanwhile, and then both are closed.
//
// Fails closed: when the unix connect fails (no proxy at the path, or its
// backlog is full) the client's connection is closed at once. Past
// kMaxConnections bridged connections, new ones are accepted and closed.
//
// The bridge is driven by the runner's epoll loop (level-triggered, non-blocking
// sockets) through a registration hook; it knows nothing of the protocol.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "core/result.h"
#include "core/unique_fd.h"

namespace rf::runner {

// `--egress-bridge ADDR:PORT=PATH`: 127.0.0.1:3128=/.ringfence/proxy.sock.
struct BridgeSpec {
  std::string address;      // an IPv4 dotted quad or an IPv6 address (no brackets)
  uint16_t port = 0;        // 1-65535
  std::string socket_path;  // absolute, as the runner sees it (not under --root)
};

// Strict: IP literals only (no names), a port of 1-65535, an absolute path
// that fits a unix socket address. The error names the argument.
Result<BridgeSpec> parse_bridge_spec(std::string_view text);

// "127.0.0.1:3128" or "[::1]:3128".
std::string listen_address(const BridgeSpec& spec);

class EgressBridge {
 public:
  static constexpr size_t kMaxConnections = 256;
  static constexpr size_t kBufferSize = 64u << 10;  // per direction of a connection

  // Sets the epoll interest of `fd` (0 removes it); the loop hands `tag` back
  // to on_event with the events. Tags stay below 2^62.
  using WatchFn = std::function<void(int fd, uint64_t tag, uint32_t events)>;

  // Listens on the spec's address now (the loop may start serving later:
  // connections wait in the backlog). An error names the address.
  static Result<std::unique_ptr<EgressBridge>> listen(const BridgeSpec& spec, WatchFn watch);
  ~EgressBridge();
  EgressBridge(const EgressBridge&) = delete;
  EgressBridge& operator=(const EgressBridge&) = delete;

  void on_event(uint64_t tag, uint32_t events);
  size_t connections() const { return conns_.size(); }

 private:
  struct Flow;
  struct Conn;

  EgressBridge(BridgeSpec spec, WatchFn watch, UniqueFd listener);
  void on_listener();
  bool accept_one();
  void bridge(UniqueFd client);
  UniqueFd connect_upstream() const;
  void on_conn(Conn& c, int side, uint32_t events);
  bool fill(Conn& c, int from);
  bool flush(Conn& c, int from);
  void update_watches(Conn& c);
  void close_conn(uint64_t id);
  void reserve_spare();

  BridgeSpec spec_;
  WatchFn watch_;
  UniqueFd listener_;
  UniqueFd spare_;  // an fd held back so that accept can shed connections at EMFILE
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::unique_ptr<Conn>> conns_;
};

}  // namespace rf::runner
