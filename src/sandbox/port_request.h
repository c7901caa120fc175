// An HTTP request to a port inside a sandbox, relayed through its runner
// (issue 41 item 5; Sandbox::port_exchange): the request as the port gets
// it, and its answer as the client gets it. Hop-by-hop headers stay on
// their hop (RFC 9110 7.6.1), and what authorized the client at ringfence's
// doors never reaches the sandbox: Authorization, Host (the port's own is
// 127.0.0.1:PORT), X-Ringfence-*, and the access token's query parameter.
#pragma once

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

struct PortAnswer {
  int status = 0;
  HeaderList headers;  // those that pass, Content-Type included
  std::string body;
};
// The port's whole answer, read to its close (Content-Length, chunked or
// until close). An error when it is not an HTTP/1.x response.
Result<PortAnswer> parse_port_answer(std::string_view bytes);

// What of a request target follows its first `segments` path segments, as
// the port gets it: "/v1/sandboxes/ID/ports/8000/a?b=1" after 5 is "/a?b=1";
// nothing left is "/".
std::string target_after(std::string_view target, size_t segments);

// A port from a path segment ("8000"): 1 to 65535.
Result<int> parse_port(std::string_view text);

}  // namespace rf
