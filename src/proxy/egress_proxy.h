// The host-side egress proxy for sandboxes with `--network proxy`.
//
// A sandbox's network namespace has only loopback. Its tool runner listens on
// 127.0.0.1:3128 inside and relays every connection it accepts, byte for byte
// and with no handshake of its own, to a unix socket of this proxy: one
// listening socket per sandbox, so every connection belongs to a sandbox. The
// proxy reads one request per connection:
//   - HTTP CONNECT host:port: "200 Connection established", then a tunnel;
//   - a plain HTTP request in absolute-URI form (GET http://host/path): sent to
//     the origin in origin form with the hop-by-hop headers dropped and
//     `Connection: close`; the connection closes when the origin's response
//     ends (no keep-alive: one request per connection);
//   - SOCKS5 (no authentication, CONNECT, IPv4/domain/IPv6).
// For each it parses the target, asks the sandbox's EgressPolicy about the
// name (before any DNS query: only allowed names are resolved), resolves it
// (the override map, then getaddrinfo off the I/O threads; IP literals are not
// resolved), asks the policy about every address (DNS rebinding) and connects
// to the first allowed one. A refusal is a 403 whose body names the reason;
// bad requests get 400, over the connection cap 429, unreachable origins 502,
// timeouts 504/408. Every connection ends in one ConnectionEvent.
//
// Fails closed: the sandbox has no route but the relay, and the relay has no
// peer but this proxy's socket. If the proxy dies its sockets are closed:
// connections in flight end, new ones are refused (ECONNREFUSED).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/unique_fd.h"
#include "net/edge_credential.h"
#include "net/egress_policy.h"
#include "proxy/connection_event.h"
#include "proxy/edge_link.h"
#include "proxy/request_head.h"

namespace rf::proxy {

struct ProxyOptions {
  int threads = 1;  // I/O threads; a connection stays on one
  // Consulted before DNS: name -> addresses (tests map names to loopback with
  // it; never edit /etc/hosts). The addresses still go through check_address.
  std::map<std::string, std::vector<net::IpAddress>> resolve_override;
  bool system_dns = true;  // false: a name not in resolve_override does not resolve
  std::chrono::milliseconds head_timeout{10000};     // to read a complete request (408)
  std::chrono::milliseconds connect_timeout{10000};  // resolve + connect, together (504)
  std::chrono::milliseconds idle_timeout{300000};    // nothing moved either way: closed
  HeadLimits head_limits;
  // Called once per connection when it ends, on an I/O thread (or on the
  // thread running remove_sandbox or the destructor). Must be thread-safe,
  // quick, and must not call back into the EgressProxy.
  std::function<void(const ConnectionEvent&)> on_event;
  // Told each name the proxy is about to resolve (override or DNS), from an
  // I/O thread. Tests use it to show a refused name is never looked up.
  std::function<void(const std::string& name)> on_lookup;
  bool socks5 = true;             // accept SOCKS5 as well as HTTP
  bool splice = true;             // tunnels copy with splice(2); false: read/write (for benchmarks)
  size_t pipe_size = 256 * 1024;  // per tunnel direction
  // ringfence-egress-tls, for the credentials swapped in at the edge.
  EdgeLinkOptions edge;
};

struct SandboxEgress {
  std::string sandbox_id;
  net::EgressPolicy policy;
  int max_connections = 64;     // open at once; one more gets 429
  uint64_t max_bytes_sent = 0;  // sandbox -> origins over its lifetime; 0: unlimited
};

struct SocketOwner {
  uid_t uid;
  gid_t gid;
};

struct SandboxStats {
  int open_connections = 0;
  uint64_t bytes_sent = 0;  // charged against max_bytes_sent
};

class EgressProxy {
 public:
  static Result<std::unique_ptr<EgressProxy>> start(ProxyOptions options);
  // Closes every listener and connection (each gets its event), then stops.
  ~EgressProxy();
  EgressProxy(const EgressProxy&) = delete;
  EgressProxy& operator=(const EgressProxy&) = delete;

  // Listens for `sandbox` on a new unix socket at `socket_path`, mode 0600,
  // owned by this process's user, or by `owner` when given (the host uid and
  // gid the sandbox's relay runs as: connecting needs write permission on the
  // socket). A stale socket there is replaced; any other file is an error.
  // Keep it in a directory only the host can write to.
  Status add_sandbox(SandboxEgress sandbox, const std::string& socket_path,
                     std::optional<SocketOwner> owner = std::nullopt);
  // The same on a listening unix stream socket the caller made (for example,
  // bound where and with the owner the relay needs). The proxy owns it now.
  Status add_sandbox(SandboxEgress sandbox, UniqueFd listener);
  // Closes the sandbox's listener (and removes its socket file, if the proxy
  // made it) and all its connections, then returns. Unknown ids are ignored.
  void remove_sandbox(const std::string& sandbox_id);

  std::optional<SandboxStats> stats(const std::string& sandbox_id) const;

  // ---- Credentials at the edge (issue 13; net/edge_credential.h)
  // The sandbox's own CA (for a spec with tls_intercept), made by
  // ringfence-egress-tls, which alone holds its key. Its certificate, PEM.
  Result<std::string> sandbox_ca(const std::string& sandbox_id);
  // The sandbox's credentials, all of them (replaces the earlier set; empty
  // takes them all away): from the next request on, its gateway URLs and
  // its intercepted hosts use these, and its placeholders are looked for.
  // `on_event` hears, on an I/O thread, each request that used or misplaced
  // one: it must be quick and must not call back into the proxy.
  Status bind_credentials(const std::string& sandbox_id, std::vector<net::EdgeCredential> creds,
                          std::function<void(const net::EdgeEvent&)> on_event);

  struct Impl;

 private:
  explicit EgressProxy(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rf::proxy
