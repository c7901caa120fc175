#include "proxy/socks5.h"

#include <arpa/inet.h>

namespace rf::proxy::socks5 {

namespace {

Error bad(std::string message) { return make_error("socks5", std::move(message)); }

uint8_t byte(std::string_view s, size_t i) { return static_cast<uint8_t>(s[i]); }

bool domain_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.';
}

}  // namespace

Result<Greeting> parse_greeting(std::string_view buf) {
  Greeting g;
  if (buf.empty()) return g;
  if (byte(buf, 0) != kVersion) return bad("not SOCKS version 5");
  if (buf.size() < 2) return g;
  const size_t n = byte(buf, 1);
  if (n == 0) return bad("no authentication methods offered");
  if (buf.size() < 2 + n) return g;
  for (size_t i = 0; i < n; ++i) {
    if (byte(buf, 2 + i) == 0) g.no_auth = true;
  }
  g.length = 2 + n;
  return g;
}

std::string method_reply(bool no_auth) {
  return std::string{static_cast<char>(kVersion), static_cast<char>(no_auth ? 0x00 : 0xff)};
}

Result<Request> parse_request(std::string_view buf) {
  Request r;
  if (buf.size() < 5) {
    if (!buf.empty() && byte(buf, 0) != kVersion) return bad("not SOCKS version 5");
    return r;
  }
  if (byte(buf, 0) != kVersion) return bad("not SOCKS version 5");
  if (byte(buf, 2) != 0) return bad("reserved byte is not 0");
  const uint8_t cmd = byte(buf, 1);
  const uint8_t atyp = byte(buf, 3);
  size_t addr_len = 0;
  switch (atyp) {
    case 1:
      addr_len = 4;
      break;
    case 4:
      addr_len = 16;
      break;
    case 3:
      addr_len = 1 + byte(buf, 4);
      if (byte(buf, 4) == 0) return bad("empty domain name");
      break;
    default:
      // The length of the rest is unknown: answer and close.
      r.length = buf.size();
      r.unsupported = kAddressTypeNotSupported;
      return r;
  }
  if (buf.size() < 4 + addr_len + 2) return r;
  r.length = 4 + addr_len + 2;
  const uint16_t port =
      static_cast<uint16_t>(byte(buf, 4 + addr_len) << 8 | byte(buf, 5 + addr_len));
  if (cmd != 1) {
    r.unsupported = kCommandNotSupported;
    return r;
  }
  char text[INET6_ADDRSTRLEN];
  if (atyp == 1) {
    ::inet_ntop(AF_INET, buf.data() + 4, text, sizeof text);
    r.authority = std::string(text) + ":" + std::to_string(port);
  } else if (atyp == 4) {
    ::inet_ntop(AF_INET6, buf.data() + 4, text, sizeof text);
    r.authority = "[" + std::string(text) + "]:" + std::to_string(port);
  } else {
    const std::string_view name = buf.substr(5, addr_len - 1);
    for (char c : name) {
      if (!domain_char(c)) return bad("domain name has a byte no DNS name has");
    }
    r.authority = std::string(name) + ":" + std::to_string(port);
  }
  return r;
}

std::string reply(uint8_t code) {
  return std::string{static_cast<char>(kVersion), static_cast<char>(code), 0, 1, 0, 0, 0, 0, 0, 0};
}

}  // namespace rf::proxy::socks5
