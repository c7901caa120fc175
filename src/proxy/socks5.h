// SOCKS5 (RFC 1928) as far as the egress proxy speaks it: no authentication,
// the CONNECT command, IPv4, domain and IPv6 address types. Pure functions on
// untrusted bytes, fuzzed with the HTTP head parser.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.h"

namespace rf::proxy::socks5 {

inline constexpr uint8_t kVersion = 5;

// Reply codes.
inline constexpr uint8_t kSucceeded = 0;
inline constexpr uint8_t kGeneralFailure = 1;
inline constexpr uint8_t kNotAllowed = 2;  // "connection not allowed by ruleset"
inline constexpr uint8_t kHostUnreachable = 4;
inline constexpr uint8_t kTtlExpired = 6;
inline constexpr uint8_t kCommandNotSupported = 7;
inline constexpr uint8_t kAddressTypeNotSupported = 8;

struct Greeting {
  size_t length = 0;     // 0: more bytes needed
  bool no_auth = false;  // the client offers method 0 (no authentication)
};
// VER NMETHODS METHODS...; an error when VER is not 5.
Result<Greeting> parse_greeting(std::string_view buf);

// The method selection reply: 05 00, or 05 FF when no acceptable method.
std::string method_reply(bool no_auth);

struct Request {
  size_t length = 0;  // 0: more bytes needed
  // The target as an authority for net::parse_authority: "host:port",
  // "1.2.3.4:port" or "[v6]:port".
  std::string authority;
  // Set when the request is well-formed but asks for what is not supported:
  // the reply code to send (kCommandNotSupported, kAddressTypeNotSupported).
  uint8_t unsupported = 0;
};
// VER CMD RSV ATYP DST.ADDR DST.PORT. A domain must be 1..255 bytes of letters,
// digits, '-', '_' and '.', so it cannot carry a port or brackets of its own.
Result<Request> parse_request(std::string_view buf);

// VER REP RSV ATYP=1 BND.ADDR=0.0.0.0 BND.PORT=0.
std::string reply(uint8_t code);

}  // namespace rf::proxy::socks5
