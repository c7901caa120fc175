#include "docker_api/socket_connection.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>

namespace rf::docker {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// Waits for `events` on fd; 0 ms means forever. ETIMEDOUT when the time ran out
// (EINTR does not restart the clock).
Status wait_fd(int fd, short events, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    int wait_ms = -1;
    if (timeout.count() > 0) {
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
      wait_ms = static_cast<int>(std::clamp<int64_t>(left.count(), 0, 1 << 30));
    }
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, wait_ms);
    if (r > 0) return ok_status();
    if (r == 0) return sys_error("docker connection: wait", ETIMEDOUT);
    if (errno != EINTR) return sys_error("docker connection: poll");
  }
}

Status set_nonblocking(int fd, bool on) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0) return sys_error("fcntl");
  if (::fcntl(fd, F_SETFL, on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK) != 0) {
    return sys_error("fcntl");
  }
  return ok_status();
}

namespace {

// A non-blocking connect bounded by `timeout`; the socket is blocking again after.
Status connect_with_timeout(int fd, const sockaddr* addr, socklen_t len, milliseconds timeout,
                            const std::string& what) {
  RF_TRY(set_nonblocking(fd, true));
  if (::connect(fd, addr, len) != 0) {
    if (errno != EINPROGRESS) return sys_error("connect " + what);
    if (auto s = wait_fd(fd, POLLOUT, timeout); !s) return sys_error("connect " + what, ETIMEDOUT);
    int err = 0;
    socklen_t elen = sizeof err;
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0) return sys_error("getsockopt");
    if (err != 0) return sys_error("connect " + what, err);
  }
  return set_nonblocking(fd, false);
}

// A unix socket's connect waits (when the listener's backlog is full) for at
// most SO_SNDTIMEO; a non-blocking one would fail with EAGAIN at once instead.
Status connect_unix_with_timeout(int fd, const sockaddr_un& addr, milliseconds timeout,
                                 const std::string& what) {
  timeval tv{};
  if (timeout.count() > 0) {
    tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
    tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  }
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  int rc;
  do {
    rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) return sys_error("connect " + what, errno == EAGAIN ? ETIMEDOUT : errno);
  const timeval none{};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof none);
  return ok_status();
}

std::string host_port_text(const DockerHost& h) {
  const bool v6 = h.host.find(':') != std::string::npos;
  return (v6 ? "[" + h.host + "]" : h.host) + ":" + std::to_string(h.port);
}

}  // namespace

Result<UniqueFd> connect_unix(const DockerHost& h, milliseconds timeout) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return sys_error("socket");
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (h.path.size() >= sizeof addr.sun_path) return make_error(h.url, "socket path too long");
  std::memcpy(addr.sun_path, h.path.c_str(), h.path.size() + 1);
  RF_TRY(connect_unix_with_timeout(fd.get(), addr, timeout, h.path));
  return fd;
}

Result<UniqueFd> connect_tcp(const DockerHost& h, milliseconds timeout) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | AI_ADDRCONFIG;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(h.port);
  int rc = ::getaddrinfo(h.host.c_str(), port.c_str(), &hints, &res);
  if (rc == EAI_NONAME || rc == EAI_ADDRFAMILY) {  // AI_ADDRCONFIG hides ::1 without a v6 route
    hints.ai_flags = AI_NUMERICSERV;
    rc = ::getaddrinfo(h.host.c_str(), port.c_str(), &hints, &res);
  }
  if (rc != 0) {
    return make_error("resolve " + h.host,
                      rc == EAI_SYSTEM ? std::string(std::strerror(errno)) : ::gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> guard(res, ::freeaddrinfo);
  const std::string what = host_port_text(h);
  Error last = make_error("connect " + what, "no address");
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    UniqueFd fd(::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) {
      last = sys_error("socket");
      continue;
    }
    auto s = connect_with_timeout(fd.get(), a->ai_addr, a->ai_addrlen, timeout, what);
    if (!s) {
      last = s.take_error();
      continue;
    }
    const int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ::setsockopt(fd.get(), SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    return fd;
  }
  return last;
}

Result<size_t> FdConnection::read_some(char* buf, size_t n, milliseconds timeout) {
  for (;;) {
    RF_TRY(wait_fd(fd_.get(), POLLIN, timeout));
    const ssize_t r = ::recv(fd_.get(), buf, n, MSG_DONTWAIT);
    if (r >= 0) return static_cast<size_t>(r);
    if (errno == EINTR || errno == EAGAIN) continue;
    return sys_error("docker connection: read");
  }
}

Status FdConnection::write_all(std::string_view data) {
  while (!data.empty()) {
    const ssize_t r = ::send(fd_.get(), data.data(), data.size(), MSG_NOSIGNAL);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return sys_error("docker connection: write");
    data.remove_prefix(static_cast<size_t>(r));
  }
  return ok_status();
}

Status FdConnection::shutdown_write() {
  if (::shutdown(fd_.get(), SHUT_WR) != 0 && errno != ENOTCONN) {
    return sys_error("docker connection: shutdown");
  }
  return ok_status();
}

}  // namespace rf::docker
