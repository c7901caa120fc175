// Egress policy (host side): which names, ports and addresses a sandbox with
// `--network proxy` may reach through the proxy. Pure data and functions: no
// sockets, no DNS. The proxy asks twice per connection:
//   1. check_name(host, port) on the host exactly as the client wrote it (the
//      CONNECT authority, or the absolute URI / Host of a plain HTTP request),
//      before any DNS query: only allowed names are ever resolved;
//   2. check_address(addr) for the address it is about to connect to, after
//      resolving (DNS rebinding: an allowed name that resolves to loopback,
//      link-local, private or unique-local space is refused unless allowed).
//
// Rules (`--allow`, the worker's `sandbox_allow` setting):
//   api.example.com          that exact name, ports 80 and 443
//   api.example.com:8443     that exact name, that port only
//   *.pkg.example.org        any name strictly below pkg.example.org (not
//                            pkg.example.org itself), ports 80 and 443
//   *.pkg.example.org:443    the same, port 443 only
//   10.0.0.5 / [fd00::1]:80  an IP literal: that address may be requested and
//                            connected to, even when private
//   10.1.0.0/16              (check_address only) private addresses in this
//                            range may be connected to after resolving
// Names are compared lower-cased, without one trailing dot, as IDNA/punycode
// A-labels; a rule or host that is not a valid DNS name is refused.
#pragma once

#include <netinet/in.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/result.h"

namespace rf::net {

// An IPv4 or IPv6 address (an IPv4-mapped IPv6 address is stored as IPv4).
struct IpAddress {
  bool v6 = false;
  std::array<uint8_t, 16> bytes{};  // v4 uses bytes[0..3]
  std::string to_string() const;    // "127.0.0.1", "fd00::1"
  friend bool operator==(const IpAddress&, const IpAddress&) = default;
};

// Parses an IP literal in every notation a resolver or URL parser accepts, so
// that none can pass as a name: dotted quad, shorthand (127.1), decimal
// (2130706433), hex (0x7f000001, 0x7f.0.0.1), octal (0177.0.0.1), IPv6 with or
// without brackets, IPv4-mapped and IPv4-compatible IPv6 (::ffff:127.0.0.1),
// and a zone id (fe80::1%eth0). nullopt when `text` is not an IP literal.
std::optional<IpAddress> parse_ip_literal(std::string_view text);

enum class AddressClass {
  public_unicast,
  loopback,     // 127.0.0.0/8, ::1
  link_local,   // 169.254.0.0/16 (cloud metadata), fe80::/10
  private_use,  // 10/8, 172.16/12, 192.168/16, 100.64/10 (CGNAT)
  unique_local, // fc00::/7
  unspecified,  // 0.0.0.0/8, ::
  multicast,    // 224.0.0.0/4, ff00::/8
  reserved,     // 240.0.0.0/4, 255.255.255.255, documentation ranges, ...
};
AddressClass classify(const IpAddress& addr);
std::string_view to_string(AddressClass c);

// A request target: host (a name lower-cased without the trailing dot, or an
// IP literal without brackets) and port.
struct Authority {
  std::string host;
  uint16_t port = 0;
};

// Parses "host:port", "[v6]:port", or "host" with `default_port`. Refuses, with
// a message naming what is wrong: userinfo ("user@host"), an empty host, a bad
// or zero port, characters no DNS name or IP literal has (%, /, \, spaces,
// control bytes), more than 253 bytes.
Result<Authority> parse_authority(std::string_view text, std::optional<uint16_t> default_port);

struct Verdict {
  bool allowed = false;
  // Allowed: the rule as written ("*.pkg.example.org:443"). Refused: why, in a
  // sentence fit for a 403 body ("no --allow rule matches evil.com:443";
  // "api.example.com resolved to 127.0.0.1, a loopback address, which no rule
  // allows").
  std::string reason;
};

class EgressPolicy {
 public:
  // Parses every rule; the error names the rule and what is wrong with it
  // ("--allow '*.': a wildcard needs a domain after '*.'").
  static Result<EgressPolicy> parse(const std::vector<std::string>& rules);

  // Step 1, before any DNS query. An IP literal host is allowed only by an IP
  // rule for that same address (and port).
  Verdict check_name(const Authority& target) const;
  // Step 2, for each address the proxy is about to connect to. Public unicast
  // addresses pass; every other class passes only when an IP or CIDR rule
  // covers the address. `name` is only for the message.
  Verdict check_address(std::string_view name, const IpAddress& addr) const;

  const std::vector<std::string>& rules() const { return rules_; }

 private:
  struct NameRule {
    std::string rule;    // as written
    std::string domain;  // normalised
    bool wildcard = false;
    std::optional<uint16_t> port;  // nullopt: 80 and 443
  };
  struct AddressRule {
    std::string rule;
    IpAddress addr;
    int prefix = 0;                // 32/128 for a single address
    std::optional<uint16_t> port;  // only for single-address rules
  };
  std::vector<std::string> rules_;
  std::vector<NameRule> names_;
  std::vector<AddressRule> addresses_;
};

}  // namespace rf::net
