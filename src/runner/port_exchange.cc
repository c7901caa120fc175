#include "runner/port_exchange.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace rf::runner {

Status PortExchanges::start(uint32_t id, int port, std::string request, size_t max) {
  const std::string where = "port_exchange " + std::to_string(port);
  if (port < 1 || port > 65535) return make_error(where, "expected a port from 1 to 65535");
  if (open_.size() >= kMaxExchanges) {
    return make_error(where, "the sandbox has " + std::to_string(kMaxExchanges) +
                                 " requests to its ports in flight, the most it takes");
  }
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return sys_error(where + ": socket");
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const int r = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa);
  if (r != 0 && errno != EINPROGRESS) return sys_error(where + ": connect 127.0.0.1");
  Open o;
  o.fd = std::move(fd);
  o.pending = std::move(request);
  o.connected = r == 0;
  o.max = max;
  auto [it, added] = open_.emplace(id, std::move(o));
  (void)added;
  rearm(id, it->second);
  return ok_status();
}

void PortExchanges::rearm(uint32_t id, const Open& o) {
  uint32_t events = 0;
  if (!o.connected || !o.pending.empty()) events |= EPOLLOUT;
  if (!paused_) events |= EPOLLIN | EPOLLRDHUP;
  // Paused with nothing to write: not watched at all (a reset socket's
  // EPOLLHUP would otherwise wake the loop again and again until unpaused).
  watch_(o.fd.get(), id, events);
}

void PortExchanges::input(uint32_t id, std::string_view bytes) {
  auto it = open_.find(id);
  if (it == open_.end()) return;  // it ended already: its port_end is on its way
  Open& o = it->second;
  if (o.pending.size() + bytes.size() > kMaxPending) {
    return finish(id, "the port took no input while " + std::to_string(kMaxPending >> 20) +
                          " MiB waited for it");
  }
  const bool was_empty = o.pending.empty();
  o.pending.append(bytes);
  if (was_empty) rearm(id, o);
}

void PortExchanges::set_paused(bool paused) {
  if (paused_ == paused) return;
  paused_ = paused;
  for (const auto& [id, o] : open_) rearm(id, o);
}

void PortExchanges::finish(uint32_t id, const std::string& error) {
  auto it = open_.find(id);
  if (it == open_.end()) return;
  watch_(it->second.fd.get(), id, 0);
  open_.erase(it);
  end_(id, error);
}

void PortExchanges::on_event(uint32_t id, uint32_t events) {
  auto it = open_.find(id);
  if (it == open_.end()) return;
  Open& o = it->second;
  if (!o.connected && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(o.fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return finish(id, std::string("connect 127.0.0.1: ") + std::strerror(err));
    o.connected = true;
    if (o.pending.empty()) rearm(id, o);
  }
  if (o.connected && !o.pending.empty() && (events & EPOLLOUT)) {
    const ssize_t n = ::send(o.fd.get(), o.pending.data(), o.pending.size(), MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
      return finish(id, std::string("write: ") + std::strerror(errno));
    }
    if (n > 0) o.pending.erase(0, static_cast<size_t>(n));
    if (o.pending.empty()) rearm(id, o);
  }
  if (!paused_ && (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) {
    // Reads until the port has nothing more now, or the queue to the host
    // fills (data_ may pause this: the rest waits for the next event).
    static thread_local char buf[256 * 1024];
    while (!paused_) {
      const ssize_t n = ::recv(o.fd.get(), buf, sizeof buf, 0);
      if (n > 0) {
        o.answered += static_cast<size_t>(n);
        if (o.max != 0 && o.answered > o.max) {
          const std::string bound = o.max % (1u << 20) == 0 ? std::to_string(o.max >> 20) + " MiB"
                                                            : std::to_string(o.max) + " bytes";
          return finish(id, "the answer is larger than " + bound +
                                ", the most this request to a port may bring back");
        }
        data_(id, std::string_view(buf, static_cast<size_t>(n)));
        continue;
      }
      if (n == 0) return finish(id, "");
      if (errno == EAGAIN || errno == EINTR) break;
      return finish(id, std::string("read: ") + std::strerror(errno));
    }
  }
}

}  // namespace rf::runner
