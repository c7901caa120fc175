// What the egress proxy answers when it does not tunnel: a complete
// HTTP/1.1 response with a text/plain body that says why, then the connection
// closes. Every body starts with "ringfence egress proxy: ".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace rf::proxy {

// "HTTP/1.1 <status> <reason phrase>", Content-Type text/plain, Content-Length,
// Connection: close, then `body`.
std::string http_response(int status, std::string_view body);

// "host:port", with brackets around an IPv6 literal.
std::string format_authority(std::string_view host, uint16_t port);

// 403 and 429 bodies: "ringfence egress proxy: refused <host>:<port>: <reason>\n".
// The policy's reasons end with the --allow rule that would allow the target.
std::string refusal_body(std::string_view host, uint16_t port, std::string_view reason);

// "HTTP/1.1 200 Connection established\r\n\r\n"
inline constexpr std::string_view kConnectEstablished =
    "HTTP/1.1 200 Connection established\r\n\r\n";

}  // namespace rf::proxy
