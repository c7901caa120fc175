#include "api/door_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstring>
#include <limits>
#include <vector>

#include "core/io.h"
#include "sandbox/port_request.h"

namespace rf::api {
namespace http = boost::beast::http;
using Clock = std::chrono::steady_clock;

namespace {

Error unavailable(const DoorAddress& door, const std::string& what) {
  return make_error(ErrorCode::kUnavailable, "worker " + door.worker + "'s door " + door.address,
                    what);
}

bool send_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

std::string request_text(const DoorAddress& door, std::string_view method,
                         const std::string& target, const DoorClient::Headers& headers,
                         std::string_view body) {
  std::string out = std::string(method) + " " + target + " HTTP/1.1\r\nHost: door\r\n";
  out += "Authorization: Door " + door.key + "\r\n";
  for (const auto& [k, v] : headers) {
    // Header values come from tokens and ids: never a line break through.
    if (v.find_first_of("\r\n") != std::string::npos) continue;
    out += k + ": " + v + "\r\n";
  }
  out += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  out += body;
  return out;
}

// Reads into `parser` until it is done (or, with `gone`, until the caller
// leaves). Returns false on a closed connection, a timeout or bad bytes;
// *received says whether any byte came.
template <class Parser>
bool read_reply(int fd, Parser& parser, Clock::time_point deadline,
                const std::function<bool()>& gone, bool* received, std::string* why) {
  char buf[16 * 1024];
  std::string pending;
  auto asked = Clock::now();
  while (!parser.is_done()) {
    // A busy stream still asks whether its client left, every 100 ms.
    if (gone && Clock::now() - asked >= std::chrono::milliseconds(100)) {
      asked = Clock::now();
      if (gone()) {
        *why = "the client went away";
        return false;
      }
    }
    if (!pending.empty()) {
      boost::system::error_code ec;
      const size_t used = parser.put(boost::asio::buffer(pending), ec);
      pending.erase(0, used);
      if (parser.is_done()) break;
      if (ec && ec != http::error::need_more) {
        *why = "a bad answer: " + ec.message();
        return false;
      }
      if (used > 0 && !pending.empty()) continue;
    }
    int wait_ms = 100;
    if (!gone) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) {
        *why = "no answer in time";
        return false;
      }
      wait_ms = static_cast<int>(std::min<long long>(left, 1000));
    }
    pollfd p{fd, POLLIN, 0};
    const int n = ::poll(&p, 1, wait_ms);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) {
      if (gone && gone()) {
        *why = "the client went away";
        return false;
      }
      continue;
    }
    const ssize_t got = ::recv(fd, buf, sizeof buf, 0);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got <= 0) {
      *why = "the connection closed";
      return false;
    }
    *received = true;
    pending.append(buf, static_cast<size_t>(got));
  }
  return true;
}

}  // namespace

Result<UniqueFd> DoorClient::connect(const DoorAddress& door) {
  if (door.address.rfind("unix:", 0) == 0) {
    const std::string path = door.address.substr(5);
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) return sys_error("socket");
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    if (path.size() >= sizeof sa.sun_path) return unavailable(door, "the socket path is too long");
    std::memcpy(sa.sun_path, path.c_str(), path.size());
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
      return unavailable(door, std::string("cannot connect: ") + std::strerror(errno));
    }
    return fd;
  }
  const auto colon = door.address.rfind(':');
  if (colon == std::string::npos) return unavailable(door, "not HOST:PORT");
  std::string host = door.address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  const int port = std::atoi(door.address.c_str() + colon + 1);
  sockaddr_storage ss{};
  socklen_t len = 0;
  int family = AF_INET;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (::inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    len = sizeof *v4;
  } else if (::inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    family = AF_INET6;
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    len = sizeof *v6;
  } else {
    return unavailable(door, "\"" + host + "\" is not an IP address");
  }
  UniqueFd fd(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return sys_error("socket");
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    return unavailable(door, std::string("cannot connect: ") + std::strerror(errno));
  }
  const int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

DoorClient::DoorClient() : pruner_([this] { prune_loop(); }) {}

DoorClient::~DoorClient() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  pruner_.join();
}

void DoorClient::prune_loop() {
  constexpr auto kIdle = std::chrono::seconds(2);
  std::unique_lock lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, std::chrono::milliseconds(500));
    const auto now = Clock::now();
    for (auto& [address, kept] : idle_) {
      std::erase_if(kept, [&](const Kept& k) { return now - k.since >= kIdle; });
    }
  }
}

UniqueFd DoorClient::take_idle(const std::string& address) {
  std::lock_guard lock(mu_);
  auto it = idle_.find(address);
  if (it == idle_.end() || it->second.empty()) return UniqueFd();
  UniqueFd fd = std::move(it->second.back().fd);
  it->second.pop_back();
  return fd;
}

void DoorClient::give_back(const std::string& address, UniqueFd fd) {
  std::lock_guard lock(mu_);
  auto& list = idle_[address];
  if (list.size() < 64) list.push_back(Kept{std::move(fd), Clock::now()});
}

Result<DoorReply> DoorClient::call(const DoorAddress& door, std::string_view method,
                                   const std::string& target, const Headers& headers,
                                   std::string_view body, std::chrono::milliseconds timeout) {
  const std::string text = request_text(door, method, target, headers, body);
  // A kept connection the door has closed meanwhile fails before any byte
  // comes back: then once more on a new one.
  for (int attempt = 0; attempt < 2; ++attempt) {
    UniqueFd fd = attempt == 0 ? take_idle(door.address) : UniqueFd();
    const bool reused = static_cast<bool>(fd);
    if (!fd) {
      auto made = connect(door);
      if (!made) return made.take_error();
      fd = std::move(*made);
    }
    if (!send_all(fd.get(), text)) {
      if (reused) continue;
      return unavailable(door, "the request could not be sent");
    }
    http::response_parser<http::string_body> parser;
    parser.body_limit(256ull << 20);
    bool received = false;
    std::string why;
    if (!read_reply(fd.get(), parser, Clock::now() + timeout, nullptr, &received, &why)) {
      if (reused && !received) continue;
      return unavailable(door, why);
    }
    auto& res = parser.get();
    DoorReply reply;
    reply.status = static_cast<int>(res.result_int());
    reply.content_type = std::string(res[http::field::content_type]);
    for (const auto& f : res) {
      reply.headers.emplace_back(std::string(f.name_string().data(), f.name_string().size()),
                                 std::string(f.value().data(), f.value().size()));
    }
    reply.body = std::move(res.body());
    if (res.keep_alive()) give_back(door.address, std::move(fd));
    return reply;
  }
  return unavailable(door, "the connection closed");
}

Result<int> DoorClient::stream(
    const DoorAddress& door, std::string_view method, const std::string& target,
    const Headers& headers, std::string_view body,
    const std::function<void(std::string_view, std::string_view)>& on_event,
    const std::function<bool()>& gone, std::string* error_body) {
  const std::string text = request_text(door, method, target, headers, body);
  for (int attempt = 0; attempt < 2; ++attempt) {
    UniqueFd fd = attempt == 0 ? take_idle(door.address) : UniqueFd();
    const bool reused = static_cast<bool>(fd);
    if (!fd) {
      auto made = connect(door);
      if (!made) return made.take_error();
      fd = std::move(*made);
    }
    if (!send_all(fd.get(), text)) {
      if (reused) continue;
      return unavailable(door, "the request could not be sent");
    }
    http::response_parser<http::string_body> parser;
    // Not boost::none: Boost 1.74 refuses every Content-Length body with it
    // (the length is compared against the optional, and none is less).
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    // Server-sent events, as they come: "event: NAME\ndata: DATA\n\n".
    std::string lines;
    auto on_chunk = [&](std::uint64_t, boost::beast::string_view data,
                        boost::system::error_code&) -> std::size_t {
      lines.append(data.data(), data.size());
      size_t end;
      while ((end = lines.find("\n\n")) != std::string::npos) {
        std::string_view ev(lines.data(), end);
        std::string_view name, payload;
        size_t pos = 0;
        while (pos < ev.size()) {
          const size_t nl = ev.find('\n', pos);
          std::string_view line = ev.substr(pos, nl == std::string_view::npos ? ev.npos : nl - pos);
          if (line.starts_with("event: ")) name = line.substr(7);
          if (line.starts_with("data: ")) payload = line.substr(6);
          if (nl == std::string_view::npos) break;
          pos = nl + 1;
        }
        on_event(name, payload);
        lines.erase(0, end + 2);
      }
      return data.size();
    };
    parser.on_chunk_body(on_chunk);
    bool received = false;
    std::string why;
    if (!read_reply(fd.get(), parser, Clock::now() + std::chrono::hours(24), gone, &received,
                    &why)) {
      if (reused && !received) continue;
      // The front door's client left: closing this connection ends the call.
      return unavailable(door, why);
    }
    auto& res = parser.get();
    const int status = static_cast<int>(res.result_int());
    if (error_body) *error_body = std::move(res.body());
    if (res.keep_alive()) give_back(door.address, std::move(fd));
    return status;
  }
  return unavailable(door, "the connection closed");
}

namespace {

// Copies what `a` and `b` send to each other until either closes (or
// fails), `stop_fd` is readable, or one reads nothing for 30 s while bytes
// wait for it.
void splice_both_ways(int a, int b, int stop_fd) {
  std::string to_a, to_b;  // read, not yet written
  char buf[64 * 1024];
  constexpr int kStuckMs = 30'000;
  int stuck_ms = 0;
  for (;;) {
    pollfd fds[3] = {
        {a,
         static_cast<short>((to_b.size() < sizeof buf ? POLLIN : 0) | (to_a.empty() ? 0 : POLLOUT)),
         0},
        {b,
         static_cast<short>((to_a.size() < sizeof buf ? POLLIN : 0) | (to_b.empty() ? 0 : POLLOUT)),
         0},
        {stop_fd, POLLIN, 0}};
    const int n = ::poll(fds, stop_fd >= 0 ? 3 : 2, 1000);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return;
    if (stop_fd >= 0 && (fds[2].revents & POLLIN)) return;
    if (n == 0) {
      if (!to_a.empty() || !to_b.empty()) {
        stuck_ms += 1000;
        if (stuck_ms >= kStuckMs) return;
      }
      continue;
    }
    stuck_ms = 0;
    for (int side = 0; side < 2; ++side) {
      const int from = side == 0 ? a : b;
      std::string& out = side == 0 ? to_b : to_a;
      const int to = side == 0 ? b : a;
      std::string& queued_for_from = side == 0 ? to_a : to_b;
      if (fds[side].revents & POLLIN) {
        const ssize_t got = ::recv(from, buf, sizeof buf, MSG_DONTWAIT);
        if (got == 0) {
          // What it sent before it closed (a WebSocket's close frame) still goes on.
          (void)send_all_within(to, out, 1000);
          return;
        }
        if (got < 0 && errno != EAGAIN && errno != EINTR) return;
        if (got > 0) out.append(buf, static_cast<size_t>(got));
      } else if (fds[side].revents & (POLLHUP | POLLERR)) {
        return;
      }
      if (!queued_for_from.empty() && (fds[side].revents & POLLOUT)) {
        const ssize_t put = ::send(from, queued_for_from.data(), queued_for_from.size(),
                                   MSG_NOSIGNAL | MSG_DONTWAIT);
        if (put < 0 && errno != EAGAIN && errno != EINTR) return;
        if (put > 0) queued_for_from.erase(0, static_cast<size_t>(put));
      }
    }
  }
}

}  // namespace

Status DoorClient::relay(
    const DoorAddress& door, std::string_view method, const std::string& target,
    const Headers& headers, std::string_view body,
    const std::function<bool(int, std::vector<std::pair<std::string, std::string>>&&)>& on_head,
    const std::function<bool(std::string_view)>& on_body) {
  auto made = connect(door);
  if (!made) return made.take_error();
  UniqueFd fd = std::move(*made);
  if (!send_all(fd.get(), request_text(door, method, target, headers, body))) {
    return unavailable(door, "the request could not be sent");
  }
  bool left = false;
  PortAnswerStream stream(
      [&](int status, HeaderList&& all) {
        if (!on_head(status, std::move(all))) left = true;
      },
      [&](std::string_view bytes) {
        if (!left && !on_body(bytes)) left = true;
      },
      method == "HEAD", /*all_headers=*/true);
  static thread_local std::vector<char> buf(256u << 10);
  while (!left && !stream.done()) {
    const ssize_t got = ::recv(fd.get(), buf.data(), buf.size(), 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return unavailable(door, std::string("read: ") + std::strerror(errno));
    if (got == 0) break;
    if (auto fed = stream.feed(std::string_view(buf.data(), static_cast<size_t>(got))); !fed) {
      return unavailable(door, "a bad answer: " + fed.error().message);
    }
  }
  if (left) return make_error("port", "the client left");
  if (stream.done()) return ok_status();
  if (auto done = stream.finish(); !done) {
    return unavailable(door, stream.head_done() ? "the answer broke off" : "the connection closed");
  }
  return ok_status();
}

Status DoorClient::splice(const DoorAddress& door, const std::string& target,
                          const Headers& headers, int client_fd, std::string early, int stop_fd) {
  auto made = connect(door);
  if (!made) return made.take_error();
  UniqueFd fd = std::move(*made);
  std::string text = request_text(door, "GET", target, headers, "");
  text += early;  // what the client sent after its handshake goes on after ours
  if (!send_all(fd.get(), text)) return unavailable(door, "the request could not be sent");
  splice_both_ways(client_fd, fd.get(), stop_fd);
  return ok_status();
}

}  // namespace rf::api
