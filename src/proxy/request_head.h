// The request head a sandbox sends the egress proxy: untrusted bytes. Pure
// functions, no I/O, fuzzed by fuzz/proxy_request_fuzz.cc.
//
// Accepted: `CONNECT host:port HTTP/1.x` and requests in absolute-URI form,
// `GET http://host[:port]/path HTTP/1.x`. Lines end in CRLF (a bare LF is
// accepted too; a bare CR is not). Refused, each with a sentence for the 400
// body: origin-form targets, other schemes, other versions, bytes outside the
// grammar, obsolete line folding, more than one Host, Content-Length together
// with Transfer-Encoding, and heads over the limits.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "net/egress_policy.h"

namespace rf::proxy {

struct HeadLimits {
  size_t max_head_bytes = 16 * 1024;   // request line + headers + blank line
  size_t max_request_line = 8 * 1024;  // request line with its line end
  size_t max_headers = 100;
};

// Looks for the blank line that ends a request head in `buf` (the bytes read
// so far). Returns the head's length including the blank line, 0 when more
// bytes are needed, or an error once `buf` shows the head is over the limits,
// so a client never makes the proxy buffer more than max_head_bytes.
Result<size_t> find_head_end(std::string_view buf, const HeadLimits& limits = {});

struct Header {
  std::string name;   // as sent
  std::string value;  // without surrounding whitespace
};

struct RequestHead {
  std::string method;
  std::string target;
  std::string version;  // "HTTP/1.1" or "HTTP/1.0"
  std::vector<Header> headers;
};

// Parses a complete head (what find_head_end measured, blank line included).
Result<RequestHead> parse_request_head(std::string_view head, const HeadLimits& limits = {});

enum class RequestKind { connect, http };

struct ProxyRequest {
  RequestKind kind = RequestKind::connect;
  net::Authority target;  // from the CONNECT authority or the absolute URI (port 80 by default)
  // http: the head to send to the origin: origin-form target, Host from the
  // URI, hop-by-hop headers dropped (Connection and what it names, Keep-Alive,
  // Proxy-Connection, Proxy-Authorization, Proxy-Authenticate, TE, Trailer,
  // Upgrade), and `Connection: close`. Empty for CONNECT.
  std::string origin_head;
};

// The framing an origin reads must be unambiguous: one Host at most, no bad
// or conflicting Content-Length, not both Content-Length and Transfer-Encoding.
Status check_framing(const RequestHead& head);

// Appends the head's end-to-end headers as "Name: value\r\n" lines: not Host,
// no hop-by-hop header (Connection and what it names, Keep-Alive,
// Proxy-Connection, Proxy-Authorization, Proxy-Authenticate, TE, Trailer,
// Upgrade), none for which `drop` (given the lower-case name) says true.
void append_end_to_end_headers(const RequestHead& head, std::string& out,
                               const std::function<bool(std::string_view lname)>& drop);

// What a parsed head asks the proxy to do.
Result<ProxyRequest> interpret_request(const RequestHead& head);

// parse_request_head + interpret_request.
Result<ProxyRequest> parse_proxy_request(std::string_view head, const HeadLimits& limits = {});

}  // namespace rf::proxy
