// The HTTP/1.1 server under `ringfence serve` (issue 14): Boost.Beast's parser
// for the grammar, blocking handlers (a tool call blocks its connection, not
// the server), keep-alive, and the bounds a server facing untrusted clients
// needs: header and body sizes, a deadline for each request's head and body
// (slowloris), a write deadline (a client that never reads), and caps on
// connections, in all and per client address.
//
// No thread waits on an idle socket: one poller thread (epoll) holds every
// connection that waits for the first byte of a request, and hands it to a
// pooled handler thread when bytes arrive; kept alive, it comes back after its
// answer. So idle connections cost a descriptor each, and a flood of them
// from one address evicts its own oldest, not other clients.
#pragma once

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/unique_fd.h"

namespace rf::httpd {

using Request = boost::beast::http::request<boost::beast::http::string_body>;

struct ServerLimits {
  size_t header_bytes = 16 * 1024;
  size_t body_bytes = 64 * 1024 * 1024;
  // From the first byte of a request to its last byte of head / of body. A
  // new connection that sends nothing for head_timeout is closed too.
  std::chrono::milliseconds head_timeout{10'000};
  std::chrono::milliseconds body_timeout{60'000};
  // A kept-alive connection with no request for this long is closed.
  std::chrono::milliseconds idle_timeout{120'000};
  // A write that makes no progress for this long ends the connection.
  std::chrono::milliseconds write_timeout{30'000};
  // Connections open at once, in all and from one client address (an IPv6
  // client counts by its /64; every unix socket client is one address). A new
  // connection over either closes the oldest idle one, of its own address
  // first; only when every one is busy is it refused (503).
  size_t max_connections = 16384;
  size_t max_connections_per_address = 512;
  // Handlers running at once, each on a pooled thread; more wait their turn.
  size_t max_handler_threads = 4096;
};

// Where to listen: "HOST:PORT" (127.0.0.1:8080, [::1]:8080; port 0 picks one)
// or "unix:PATH".
struct ListenAddress {
  bool unix_socket = false;
  std::string host;  // or the path
  uint16_t port = 0;
};
Result<ListenAddress> parse_listen_address(std::string_view text);
// A listening socket on `address` (a unix socket's old file is replaced);
// *bound: "HOST:PORT" with the port bound, or "unix:PATH".
Result<UniqueFd> bind_listener(const ListenAddress& address, std::string* bound);

// A connection a handler took over from HTTP (an Upgrade: a WebSocket
// relayed to a sandbox's port): its socket (still the server's, closed
// after the handler returns), the bytes the client sent after the request
// that were read already, and the server's stop signal (readable once it
// stops: the handler ends then).
struct RawConnection {
  int fd = -1;
  std::string early;
  int stop_fd = -1;
};

// One request's answer. A handler answers once: with respond(), or with
// begin_stream() and chunks (Transfer-Encoding: chunked, as SSE needs), or
// by taking the connection over (take_over()).
class Responder {
 public:
  Responder(int fd, const Request& request, const ServerLimits& limits,
            std::string* pending = nullptr, int stop_fd = -1);
  Status respond(int status, std::string_view content_type, std::string_view body,
                 const std::vector<std::pair<std::string, std::string>>& headers = {});
  Status begin_stream(int status, std::string_view content_type,
                      const std::vector<std::pair<std::string, std::string>>& headers = {});
  Status write_chunk(std::string_view data);
  Status end_stream();
  // The connection, for the handler to speak on as it will; nothing more
  // of HTTP happens on it, and it closes when the handler returns.
  Result<RawConnection> take_over();
  // The connection closes after this answer.
  void close_connection() { keep_alive_ = false; }
  bool keep_alive() const { return keep_alive_; }
  bool answered() const { return answered_; }
  // The client hung up (seen without reading: POLLRDHUP).
  bool client_gone() const;

 private:
  Status send(std::string_view bytes);
  // All of `parts`, in order, gathered (sendmsg), under the same deadline.
  Status send_parts(std::span<std::string_view> parts);
  std::string head(int status, std::string_view content_type,
                   const std::vector<std::pair<std::string, std::string>>& headers) const;

  int fd_;
  const ServerLimits& limits_;
  bool keep_alive_;
  bool head_request_;
  bool answered_ = false;
  bool streaming_ = false;
  std::string* pending_;
  int stop_fd_;
};

using Handler = std::function<void(const Request&, Responder&)>;

class HttpServer {
 public:
  static Result<std::unique_ptr<HttpServer>> listen(const ListenAddress& address,
                                                    ServerLimits limits, Handler handler);
  ~HttpServer();  // stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // "127.0.0.1:PORT" with the port bound, or "unix:PATH".
  const std::string& address() const { return address_; }
  // Stops accepting, ends every connection and joins every thread. Idempotent.
  void stop();
  size_t open_connections() const;

 private:
  struct Impl;
  HttpServer(std::string address, std::unique_ptr<Impl> impl);
  std::string address_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rf::httpd
