#include "runner/egress_bridge.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <cstring>

namespace rf::runner {
namespace {

constexpr uint64_t kListenerTag = 0;
constexpr int kClient = 0, kUpstream = 1;
constexpr int kAcceptBatch = 32;  // per listener event, so connections cannot starve the rest
constexpr int kReadRounds = 4;    // reads (each followed by a write) per socket event
constexpr const char* kSyntax =
    "expected ADDR:PORT=PATH, as in 127.0.0.1:3128=/.ringfence/proxy.sock";

// Connection `id`'s socket on `side`: (id << 1) | side, never 0 (the listener).
uint64_t conn_tag(uint64_t id, int side) { return (id << 1) | static_cast<uint64_t>(side); }

Error spec_error(std::string_view text, std::string message) {
  return make_error("--egress-bridge " + std::string(text), std::move(message) + ": " + kSyntax);
}

bool is_ipv6(const BridgeSpec& spec) { return spec.address.find(':') != std::string::npos; }

// Digits only, 1-65535.
bool parse_port(std::string_view s, uint16_t* port) {
  if (s.empty() || s.size() > 5) return false;
  unsigned v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<unsigned>(c - '0');
  }
  if (v == 0 || v > 65535) return false;
  *port = static_cast<uint16_t>(v);
  return true;
}

// A sockaddr for the spec's address and port; false if the address is not a literal.
bool make_addr(const BridgeSpec& spec, sockaddr_storage* ss, socklen_t* len) {
  *ss = {};
  if (is_ipv6(spec)) {
    auto* a = reinterpret_cast<sockaddr_in6*>(ss);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(spec.port);
    *len = sizeof *a;
    return ::inet_pton(AF_INET6, spec.address.c_str(), &a->sin6_addr) == 1;
  }
  auto* a = reinterpret_cast<sockaddr_in*>(ss);
  a->sin_family = AF_INET;
  a->sin_port = htons(spec.port);
  *len = sizeof *a;
  return ::inet_pton(AF_INET, spec.address.c_str(), &a->sin_addr) == 1;
}

}  // namespace

// ---- the option ----

Result<BridgeSpec> parse_bridge_spec(std::string_view text) {
  const auto eq = text.find('=');
  if (eq == std::string_view::npos) return spec_error(text, "no =PATH");
  const std::string_view host_port = text.substr(0, eq);
  BridgeSpec spec;
  spec.socket_path = std::string(text.substr(eq + 1));
  std::string_view host, port;
  if (!host_port.empty() && host_port.front() == '[') {
    const auto close = host_port.find(']');
    if (close == std::string_view::npos || host_port.substr(close + 1, 1) != ":") {
      return spec_error(text, "an IPv6 address is written [ADDR]:PORT");
    }
    host = host_port.substr(1, close - 1);
    port = host_port.substr(close + 2);
    if (host.find(':') == std::string_view::npos) {
      return spec_error(text, "not an IPv6 address in brackets");
    }
  } else {
    const auto colon = host_port.rfind(':');
    if (colon == std::string_view::npos) return spec_error(text, "no port");
    host = host_port.substr(0, colon);
    port = host_port.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) {
      return spec_error(text, "an IPv6 address needs brackets");
    }
  }
  spec.address = std::string(host);
  if (!parse_port(port, &spec.port)) return spec_error(text, "the port must be 1-65535");
  sockaddr_storage ss;
  socklen_t len;
  if (!make_addr(spec, &ss, &len)) {
    return spec_error(text, "the address must be an IP address (a dotted quad, or [IPv6])");
  }
  if (spec.socket_path.empty() || spec.socket_path.front() != '/') {
    return spec_error(text, "the socket path must be absolute");
  }
  if (spec.socket_path.size() >= sizeof(sockaddr_un::sun_path)) {
    return spec_error(text, "the socket path is longer than a unix socket address takes (" +
                                std::to_string(sizeof(sockaddr_un::sun_path) - 1) + " bytes)");
  }
  return spec;
}

std::string listen_address(const BridgeSpec& spec) {
  const std::string port = ":" + std::to_string(spec.port);
  return is_ipv6(spec) ? "[" + spec.address + "]" + port : spec.address + port;
}

// ---- connections ----

// Bytes read from one side of a connection, not yet written to the other.
struct EgressBridge::Flow {
  std::unique_ptr<char[]> buf{new char[kBufferSize]};
  size_t head = 0, tail = 0;  // pending bytes are [head, tail)
  bool eof = false;           // the source read EOF
  // This direction is done: the destination's write end was shut down after
  // the EOF, or the destination is dead.
  bool shut = false;
  bool dead = false;  // the proxy reads no more: what the client sends is dropped
  size_t pending() const { return tail - head; }
};

struct EgressBridge::Conn {
  uint64_t id = 0;
  UniqueFd fd[2];                // kClient (TCP), kUpstream (the proxy's unix socket)
  Flow flow[2];                  // flow[s]: read from fd[s], written to fd[1 - s]
  uint32_t watched[2] = {0, 0};  // the epoll interest of each fd
  uint64_t progress = 0;         // counts bytes moved and state changes
};

EgressBridge::EgressBridge(BridgeSpec spec, WatchFn watch, UniqueFd listener)
    : spec_(std::move(spec)), watch_(std::move(watch)), listener_(std::move(listener)) {}

// Not unregistered here: the loop that watched them is going away too.
EgressBridge::~EgressBridge() = default;

Result<std::unique_ptr<EgressBridge>> EgressBridge::listen(const BridgeSpec& spec, WatchFn watch) {
  const std::string where = "egress bridge: ";
  const std::string addr = listen_address(spec);
  sockaddr_storage ss;
  socklen_t len;
  if (!make_addr(spec, &ss, &len)) return make_error(where + addr, "not an IP address");
  UniqueFd fd(::socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return sys_error(where + "socket for " + addr);
  const int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (ss.ss_family == AF_INET6) ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&ss), len) != 0) {
    return sys_error(where + "bind " + addr);
  }
  if (::listen(fd.get(), SOMAXCONN) != 0) return sys_error(where + "listen on " + addr);
  std::unique_ptr<EgressBridge> b(new EgressBridge(spec, std::move(watch), std::move(fd)));
  b->reserve_spare();
  b->watch_(b->listener_.get(), kListenerTag, EPOLLIN);
  return b;
}

void EgressBridge::reserve_spare() {
  if (!spare_) spare_.reset(::fcntl(listener_.get(), F_DUPFD_CLOEXEC, 0));
}

void EgressBridge::on_event(uint64_t tag, uint32_t events) {
  if (tag == kListenerTag) return on_listener();
  auto it = conns_.find(tag >> 1);
  if (it == conns_.end()) return;  // closed earlier in the same batch of events
  on_conn(*it->second, static_cast<int>(tag & 1), events);
}

void EgressBridge::on_listener() {
  for (int i = 0; i < kAcceptBatch; ++i) {
    if (!accept_one()) return;
  }
}

// False when nothing more can be accepted now.
bool EgressBridge::accept_one() {
  const int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd >= 0) {
    bridge(UniqueFd(fd));
    return true;
  }
  if (errno == EINTR || errno == ECONNABORTED) return true;
  if ((errno == EMFILE || errno == ENFILE) && spare_) {
    // Out of descriptors: shed the connection (it would wake the loop forever
    // otherwise) with the one held back for this, then take it back.
    spare_.reset();
    const int shed = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC);
    if (shed >= 0) ::close(shed);  // before taking the spare back: it needs that descriptor
    reserve_spare();
    return shed >= 0;
  }
  // EAGAIN: the backlog is empty. (Out of descriptors with none held back, the
  // connection waits in the backlog and the next event tries again.)
  return false;
}

UniqueFd EgressBridge::connect_upstream() const {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return fd;
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, spec_.socket_path.c_str(), spec_.socket_path.size() + 1);
  // A unix connect completes or fails at once: ENOENT or ECONNREFUSED when the
  // proxy is gone, EAGAIN when its backlog is full. Never EINPROGRESS.
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) fd.reset();
  return fd;
}

void EgressBridge::bridge(UniqueFd client) {
  // Over the cap, or no proxy to reach: `client` is closed on return (fails closed).
  if (conns_.size() >= kMaxConnections) return;
  UniqueFd upstream = connect_upstream();
  if (!upstream) return;
  const int one = 1;  // bytes are relayed as they come: no Nagle delay on top
  ::setsockopt(client.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  auto c = std::make_unique<Conn>();
  c->id = next_id_++;
  c->fd[kClient] = std::move(client);
  c->fd[kUpstream] = std::move(upstream);
  update_watches(*c);
  conns_.emplace(c->id, std::move(c));
}

void EgressBridge::on_conn(Conn& c, int side, uint32_t events) {
  const uint64_t before = c.progress;
  bool ok = true;
  if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) ok = flush(c, 1 - side);
  if (ok && (events & (EPOLLIN | EPOLLERR | EPOLLHUP))) ok = fill(c, side);
  // A hung-up or failed socket on which nothing moved will never move anything:
  // close rather than be woken for it forever.
  if (ok && (events & (EPOLLERR | EPOLLHUP)) && c.progress == before) ok = false;
  if (!ok || (c.flow[0].shut && c.flow[1].shut)) return close_conn(c.id);
  update_watches(c);
}

// Reads from fd[from] while there is room, writing after each read. False on an error.
bool EgressBridge::fill(Conn& c, int from) {
  Flow& f = c.flow[from];
  for (int round = 0; round < kReadRounds && !f.eof; ++round) {
    if (f.head > 0) {
      std::memmove(f.buf.get(), f.buf.get() + f.head, f.pending());
      f.tail -= f.head;
      f.head = 0;
    }
    if (f.tail == kBufferSize) return true;  // full: the other side must take some first
    const ssize_t n = ::recv(c.fd[from].get(), f.buf.get() + f.tail, kBufferSize - f.tail, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    // The proxy closed before reading all we sent: what it sent was read first.
    if (n < 0 && !(from == kUpstream && errno == ECONNRESET)) return false;
    if (n <= 0) {
      f.eof = true;
    } else {
      f.tail += static_cast<size_t>(n);
    }
    ++c.progress;
    if (!flush(c, from)) return false;
  }
  return true;
}

// Writes what flow[from] holds to the other side; at its source's EOF, passes
// the half-close on. False on an error.
bool EgressBridge::flush(Conn& c, int from) {
  Flow& f = c.flow[from];
  const int to = 1 - from;
  while (!f.dead && f.pending() > 0) {
    const ssize_t n = ::send(c.fd[to].get(), f.buf.get() + f.head, f.pending(), MSG_NOSIGNAL);
    if (n > 0) {
      f.head += static_cast<size_t>(n);
      ++c.progress;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n < 0 && to == kUpstream && (errno == EPIPE || errno == ECONNRESET)) {
      // The proxy reads no more (it answered and closed: a refusal, a cut
      // upload). What it sent still goes through; until that is done, what
      // the client sends is read and dropped, so that it is not stuck.
      f.dead = f.shut = true;
      ++c.progress;
      break;
    }
    return false;
  }
  f.head = f.tail = 0;  // everything was written, or dropped
  if (f.eof && !f.shut) {
    if (::shutdown(c.fd[to].get(), SHUT_WR) != 0) return false;
    f.shut = true;
    ++c.progress;
  }
  return true;
}

void EgressBridge::update_watches(Conn& c) {
  for (int side : {kClient, kUpstream}) {
    const Flow& from = c.flow[side];    // read from this side
    const Flow& to = c.flow[1 - side];  // written to this side
    uint32_t want = 0;
    if (!from.eof && from.pending() < kBufferSize) want |= EPOLLIN;
    if (!to.dead && to.pending() > 0) want |= EPOLLOUT;
    if (want == c.watched[side]) continue;
    c.watched[side] = want;
    watch_(c.fd[side].get(), conn_tag(c.id, side), want);
  }
}

void EgressBridge::close_conn(uint64_t id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Conn& c = *it->second;
  // Unregistered before close: a call's supervisor forked a moment ago may
  // still hold a copy, which would keep the registration alive.
  for (int side : {kClient, kUpstream}) {
    if (c.watched[side] != 0) watch_(c.fd[side].get(), conn_tag(c.id, side), 0);
  }
  conns_.erase(it);
}

}  // namespace rf::runner
