#include "api/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/status.hpp>
#include <cerrno>
#include <cstring>
#include <list>
#include <mutex>
#include <thread>

#include "core/log.h"
#include "core/unique_fd.h"

namespace rf::api {
namespace http = boost::beast::http;
using Clock = std::chrono::steady_clock;

Result<ListenAddress> parse_listen_address(std::string_view text) {
  ListenAddress a;
  if (text.rfind("unix:", 0) == 0) {
    a.unix_socket = true;
    a.host = std::string(text.substr(5));
    if (a.host.empty()) return make_error("--listen", "unix: needs a path (unix:/run/rf.sock)");
    if (a.host.size() >= sizeof(sockaddr_un::sun_path)) {
      return make_error("--listen", "the socket path is too long: " + a.host);
    }
    return a;
  }
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos) {
    return make_error("--listen",
                      "expected HOST:PORT or unix:PATH, got \"" + std::string(text) + "\"");
  }
  std::string host(text.substr(0, colon));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const std::string port(text.substr(colon + 1));
  char* end = nullptr;
  const long p = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || p < 0 || p > 65535) {
    return make_error("--listen", "bad port \"" + port + "\" in \"" + std::string(text) + "\"");
  }
  a.host = host;
  a.port = static_cast<uint16_t>(p);
  return a;
}

namespace {

// Waits until `fd` is ready for `events` or `deadline` passes; false on timeout.
bool wait_for(int fd, short events, Clock::time_point deadline, int stop_fd = -1) {
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd fds[2] = {{fd, events, 0}, {stop_fd, POLLIN, 0}};
    const int n = ::poll(fds, stop_fd >= 0 ? 2 : 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) return false;
    if (stop_fd >= 0 && (fds[1].revents & POLLIN)) return false;
    return true;
  }
}

std::string reason(int status) {
  return std::string(http::obsolete_reason(static_cast<http::status>(status)));
}

// The simplest answer, for requests that never reached a handler.
void refuse(int fd, int status, std::string_view message) {
  std::string body = "{\"error\":\"" + std::string(message) + "\"}\n";
  std::string out =
      "HTTP/1.1 " + std::to_string(status) + " " + reason(status) +
      "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\nConnection: close\r\n\r\n" + body;
  (void)::send(fd, out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

enum class ReadEnd { kRequest, kClosed, kTimeout, kHeadTooLarge, kBodyTooLarge, kBad, kStopped };

struct ReadOutcome {
  ReadEnd end = ReadEnd::kClosed;
  std::string detail;
};

// Reads one request into `parser`, from `pending` (bytes already received)
// and then the socket, within the limits' deadlines.
ReadOutcome read_request(int fd, int stop_fd, const ServerLimits& limits, std::string& pending,
                         http::request_parser<http::string_body>& parser) {
  parser.header_limit(static_cast<std::uint32_t>(limits.header_bytes));
  parser.body_limit(limits.body_bytes);
  parser.eager(true);
  bool started = !pending.empty();
  auto deadline = Clock::now() + (started ? limits.head_timeout : limits.idle_timeout);
  bool head_done = false;
  char buf[16 * 1024];
  while (true) {
    if (!pending.empty()) {
      boost::system::error_code ec;
      const size_t used = parser.put(boost::asio::buffer(pending), ec);
      pending.erase(0, used);
      if (!head_done && parser.is_header_done()) {
        head_done = true;
        deadline = Clock::now() + limits.body_timeout;
      }
      if (parser.is_done()) return {ReadEnd::kRequest, {}};
      if (ec == http::error::need_more) {
        if (used > 0) continue;
      } else if (ec == http::error::header_limit) {
        return {ReadEnd::kHeadTooLarge,
                "the request head is over " + std::to_string(limits.header_bytes) + " bytes"};
      } else if (ec == http::error::body_limit) {
        return {ReadEnd::kBodyTooLarge,
                "the request body is over " + std::to_string(limits.body_bytes) + " bytes"};
      } else if (ec) {
        return {ReadEnd::kBad, ec.message()};
      } else if (used > 0) {
        continue;
      }
    }
    if (!wait_for(fd, POLLIN, deadline, stop_fd)) {
      // Stopped, or the deadline passed (an idle connection just closes).
      pollfd s{stop_fd, POLLIN, 0};
      if (::poll(&s, 1, 0) > 0) return {ReadEnd::kStopped, {}};
      return {started ? ReadEnd::kTimeout : ReadEnd::kClosed, {}};
    }
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) {
      if (!started) return {ReadEnd::kClosed, {}};
      return {ReadEnd::kBad, "the connection closed mid-request"};
    }
    if (!started) {
      started = true;
      deadline = Clock::now() + limits.head_timeout;
    }
    pending.append(buf, static_cast<size_t>(n));
  }
}

}  // namespace

// ---- Responder

Responder::Responder(int fd, const Request& request, const ServerLimits& limits)
    : fd_(fd),
      limits_(limits),
      keep_alive_(request.keep_alive()),
      head_request_(request.method() == http::verb::head) {}

bool Responder::client_gone() const {
  pollfd p{fd_, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

Status Responder::send(std::string_view bytes) {
  auto deadline = Clock::now() + limits_.write_timeout;
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      bytes.remove_prefix(static_cast<size_t>(n));
      deadline = Clock::now() + limits_.write_timeout;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_for(fd_, POLLOUT, deadline)) {
        keep_alive_ = false;
        return make_error(
            "write response",
            "the client read nothing for " + std::to_string(limits_.write_timeout.count()) + " ms");
      }
      continue;
    }
    keep_alive_ = false;
    return sys_error("write response");
  }
  return ok_status();
}

std::string Responder::head(int status, std::string_view content_type,
                            const std::vector<std::pair<std::string, std::string>>& headers) const {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + reason(status) + "\r\n";
  if (!content_type.empty()) out += "Content-Type: " + std::string(content_type) + "\r\n";
  for (const auto& [k, v] : headers) out += k + ": " + v + "\r\n";
  out += keep_alive_ ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  return out;
}

Status Responder::respond(int status, std::string_view content_type, std::string_view body,
                          const std::vector<std::pair<std::string, std::string>>& headers) {
  if (answered_) return make_error("respond", "this request was answered already");
  answered_ = true;
  std::string out = head(status, content_type, headers);
  // 204 and 304 carry no body and no Content-Length (RFC 9110, 8.6).
  if (status != 204 && status != 304) {
    out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  }
  out += "\r\n";
  if (!head_request_ && status != 204 && status != 304) out += body;
  return send(out);
}

Status Responder::begin_stream(int status, std::string_view content_type,
                               const std::vector<std::pair<std::string, std::string>>& headers) {
  if (answered_) return make_error("respond", "this request was answered already");
  answered_ = true;
  streaming_ = true;
  std::string out = head(status, content_type, headers);
  out += "Transfer-Encoding: chunked\r\nCache-Control: no-store\r\n\r\n";
  return send(out);
}

Status Responder::write_chunk(std::string_view data) {
  if (!streaming_) return make_error("write chunk", "no stream was begun");
  if (data.empty()) return ok_status();
  char size[32];
  const int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  std::string out(size, static_cast<size_t>(n));
  out += data;
  out += "\r\n";
  return send(out);
}

Status Responder::end_stream() {
  if (!streaming_) return make_error("end stream", "no stream was begun");
  streaming_ = false;
  return send("0\r\n\r\n");
}

// ---- HttpServer

struct HttpServer::Impl {
  UniqueFd listen_fd;
  UniqueFd stop_fd;  // eventfd: readable once stopping
  ServerLimits limits;
  Handler handler;
  std::string unix_path;
  std::thread acceptor;

  struct Conn {
    UniqueFd fd;
    std::thread thread;
    std::atomic<bool> done{false};
  };
  std::mutex mu;
  std::list<Conn> conns;  // stable addresses
  std::atomic<size_t> open{0};
  std::atomic<bool> stopping{false};

  void reap_finished() {
    std::list<Conn> finished;
    {
      std::lock_guard lock(mu);
      for (auto it = conns.begin(); it != conns.end();) {
        if (it->done.load()) {
          auto next = std::next(it);
          finished.splice(finished.end(), conns, it);
          it = next;
        } else {
          ++it;
        }
      }
    }
    for (auto& c : finished) c.thread.join();
  }

  void serve_connection(Conn& c) {
    const int fd = c.fd.get();
    std::string pending;
    while (!stopping.load()) {
      http::request_parser<http::string_body> parser;
      const ReadOutcome got = read_request(fd, stop_fd.get(), limits, pending, parser);
      if (got.end == ReadEnd::kClosed || got.end == ReadEnd::kStopped) break;
      if (got.end == ReadEnd::kTimeout) {
        refuse(fd, 408, "the request did not arrive in time");
        break;
      }
      if (got.end == ReadEnd::kHeadTooLarge || got.end == ReadEnd::kBodyTooLarge) {
        refuse(fd, got.end == ReadEnd::kBodyTooLarge ? 413 : 431, got.detail);
        break;
      }
      if (got.end == ReadEnd::kBad) {
        refuse(fd, 400, "malformed HTTP request: " + got.detail);
        break;
      }
      Request request = parser.release();
      Responder responder(fd, request, limits);
      try {
        handler(request, responder);
      } catch (const std::exception& e) {
        spdlog::error("serve: {} {}: {}", std::string(request.method_string()),
                      std::string(request.target()), e.what());
        if (!responder.answered()) {
          (void)responder.respond(500, "application/json", "{\"error\":\"internal error\"}\n");
        }
        break;
      }
      if (!responder.answered()) {
        (void)responder.respond(500, "application/json", "{\"error\":\"no answer\"}\n");
      }
      if (!responder.keep_alive()) break;
    }
    ::shutdown(fd, SHUT_RDWR);
  }

  void accept_loop() {
    while (!stopping.load()) {
      pollfd fds[2] = {{listen_fd.get(), POLLIN, 0}, {stop_fd.get(), POLLIN, 0}};
      const int n = ::poll(fds, 2, 1000);
      reap_finished();
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) continue;
      if (fds[1].revents & POLLIN) break;
      UniqueFd fd(::accept4(listen_fd.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!fd) {
        if (errno == EMFILE || errno == ENFILE) {
          spdlog::warn("serve: accept: {} (file descriptor limit)", std::strerror(errno));
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        continue;
      }
      if (!unix_path.size()) {
        const int one = 1;
        ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      }
      if (open.load() >= limits.max_connections) {
        refuse(fd.get(), 503, "too many connections");
        continue;
      }
      std::lock_guard lock(mu);
      Conn& c = conns.emplace_back();
      c.fd = std::move(fd);
      ++open;
      c.thread = std::thread([this, &c] {
        serve_connection(c);
        --open;
        c.done.store(true);
      });
    }
  }
};

HttpServer::HttpServer(std::string address, std::unique_ptr<Impl> impl)
    : address_(std::move(address)), impl_(std::move(impl)) {}

HttpServer::~HttpServer() { stop(); }

size_t HttpServer::open_connections() const { return impl_->open.load(); }

Result<UniqueFd> bind_listener(const ListenAddress& address, std::string* bound) {
  UniqueFd fd;
  if (address.unix_socket) {
    fd = UniqueFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) return sys_error("socket");
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::memcpy(sa.sun_path, address.host.c_str(), address.host.size());
    ::unlink(address.host.c_str());
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
      return sys_error("listen on unix:" + address.host);
    }
    *bound = "unix:" + address.host;
  } else {
    sockaddr_storage ss{};
    socklen_t len = 0;
    int family = AF_INET;
    auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
    const std::string host = address.host.empty() ? "127.0.0.1" : address.host;
    if (::inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
      v4->sin_family = AF_INET;
      v4->sin_port = htons(address.port);
      len = sizeof *v4;
    } else if (::inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
      family = AF_INET6;
      v6->sin6_family = AF_INET6;
      v6->sin6_port = htons(address.port);
      len = sizeof *v6;
    } else {
      return make_error("--listen", "\"" + host + "\" is not an IP address");
    }
    fd = UniqueFd(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) return sys_error("socket");
    const int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0) {
      return sys_error("listen on " + host + ":" + std::to_string(address.port));
    }
    sockaddr_storage got{};
    socklen_t got_len = sizeof got;
    ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&got), &got_len);
    const uint16_t port =
        ntohs(family == AF_INET ? reinterpret_cast<sockaddr_in*>(&got)->sin_port
                                : reinterpret_cast<sockaddr_in6*>(&got)->sin6_port);
    *bound = (family == AF_INET6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
  }
  if (::listen(fd.get(), 1024) != 0) return sys_error("listen on " + *bound);
  return fd;
}

Result<std::unique_ptr<HttpServer>> HttpServer::listen(const ListenAddress& address,
                                                       ServerLimits limits, Handler handler) {
  auto impl = std::make_unique<Impl>();
  impl->limits = limits;
  impl->handler = std::move(handler);
  std::string bound;
  auto fd = bind_listener(address, &bound);
  if (!fd) return fd.take_error();
  impl->listen_fd = std::move(*fd);
  if (address.unix_socket) impl->unix_path = address.host;
  impl->stop_fd = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!impl->stop_fd) return sys_error("eventfd");
  Impl* raw = impl.get();
  impl->acceptor = std::thread([raw] { raw->accept_loop(); });
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(bound), std::move(impl)));
}

void HttpServer::stop() {
  if (!impl_ || impl_->stopping.exchange(true)) return;
  const uint64_t one = 1;
  (void)!::write(impl_->stop_fd.get(), &one, sizeof one);
  if (impl_->acceptor.joinable()) impl_->acceptor.join();
  {
    // Handlers blocked in a tool call see their client go; readers see stop_fd.
    std::lock_guard lock(impl_->mu);
    for (auto& c : impl_->conns) ::shutdown(c.fd.get(), SHUT_RDWR);
  }
  for (auto& c : impl_->conns) c.thread.join();
  impl_->conns.clear();
  if (!impl_->unix_path.empty()) ::unlink(impl_->unix_path.c_str());
}

}  // namespace rf::api
