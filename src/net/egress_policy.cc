#include "net/egress_policy.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace rf::net {
namespace {

constexpr size_t kMaxName = 253;
constexpr size_t kMaxLabel = 63;

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
int hex_value(char c) {
  if (is_digit(c)) return c - '0';
  return (c | 0x20) - 'a' + 10;
}
char lower_ascii(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c | 0x20) : c; }

// Untrusted text made safe for a message or a 403 body: bytes outside printable
// ASCII (and the quote and backslash) become \xNN, and it is cut after 100 bytes.
std::string printable(std::string_view text) {
  constexpr size_t kMax = 100;
  std::string out;
  for (size_t i = 0; i < text.size() && i < kMax; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\'' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  if (text.size() > kMax) out += "...";
  return out;
}
std::string quote(std::string_view text, char q = '"') { return q + printable(text) + q; }

// An error without a place; callers add it (make_error(where, e.message)).
Error problem(std::string message) { return make_error("", std::move(message)); }

// ---- IP literals ------------------------------------------------------------

IpAddress v4_from_u32(uint32_t v) {
  IpAddress a;
  a.bytes[0] = static_cast<uint8_t>(v >> 24);
  a.bytes[1] = static_cast<uint8_t>(v >> 16);
  a.bytes[2] = static_cast<uint8_t>(v >> 8);
  a.bytes[3] = static_cast<uint8_t>(v);
  return a;
}

IpAddress v4_from_bytes(const uint8_t* b) {
  IpAddress a;
  std::copy(b, b + 4, a.bytes.begin());
  return a;
}

// One part of an IPv4 literal as inet_aton(3) and URL parsers read it: "0x"
// then hex digits (none is 0), a leading 0 then octal, else decimal. nullopt
// when it is not such a number or exceeds 32 bits.
std::optional<uint64_t> parse_v4_part(std::string_view p) {
  if (p.empty()) return std::nullopt;
  int base = 10;
  if (p.size() >= 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
    base = 16;
    p.remove_prefix(2);
  } else if (p.size() >= 2 && p[0] == '0') {
    base = 8;
    p.remove_prefix(1);
  }
  uint64_t v = 0;
  for (char c : p) {
    int d = 0;
    if (is_digit(c))
      d = c - '0';
    else if (base == 16 && is_hex(c))
      d = hex_value(c);
    else
      return std::nullopt;
    if (d >= base) return std::nullopt;
    v = v * base + d;
    if (v > 0xffffffffu) return std::nullopt;
  }
  return v;
}

// IPv4 in every notation: 1 to 4 parts, the last filling the remaining bytes
// (127.1, 2130706433, 0x7f.0.0.1, 0177.0.0.1), one trailing dot allowed.
std::optional<IpAddress> parse_v4_any(std::string_view text) {
  if (text.size() > 1 && text.back() == '.') text.remove_suffix(1);
  std::array<uint64_t, 4> parts{};
  size_t n = 0;
  size_t start = 0;
  while (true) {
    const size_t dot = text.find('.', start);
    if (n == parts.size()) return std::nullopt;
    const auto v =
        parse_v4_part(text.substr(start, dot == std::string_view::npos ? dot : dot - start));
    if (!v) return std::nullopt;
    parts[n++] = *v;
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  for (size_t i = 0; i + 1 < n; ++i) {
    if (parts[i] > 0xff) return std::nullopt;
  }
  const uint64_t last_max = (uint64_t{1} << (8 * (5 - n))) - 1;
  if (parts[n - 1] > last_max) return std::nullopt;
  uint64_t v = parts[n - 1];
  for (size_t i = 0; i + 1 < n; ++i) v |= parts[i] << (24 - 8 * i);
  return v4_from_u32(static_cast<uint32_t>(v));
}

// The one IPv4 notation rules accept: four decimal parts without leading zeros.
std::optional<IpAddress> parse_dotted_quad(std::string_view text) {
  std::array<uint8_t, 4> b{};
  size_t i = 0;
  for (size_t part = 0; part < 4; ++part) {
    if (part > 0) {
      if (i >= text.size() || text[i] != '.') return std::nullopt;
      ++i;
    }
    const size_t begin = i;
    unsigned v = 0;
    while (i < text.size() && is_digit(text[i]) && i - begin < 3) v = v * 10 + (text[i++] - '0');
    if (i == begin || v > 255 || (text[begin] == '0' && i - begin > 1)) return std::nullopt;
    b[part] = static_cast<uint8_t>(v);
  }
  if (i != text.size()) return std::nullopt;
  return v4_from_bytes(b.data());
}

bool is_v4_mapped(const uint8_t* b) {
  for (int i = 0; i < 10; ++i) {
    if (b[i] != 0) return false;
  }
  return b[10] == 0xff && b[11] == 0xff;
}

// Plain IPv6 text (no brackets, no zone) as inet_pton(3) reads it; an
// IPv4-mapped address stays IPv6 here when `map` is false.
std::optional<IpAddress> parse_v6(std::string_view text, bool map = true) {
  // The longest form is ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255.
  if (text.empty() || text.size() > 45) return std::nullopt;
  for (char c : text) {
    if (!is_hex(c) && c != ':' && c != '.') return std::nullopt;  // no NUL cuts the text short
  }
  char buf[46];
  std::memcpy(buf, text.data(), text.size());
  buf[text.size()] = '\0';
  in6_addr a;
  if (inet_pton(AF_INET6, buf, &a) != 1) return std::nullopt;
  if (map) return IpAddress::from_in6(a);
  IpAddress out;
  out.v6 = true;
  std::memcpy(out.bytes.data(), &a, 16);
  return out;
}

// "fe80::1%eth0" without its zone id; nullopt when the zone is malformed.
std::optional<std::string_view> drop_zone(std::string_view text) {
  const size_t pct = text.find('%');
  if (pct == std::string_view::npos) return text;
  const std::string_view zone = text.substr(pct + 1);
  if (zone.empty() || zone.size() > 64) return std::nullopt;
  for (char c : zone) {
    if (!is_alpha(c) && !is_digit(c) && c != '.' && c != '_' && c != '-') return std::nullopt;
  }
  return text.substr(0, pct);
}

bool prefix_matches(const IpAddress& a, const IpAddress& net, int prefix) {
  if (a.v6 != net.v6) return false;
  const int full = prefix / 8;
  if (!std::equal(a.bytes.begin(), a.bytes.begin() + full, net.bytes.begin())) return false;
  const int rest = prefix % 8;
  if (rest == 0) return true;
  const auto mask = static_cast<uint8_t>(0xff << (8 - rest));
  return (a.bytes[full] & mask) == (net.bytes[full] & mask);
}

// "127.0.0.1" or "[::1]": an address as it is written before ":port".
std::string bracketed(const IpAddress& a) {
  return a.v6 ? "[" + a.to_string() + "]" : a.to_string();
}

// ---- address classes ------------------------------------------------------

struct Special {
  IpAddress net;
  int prefix;
  AddressClass cls;
  const char* what;
};

struct ClassDetail {
  AddressClass cls = AddressClass::public_unicast;
  std::string what;  // the range, for messages: "127.0.0.0/8"
};

const std::vector<Special>& special_ranges() {
  using C = AddressClass;
  struct Row {
    const char* net;
    int prefix;
    C cls;
    const char* what;
  };
  // First match wins: more specific rows come first.
  static const Row kRows[] = {
      {"0.0.0.0", 8, C::unspecified, "0.0.0.0/8, this host"},
      {"10.0.0.0", 8, C::private_use, "10.0.0.0/8"},
      {"100.64.0.0", 10, C::private_use, "100.64.0.0/10, carrier-grade NAT"},
      {"127.0.0.0", 8, C::loopback, "127.0.0.0/8"},
      {"169.254.0.0", 16, C::link_local, "169.254.0.0/16, where cloud metadata services listen"},
      {"172.16.0.0", 12, C::private_use, "172.16.0.0/12"},
      {"192.0.0.0", 24, C::reserved, "192.0.0.0/24, IETF protocol assignments"},
      {"192.0.2.0", 24, C::reserved, "192.0.2.0/24, documentation"},
      {"192.88.99.0", 24, C::reserved, "192.88.99.0/24, 6to4 relay anycast"},
      {"192.168.0.0", 16, C::private_use, "192.168.0.0/16"},
      {"198.18.0.0", 15, C::reserved, "198.18.0.0/15, benchmarking"},
      {"198.51.100.0", 24, C::reserved, "198.51.100.0/24, documentation"},
      {"203.0.113.0", 24, C::reserved, "203.0.113.0/24, documentation"},
      {"224.0.0.0", 4, C::multicast, "224.0.0.0/4"},
      {"255.255.255.255", 32, C::reserved, "255.255.255.255, broadcast"},
      {"240.0.0.0", 4, C::reserved, "240.0.0.0/4, reserved"},
      {"::", 128, C::unspecified, "::, this host"},
      {"::1", 128, C::loopback, "::1"},
      {"64:ff9b:1::", 48, C::private_use, "64:ff9b:1::/48, local-use NAT64"},
      {"::", 8, C::reserved, "::/8, IPv4-compatible and other retired forms"},
      {"100::", 64, C::reserved, "100::/64, discard-only"},
      {"2001::", 23, C::reserved, "2001::/23, IETF protocol assignments and Teredo"},
      {"2001:db8::", 32, C::reserved, "2001:db8::/32, documentation"},
      {"3fff::", 20, C::reserved, "3fff::/20, documentation"},
      {"5f00::", 16, C::reserved, "5f00::/16, segment routing"},
      {"fc00::", 7, C::unique_local, "fc00::/7"},
      {"fe80::", 10, C::link_local, "fe80::/10"},
      {"fec0::", 10, C::unique_local, "fec0::/10, deprecated site-local"},
      {"ff00::", 8, C::multicast, "ff00::/8"},
  };
  static const std::vector<Special> ranges = [] {
    std::vector<Special> out;
    for (const Row& r : kRows) {
      const std::string_view net = r.net;
      const auto a = net.find(':') == std::string_view::npos ? parse_dotted_quad(net)
                                                             : parse_v6(net, /*map=*/false);
      out.push_back({*a, r.prefix, r.cls, r.what});
    }
    return out;
  }();
  return ranges;
}

ClassDetail classify_detail(const IpAddress& addr);

// NAT64 and 6to4 addresses reach the IPv4 address they embed.
ClassDetail classify_embedded(const uint8_t* v4, const char* via) {
  ClassDetail d = classify_detail(v4_from_bytes(v4));
  if (d.cls != AddressClass::public_unicast) d.what = std::string(via) + " of " + d.what;
  return d;
}

ClassDetail classify_detail(const IpAddress& addr) {
  const IpAddress a =
      addr.v6 && is_v4_mapped(addr.bytes.data()) ? v4_from_bytes(addr.bytes.data() + 12) : addr;
  if (a.v6) {
    static const IpAddress kNat64 = *parse_v6("64:ff9b::", false);
    static const IpAddress k6to4 = *parse_v6("2002::", false);
    if (prefix_matches(a, kNat64, 96)) return classify_embedded(a.bytes.data() + 12, "NAT64");
    if (prefix_matches(a, k6to4, 16)) return classify_embedded(a.bytes.data() + 2, "6to4");
  }
  for (const Special& s : special_ranges()) {
    if (prefix_matches(a, s.net, s.prefix)) return {s.cls, s.what};
  }
  if (a.v6 && (a.bytes[0] & 0xe0) != 0x20) {
    return {AddressClass::reserved, "outside 2000::/3, the global unicast space"};
  }
  return {AddressClass::public_unicast, "public"};
}

// ---- hosts ------------------------------------------------------------------

// The first thing in `text` that no host name or IP literal has, as a message;
// nullopt when every byte may appear. `extra` lists further allowed bytes.
std::optional<std::string> char_problem(std::string_view text, std::string_view extra) {
  if (text.find('@') != std::string_view::npos) {
    return "userinfo ('user@host') is not allowed in a host";
  }
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x80) {
      return "a non-ASCII name; write an internationalised name in its punycode form "
             "(xn--...)";
    }
    if (c == ' ') return "a space is not allowed in a host";
    if (c < 0x20 || c == 0x7f) return "a control byte is not allowed in a host";
    if (c == '\\') return "a backslash is not allowed in a host";
    if (c == '%') return "percent-encoding and zone ids ('%') are not allowed in a host";
    if (is_alpha(ch) || is_digit(ch) || ch == '.' || ch == '-' || ch == '_') continue;
    if (extra.find(ch) != std::string_view::npos) continue;
    return std::string("'") + ch + "' cannot appear in a host name or IP address";
  }
  return std::nullopt;
}

// The last label is a number ("1", "0x1f"): URL parsers then read the whole
// host as IPv4, resolvers may too, so a name must not end like that.
bool ends_in_number(std::string_view name) {
  const size_t dot = name.rfind('.');
  std::string_view last = dot == std::string_view::npos ? name : name.substr(dot + 1);
  if (last.size() >= 2 && last[0] == '0' && last[1] == 'x') {
    last.remove_prefix(2);
    return std::all_of(last.begin(), last.end(), is_hex);
  }
  return !last.empty() && std::all_of(last.begin(), last.end(), is_digit);
}

// Lower-cased, without one trailing dot, and a valid DNS name; the caller has
// checked the bytes with char_problem.
Result<std::string> normalise_name(std::string_view text) {
  std::string name(text);
  for (char& c : name) c = lower_ascii(c);
  if (!name.empty() && name.back() == '.') name.pop_back();
  if (name.empty()) return problem("an empty name");
  if (name.size() > kMaxName) return problem("a name longer than 253 bytes");
  size_t start = 0;
  while (start <= name.size()) {
    size_t dot = name.find('.', start);
    if (dot == std::string::npos) dot = name.size();
    const std::string_view label = std::string_view(name).substr(start, dot - start);
    if (label.empty()) return problem("an empty label (two dots in a row, or a leading dot)");
    if (label.size() > kMaxLabel) return problem("a label longer than 63 bytes");
    for (char c : label) {
      if (!is_alpha(c) && !is_digit(c) && c != '-' && c != '_') {
        return problem(std::string("'") + c + "' cannot appear in a DNS name");
      }
    }
    if (label.front() == '-' || label.back() == '-') {
      return problem("a label that starts or ends with '-'");
    }
    start = dot + 1;
  }
  if (ends_in_number(name)) {
    return problem("ends in a number like an IPv4 address but is not a valid one (ambiguous)");
  }
  return name;
}

// A request or rule host: an IP address, or else a normalised DNS name.
struct Host {
  std::optional<IpAddress> ip;
  std::string name;
};

// `text` is a host without port: a name, an IPv4 literal in any notation, an
// IPv6 literal with or without brackets (no zone id).
Result<Host> parse_host(std::string_view text) {
  if (text.empty()) return problem("an empty host");
  if (auto p = char_problem(text, ":[]")) return problem(*p);
  if (text.front() == '[') {
    if (text.back() != ']') return problem("'[' without a closing ']'");
    const std::string_view inner = text.substr(1, text.size() - 2);
    if (auto a = parse_v6(inner)) return Host{a, {}};
    if (parse_v4_any(inner)) return problem("brackets are only for IPv6 addresses");
    return problem("not an IPv6 address in brackets");
  }
  if (text.find_first_of("[]") != std::string_view::npos) {
    return problem("brackets may only enclose a whole IPv6 address");
  }
  if (text.find(':') != std::string_view::npos) {
    if (auto a = parse_v6(text)) return Host{a, {}};
    return problem("not a valid IPv6 address");
  }
  if (auto a = parse_v4_any(text)) return Host{a, {}};
  auto name = normalise_name(text);
  if (!name) return name.take_error();
  return Host{std::nullopt, std::move(*name)};
}

Result<uint16_t> parse_port(std::string_view text) {
  if (text.empty()) return problem("an empty port after ':'");
  uint32_t v = 0;
  for (char c : text) {
    if (!is_digit(c)) return problem("port " + quote(text, '\'') + " is not a number");
    v = std::min<uint32_t>(v * 10 + (c - '0'), 1'000'000);
  }
  if (v == 0) return problem("port 0 is not a port");
  if (v > 65535) return problem("port " + printable(text) + " is out of range (1-65535)");
  return static_cast<uint16_t>(v);
}

// Splits "host:port", "[v6]:port" or "host". `port` is empty and `has_port`
// false when there is no ':' after the host.
struct HostPort {
  std::string_view host;
  std::string_view port;
  bool has_port = false;
};

Result<HostPort> split_host_port(std::string_view text) {
  HostPort hp;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) return problem("'[' without a closing ']'");
    hp.host = text.substr(0, close + 1);
    const std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return problem("unexpected text after ']'");
      hp.port = rest.substr(1);
      hp.has_port = true;
    }
    return hp;
  }
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos) {
    hp.host = text;
    return hp;
  }
  if (text.find(':', colon + 1) != std::string_view::npos) {
    return problem("an IPv6 address needs brackets, as in [::1]:443");
  }
  hp.host = text.substr(0, colon);
  hp.port = text.substr(colon + 1);
  hp.has_port = true;
  return hp;
}

// ---- rules ------------------------------------------------------------------

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// "ports 80 and 443", "port 8443", "any port".
std::string ports_text(std::optional<uint16_t> port, bool any_port) {
  if (any_port) return "any port";
  if (port) return "port " + std::to_string(*port);
  return "ports 80 and 443";
}

bool port_allowed(std::optional<uint16_t> rule_port, bool any_port, uint16_t port) {
  if (any_port) return true;
  if (rule_port) return *rule_port == port;
  return port == 80 || port == 443;
}

std::string_view article(AddressClass c) { return c == AddressClass::unspecified ? "an" : "a"; }

}  // namespace

// ---- public: addresses --------------------------------------------------

std::string IpAddress::to_string() const {
  if (!v6) {
    return std::to_string(bytes[0]) + "." + std::to_string(bytes[1]) + "." +
           std::to_string(bytes[2]) + "." + std::to_string(bytes[3]);
  }
  char buf[INET6_ADDRSTRLEN];
  in6_addr a;
  std::memcpy(&a, bytes.data(), 16);
  if (inet_ntop(AF_INET6, &a, buf, sizeof buf) == nullptr) return "?";
  return buf;
}

IpAddress IpAddress::from_in(const in_addr& a) {
  return v4_from_bytes(reinterpret_cast<const uint8_t*>(&a.s_addr));
}

IpAddress IpAddress::from_in6(const in6_addr& a) {
  const auto* b = reinterpret_cast<const uint8_t*>(&a);
  if (is_v4_mapped(b)) return v4_from_bytes(b + 12);
  IpAddress out;
  out.v6 = true;
  std::copy(b, b + 16, out.bytes.begin());
  return out;
}

std::optional<IpAddress> parse_ip_literal(std::string_view text) {
  const bool bracketed = text.size() >= 2 && text.front() == '[' && text.back() == ']';
  if (bracketed || text.find(':') != std::string_view::npos) {
    if (bracketed) text = text.substr(1, text.size() - 2);
    const auto plain = drop_zone(text);
    if (!plain) return std::nullopt;
    return parse_v6(*plain);
  }
  return parse_v4_any(text);
}

AddressClass classify(const IpAddress& addr) { return classify_detail(addr).cls; }

std::string_view to_string(AddressClass c) {
  switch (c) {
    case AddressClass::public_unicast:
      return "public";
    case AddressClass::loopback:
      return "loopback";
    case AddressClass::link_local:
      return "link-local";
    case AddressClass::private_use:
      return "private";
    case AddressClass::unique_local:
      return "unique-local";
    case AddressClass::unspecified:
      return "unspecified";
    case AddressClass::multicast:
      return "multicast";
    case AddressClass::reserved:
      return "reserved";
  }
  return "?";
}

// ---- public: authorities ------------------------------------------------

Result<Authority> parse_authority(std::string_view text, std::optional<uint16_t> default_port) {
  const std::string where = "request target " + quote(text);
  if (text.empty()) return make_error(where, "empty");
  // Userinfo and stray bytes first: "a@b:c" is about the '@', not the port.
  if (auto p = char_problem(text, ":[]")) return make_error(where, *p);
  auto hp = split_host_port(text);
  if (!hp) return make_error(where, hp.error().message);
  uint16_t port = 0;
  if (hp->has_port) {
    auto p = parse_port(hp->port);
    if (!p) return make_error(where, p.error().message);
    port = *p;
  } else if (default_port && *default_port != 0) {
    port = *default_port;
  } else {
    return make_error(where, "no port (expected host:port)");
  }
  auto host = parse_host(hp->host);
  if (!host) return make_error(where, host.error().message);
  return Authority{host->ip ? host->ip->to_string() : std::move(host->name), port};
}

// ---- public: the policy -------------------------------------------------

Result<EgressPolicy> EgressPolicy::parse(const std::vector<std::string>& rules) {
  EgressPolicy policy;
  for (const std::string& rule : rules) {
    if (auto s = policy.add_rule(rule); !s) return s.take_error();
    policy.rules_.push_back(rule);
  }
  return policy;
}

Status EgressPolicy::add_rule(std::string_view written) {
  const std::string where = "--allow " + quote(written, '\'');
  const std::string_view r = trim(written);
  auto fail = [&where](std::string message) { return make_error(where, std::move(message)); };
  if (r.empty()) return fail("an empty rule");
  if (r.find("://") != std::string_view::npos) {
    return fail("a rule is host[:port], not a URL: leave out the scheme and path");
  }
  if (auto p = char_problem(r, ":[]*/")) return fail(*p);

  // CIDR: "10.1.0.0/16", "fd00::/8" (brackets tolerated), no port.
  if (const size_t slash = r.find('/'); slash != std::string_view::npos) {
    std::string_view net_text = r.substr(0, slash);
    const std::string_view len_text = r.substr(slash + 1);
    if (net_text.size() >= 2 && net_text.front() == '[' && net_text.back() == ']') {
      net_text = net_text.substr(1, net_text.size() - 2);
    }
    const bool v6 = net_text.find(':') != std::string_view::npos;
    auto net = v6 ? parse_v6(net_text, /*map=*/false) : parse_dotted_quad(net_text);
    if (!net) {
      if (!v6 && parse_v4_any(net_text)) {
        return fail("write the network as a dotted quad (" + parse_v4_any(net_text)->to_string() +
                    "/...)");
      }
      return fail("'/' only follows an IP address, in a CIDR rule such as 10.1.0.0/16");
    }
    const int max = v6 ? 128 : 32;
    if (len_text.find(':') != std::string_view::npos) {
      return fail("a CIDR rule takes no port (the name rule sets the port)");
    }
    int prefix = 0;
    for (char c : len_text) prefix = is_digit(c) && prefix <= max ? prefix * 10 + (c - '0') : 1000;
    if (len_text.empty() || prefix > max) {
      return fail("the prefix length after '/' must be 0 to " + std::to_string(max));
    }
    if (v6 && is_v4_mapped(net->bytes.data()) && prefix >= 96) {
      *net = v4_from_bytes(net->bytes.data() + 12);
      prefix -= 96;
    }
    IpAddress masked;
    masked.v6 = net->v6;
    for (int i = 0; i < prefix / 8; ++i) masked.bytes[i] = net->bytes[i];
    if (prefix % 8 != 0) {
      masked.bytes[prefix / 8] =
          net->bytes[prefix / 8] & static_cast<uint8_t>(0xff << (8 - prefix % 8));
    }
    if (masked != *net) {
      return fail("bits are set after the prefix; the network is " + masked.to_string() + "/" +
                  std::to_string(prefix));
    }
    addresses_.push_back({std::string(r), *net, prefix, /*single=*/false, std::nullopt, false});
    return ok_status();
  }

  auto hp = split_host_port(r);
  if (!hp) {
    if (r.front() != '[' && parse_v6(r)) {
      return fail("write an IPv6 address in brackets: [" + std::string(r) + "]");
    }
    return fail(hp.error().message);
  }
  std::optional<uint16_t> port;
  bool any_port = false;
  if (hp->has_port && hp->port == "*") {
    any_port = true;
  } else if (hp->has_port) {
    auto p = parse_port(hp->port);
    if (!p) return fail(p.error().message);
    port = *p;
  }

  std::string_view host = hp->host;
  const bool wildcard = host.starts_with("*.");
  if (wildcard) host.remove_prefix(2);
  if (host.find('*') != std::string_view::npos || hp->host == "*") {
    if (hp->host == "*") {
      return fail("'*' alone would allow every host; name a domain, as in *.example.org");
    }
    return fail("'*' may only be the whole first label, as in *.example.org");
  }
  if (wildcard && host.empty()) return fail("a wildcard needs a domain after '*.'");
  auto h = parse_host(host);
  if (!h) return fail(h.error().message);

  if (h->ip) {
    if (wildcard) return fail("a wildcard needs a domain, not an IP address");
    if (host.front() != '[' && !parse_dotted_quad(host)) {
      return fail("write the IPv4 address as a dotted quad: " + h->ip->to_string());
    }
    if (h->ip->v6 && host.front() != '[') {
      return fail("write an IPv6 address in brackets: " + bracketed(*h->ip));
    }
    if (classify(*h->ip) == AddressClass::unspecified) {
      return fail(h->ip->to_string() +
                  " is never allowed: connecting to it reaches this host (to allow loopback, "
                  "name 127.0.0.1 or [::1])");
    }
    addresses_.push_back(
        {std::string(r), *h->ip, h->ip->v6 ? 128 : 32, /*single=*/true, port, any_port});
    return ok_status();
  }
  if (wildcard && h->name.find('.') == std::string::npos) {
    return fail("a wildcard over a single label (*." + h->name +
                ") would allow a whole top-level domain; name a domain with two labels at "
                "least, as in *.example." +
                h->name);
  }
  names_.push_back({std::string(r), h->name, wildcard, port, any_port});
  return ok_status();
}

Verdict EgressPolicy::check_name(const Authority& target) const {
  auto host = parse_host(target.host);
  if (!host) {
    return {false, "refused host " + quote(target.host) + ": " + host.error().message};
  }
  if (target.port == 0) return {false, "refused " + printable(target.host) + ": port 0"};
  const uint16_t port = target.port;

  if (host->ip) {
    const IpAddress& ip = *host->ip;
    const std::string shown = bracketed(ip) + ":" + std::to_string(port);
    std::string hint;
    for (const AddressRule& a : addresses_) {
      if (a.single && a.addr == ip) {
        if (port_allowed(a.port, a.any_port, port)) return {true, a.rule};
        hint = ": " + a.rule + " allows " + ports_text(a.port, a.any_port) + " only";
      } else if (!a.single && hint.empty() && prefix_matches(ip, a.addr, a.prefix)) {
        hint = ": " + a.rule + " covers only addresses that an allowed name resolves to";
      }
    }
    return {false, "no --allow rule names the IP address " + shown + hint +
                       " (to allow it, add --allow " + shown + ")"};
  }

  const std::string& name = host->name;
  const std::string shown = name + ":" + std::to_string(port);
  std::string hint;
  for (const NameRule& n : names_) {
    const bool match = n.wildcard ? name.size() > n.domain.size() + 1 && name.ends_with(n.domain) &&
                                        name[name.size() - n.domain.size() - 1] == '.'
                                  : name == n.domain;
    if (match) {
      if (port_allowed(n.port, n.any_port, port)) return {true, n.rule};
      hint = ": " + n.rule + " allows " + ports_text(n.port, n.any_port) + " only";
    } else if (n.wildcard && name == n.domain && hint.empty()) {
      hint =
          ": " + n.rule + " covers the names below " + n.domain + ", not " + n.domain + " itself";
    }
  }
  return {false,
          "no --allow rule matches " + shown + hint + " (to allow it, add --allow " + shown + ")"};
}

Verdict EgressPolicy::check_address(std::string_view name, const IpAddress& addr,
                                    std::optional<uint16_t> port) const {
  const IpAddress a =
      addr.v6 && is_v4_mapped(addr.bytes.data()) ? v4_from_bytes(addr.bytes.data() + 12) : addr;
  const ClassDetail d = classify_detail(a);
  const std::string ip = a.to_string();
  const std::string subject =
      name.empty() || name == ip ? ip : printable(name) + " resolved to " + ip;
  const std::string kind = std::string(article(d.cls)) + " " + std::string(to_string(d.cls)) +
                           " address (" + d.what + ")";
  if (d.cls == AddressClass::unspecified) {
    return {false, subject + ", " + kind +
                       ", which is never allowed: connecting to it reaches "
                       "this host"};
  }
  std::string hint;
  for (const AddressRule& r : addresses_) {
    if (!prefix_matches(a, r.addr, r.prefix)) continue;
    if (!r.port || r.any_port || (port && *port == *r.port)) return {true, r.rule};
    hint = port ? ": " + r.rule + " covers it on port " + std::to_string(*r.port) + " only"
                : ": " + r.rule + " covers it on port " + std::to_string(*r.port) +
                      " only, and the port was not given";
  }
  if (d.cls == AddressClass::public_unicast) return {true, ip + " is a public address"};
  // A rule without a port covers every port here (the name rule chose the port).
  const std::string suggestion =
      hint.empty() || !port ? bracketed(a) : bracketed(a) + ":" + std::to_string(*port);
  return {false, subject + ", " + kind + ", which no --allow rule covers" + hint +
                     " (to allow it, add --allow " + suggestion + " or a CIDR rule over it)"};
}

// ---- public: what address rules reach ---------------------------------------

namespace {

// A rule's ports as check_address reads them: nullopt is every port.
std::optional<std::vector<uint16_t>> ports_of(const EgressPolicy::AddressReach& r) {
  if (r.any_port) return std::nullopt;
  if (r.port) return std::vector<uint16_t>{*r.port};
  if (r.single) return std::vector<uint16_t>{80, 443};
  return std::nullopt;
}

}  // namespace

bool EgressPolicy::AddressReach::public_only() const {
  return single && classify(addr) == AddressClass::public_unicast;
}

bool EgressPolicy::AddressReach::reaches(const IpAddress& address, uint16_t p) const {
  if (!prefix_matches(address, addr, prefix)) return false;
  const auto ports = ports_of(*this);
  return !ports || std::find(ports->begin(), ports->end(), p) != ports->end();
}

std::vector<EgressPolicy::AddressReach> EgressPolicy::address_rules() const {
  std::vector<AddressReach> out;
  for (const AddressRule& a : addresses_) {
    out.push_back({a.rule, a.addr, a.prefix, a.single, a.port, a.any_port});
  }
  return out;
}

bool EgressPolicy::covers(const AddressReach& r) const {
  const auto wanted = ports_of(r);
  for (const AddressRule& a : addresses_) {
    const AddressReach mine{a.rule, a.addr, a.prefix, a.single, a.port, a.any_port};
    // The whole range: this rule's prefix is as short or shorter and matches.
    if (mine.prefix > r.prefix || !prefix_matches(r.addr, mine.addr, mine.prefix)) continue;
    const auto have = ports_of(mine);
    if (!have) return true;
    if (!wanted) continue;
    const bool all = std::all_of(wanted->begin(), wanted->end(), [&](uint16_t p) {
      return std::find(have->begin(), have->end(), p) != have->end();
    });
    if (all) return true;
  }
  return false;
}

}  // namespace rf::net
