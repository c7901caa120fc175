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
//   api.example.com:*        that exact name, any port
//   *.pkg.example.org        any name strictly below pkg.example.org (not
//                            pkg.example.org itself), ports 80 and 443; the
//                            domain needs two labels at least (no `*.com`)
//   *.pkg.example.org:443    the same, port 443 only
//   10.0.0.5 / [fd00::1]:80  an IP literal (IPv4 as a dotted quad, IPv6 in
//                            brackets): that address may be requested (ports
//                            80 and 443, or the one given) and connected to,
//                            even when private
//   10.1.0.0/16, fd00::/8    (check_address only) addresses in this range may
//                            be connected to after resolving an allowed name
// Names are compared lower-cased, without one trailing dot, as IDNA/punycode
// A-labels; a rule or host that is not a valid DNS name is refused. 0.0.0.0/8
// and :: are never allowed (Linux connects them to the local host).
// docs/network.md ("Allow rules") has the whole syntax and what is refused.
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
  // From what the resolver or accept() returns; an IPv4-mapped IPv6 address
  // (::ffff:a.b.c.d) becomes IPv4, so it is classified and matched as such.
  static IpAddress from_in(const in_addr& a);
  static IpAddress from_in6(const in6_addr& a);
  friend bool operator==(const IpAddress&, const IpAddress&) = default;
};

// Parses an IP literal in every notation a resolver or URL parser accepts, so
// that none can pass as a name: dotted quad, shorthand (127.1), decimal
// (2130706433), hex (0x7f000001, 0x7f.0.0.1), octal (0177.0.0.1), IPv6 with or
// without brackets, IPv4-mapped and IPv4-compatible IPv6 (::ffff:127.0.0.1),
// and a zone id (fe80::1%eth0, dropped), with one trailing dot after IPv4
// (127.0.0.1.). nullopt when `text` is not an IP literal.
std::optional<IpAddress> parse_ip_literal(std::string_view text);

enum class AddressClass {
  public_unicast,
  loopback,      // 127.0.0.0/8, ::1
  link_local,    // 169.254.0.0/16 (cloud metadata), fe80::/10
  private_use,   // 10/8, 172.16/12, 192.168/16, 100.64/10 (CGNAT), 64:ff9b:1::/48
  unique_local,  // fc00::/7, fec0::/10 (deprecated site-local)
  unspecified,   // 0.0.0.0/8, ::
  multicast,     // 224.0.0.0/4, ff00::/8
  reserved,      // 240.0.0.0/4, 255.255.255.255, documentation, benchmarking,
                 // 192.0.0/24, ::/8 (IPv4-compatible), 2001::/23 (Teredo), any
                 // IPv6 outside 2000::/3, ...
};
// NAT64 (64:ff9b::/96) and 6to4 (2002::/16) addresses take the class of the
// IPv4 address they embed.
AddressClass classify(const IpAddress& addr);
std::string_view to_string(AddressClass c);  // "loopback", "link-local", ...

// A request target: host (a name lower-cased without the trailing dot, or an
// IP literal in its canonical form without brackets: "0x7f.1" becomes
// "127.0.0.1") and port.
struct Authority {
  std::string host;
  uint16_t port = 0;
};

// Parses "host:port", "[v6]:port", or "host" with `default_port`. Refuses, with
// a message naming what is wrong: userinfo ("user@host"), an empty host, a bad,
// empty or zero port, characters no DNS name or IP literal has (%, so no
// percent-encoding or zone id; /, \, spaces, control bytes, non-ASCII), an
// IPv6 address without brackets, a name that is not a valid DNS name (more
// than 253 bytes, empty or long labels, a last label that is a number).
Result<Authority> parse_authority(std::string_view text, std::optional<uint16_t> default_port);

struct Verdict {
  bool allowed = false;
  // Allowed: the rule as written ("*.pkg.example.org:443"; for a public address
  // at step 2, "93.184.216.34 is a public address"). Refused: why, in a sentence
  // fit for a 403 body, naming the target and the rule that would allow it
  // ("no --allow rule matches evil.com:443 (to allow it, add --allow
  // evil.com:443)"; "api.example.com resolved to 127.0.0.1, a loopback address
  // (127.0.0.0/8), which no --allow rule covers (...)"). Bytes from the request
  // are escaped (\xNN), so the reason is printable ASCII.
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
  // covers the address (unspecified never does). A rule with a port covers the
  // address on that port only, and so only when `port` is given: pass it.
  // `name` is only for the message.
  Verdict check_address(std::string_view name, const IpAddress& addr,
                        std::optional<uint16_t> port = std::nullopt) const;

  const std::vector<std::string>& rules() const { return rules_; }

  // What one address rule (an IP literal or a CIDR range) lets through: its
  // range, and its ports (nullopt with !any_port: 80 and 443 for a single
  // address, every port for a range; check_address's reading).
  struct AddressReach {
    std::string rule;  // as written
    IpAddress addr;
    int prefix = 32;
    bool single = true;
    std::optional<uint16_t> port;
    bool any_port = false;
    // Every address of the range is public unicast (a single public address;
    // never a range, which is written only to reach beyond public space).
    bool public_only() const;
    // Lets `address` through on `port`.
    bool reaches(const IpAddress& address, uint16_t port) const;
  };
  std::vector<AddressReach> address_rules() const;
  // Whether the address rules of this policy let through all that `r` does:
  // every address of its range, on every port it names. (How an operator's
  // list bounds the rules a tenant may write: policy/operator_policy.h.)
  bool covers(const AddressReach& r) const;

 private:
  Status add_rule(std::string_view written);

  struct NameRule {
    std::string rule;    // as written
    std::string domain;  // normalised
    bool wildcard = false;
    std::optional<uint16_t> port;  // nullopt: 80 and 443 (or any_port)
    bool any_port = false;         // ":*"
  };
  struct AddressRule {
    std::string rule;
    IpAddress addr;
    int prefix = 0;                // 32/128 for a single address
    bool single = true;            // written without a prefix: check_name too
    std::optional<uint16_t> port;  // only for single-address rules
    bool any_port = false;         // ":*"
  };
  std::vector<std::string> rules_;
  std::vector<NameRule> names_;
  std::vector<AddressRule> addresses_;
};

}  // namespace rf::net
