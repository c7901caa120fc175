// An HTTP request to a port inside a sandbox, relayed through its runner
// (issue 41 item 5; Sandbox::port_exchange): the request as the port gets
// it, and its answer as the client gets it. Hop-by-hop headers stay on
// their hop (RFC 9110 7.6.1), and what authorized the client at ringfence's
// doors never reaches the sandbox: Authorization, Host (the port's own is
// 127.0.0.1:PORT), X-Ringfence-*, and the access token's query parameter.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"

namespace rf {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

// Whether a request header goes on to the port (and a response header back).
bool port_header_passes(std::string_view name);

// The request's bytes for 127.0.0.1:`port`: `target` as the port sees it
// ("/" and below), the passing headers, Content-Length for `body`, and
// Connection: close (the answer ends with the connection).
std::string port_request_text(std::string_view method, std::string_view target,
                              const HeaderList& headers, std::string_view body, int port);

// A port's passing headers as a server answers with them: its Content-Type
// (application/octet-stream when it named none) and the rest.
std::pair<std::string, HeaderList> content_type_and_rest(HeaderList&& headers);

// Whether the client asks to turn the connection into a WebSocket
// (Connection: upgrade and Upgrade: websocket, RFC 6455 4.1).
bool is_websocket_upgrade(const HeaderList& headers);

// The head of a WebSocket handshake for 127.0.0.1:`port`: as
// port_request_text, but with Upgrade: websocket and Connection: Upgrade,
// so the connection stays open both ways once the port answers 101.
std::string port_upgrade_request_text(std::string_view target, const HeaderList& headers, int port);

struct PortAnswer {
  int status = 0;
  HeaderList headers;  // those that pass, Content-Type included
  std::string body;
};
// The port's whole answer, read to its close (Content-Length, chunked or
// until close). An error when it is not an HTTP/1.x response.
Result<PortAnswer> parse_port_answer(std::string_view bytes);

// The port's answer read as it comes, for a client that gets it as it
// comes: its status and passing headers once the head is whole, then the
// body's bytes (chunked transfer decoded). `head_request`: the answer has
// no body whatever its head says (RFC 9110 9.3.2). `all_headers`: every
// header to on_head, not only those that pass (a relay that sorts them).
class PortAnswerStream {
 public:
  using HeadFn = std::function<void(int status, HeaderList&& headers)>;
  using BodyFn = std::function<void(std::string_view bytes)>;
  PortAnswerStream(HeadFn on_head, BodyFn on_body, bool head_request = false,
                   bool all_headers = false);
  ~PortAnswerStream();
  PortAnswerStream(const PortAnswerStream&) = delete;
  PortAnswerStream& operator=(const PortAnswerStream&) = delete;
  // More of the answer; an error (and nothing more is read) when it is not
  // HTTP/1.x. Bytes after a whole answer are ignored.
  Status feed(std::string_view bytes);
  // The connection closed: an error unless the answer was whole (or ends at
  // the close, as a body without a length does).
  Status finish();
  bool head_done() const;
  // The whole answer was read (what follows is not its).
  bool done() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// What of a request target follows its first `segments` path segments, as
// the port gets it: "/v1/sandboxes/ID/ports/8000/a?b=1" after 5 is "/a?b=1";
// nothing left is "/".
std::string target_after(std::string_view target, size_t segments);

// A port from a path segment ("8000"): 1 to 65535.
Result<int> parse_port(std::string_view text);

// The TCP ports a sandbox listens on, from its own /proc/net/tcp and tcp6
// (read inside it): each once, lowest first, with the address it is bound
// to ("127.0.0.1", "0.0.0.0", "::1", "::").
struct ListeningPort {
  int port = 0;
  std::string address;
};
std::vector<ListeningPort> parse_listening_ports(std::string_view proc_net_tcp, bool v6);

// A port of a sandbox by host name: "{port}-{id}.{domain}" (an optional
// ":N" after it, the listener's), case-insensitive in the domain. nullopt
// when `host` is not of that form under `domain`.
struct PortHost {
  std::string sandbox;
  int port = 0;
};
std::optional<PortHost> parse_port_host(std::string_view host, std::string_view domain);

}  // namespace rf
