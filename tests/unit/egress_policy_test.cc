#include "net/egress_policy.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace rf::net {
namespace {

IpAddress ip(std::string_view text) {
  auto a = parse_ip_literal(text);
  EXPECT_TRUE(a.has_value()) << text;
  return a.value_or(IpAddress{});
}

EgressPolicy policy(const std::vector<std::string>& rules) {
  auto p = EgressPolicy::parse(rules);
  EXPECT_TRUE(p.ok()) << p.error().to_string();
  return p.ok() ? *p : EgressPolicy{};
}

std::string rule_error(const std::string& rule) {
  auto p = EgressPolicy::parse({rule});
  return p.ok() ? "(parsed)" : p.error().to_string();
}

std::string authority_error(std::string_view text) {
  auto a = parse_authority(text, 443);
  return a.ok() ? "(parsed)" : a.error().to_string();
}

// What the proxy does with a CONNECT authority: parse it, then step 1.
Verdict request(const EgressPolicy& p, std::string_view text) {
  auto a = parse_authority(text, 443);
  if (!a.ok()) return {false, a.error().to_string()};
  return p.check_name(*a);
}

// Every notation a resolver or URL parser reads as these two addresses.
const std::vector<std::string> kLoopbackSpellings = {
    "127.0.0.1",
    "127.1",
    "127.0.1",
    "2130706433",
    "0x7f000001",
    "0X7F000001",
    "0x7f.0.0.1",
    "0x7f.1",
    "0177.0.0.1",
    "0177.1",
    "017700000001",
    "0x7F.0x0.0.01",
    "127.0.0.1.",
    "0x7f.0.0.0x1",
    "0177.0.0x0.1",
    "::ffff:127.0.0.1",
    "::FFFF:7f00:1",
    "[::ffff:127.0.0.1]",
    "0:0:0:0:0:ffff:7f00:0001",
};
const std::vector<std::string> kMetadataSpellings = {
    "169.254.169.254",     "0xa9fea9fe",        "2852039166",       "0251.0376.0251.0376",
    "0xa9.0xfe.0xa9.0xfe", "169.254.43518",     "169.16689662",     "0xa9.254.0xa9fe",
    "0251.0xfe.43518",     "0251.0376.0124776", "169.254.169.254.", "::ffff:169.254.169.254",
    "[::ffff:a9fe:a9fe]",  "025177524776",
};

TEST(EgressIpLiteral, ReadsEveryNotationOfLoopbackAndMetadata) {
  for (const auto& text : kLoopbackSpellings) {
    auto a = parse_ip_literal(text);
    ASSERT_TRUE(a.has_value()) << text;
    EXPECT_FALSE(a->v6) << text;
    EXPECT_EQ(a->to_string(), "127.0.0.1") << text;
  }
  for (const auto& text : kMetadataSpellings) {
    auto a = parse_ip_literal(text);
    ASSERT_TRUE(a.has_value()) << text;
    EXPECT_EQ(a->to_string(), "169.254.169.254") << text;
  }
}

TEST(EgressIpLiteral, ShortFormsFillTheRemainingBytes) {
  EXPECT_EQ(ip("4294967295").to_string(), "255.255.255.255");
  EXPECT_EQ(ip("0").to_string(), "0.0.0.0");
  EXPECT_EQ(ip("0x").to_string(), "0.0.0.0");  // URL parsers read a bare 0x as 0
  EXPECT_EQ(ip("1.16777215").to_string(), "1.255.255.255");
  EXPECT_EQ(ip("1.2.65535").to_string(), "1.2.255.255");
  EXPECT_EQ(ip("10.0.5").to_string(), "10.0.0.5");
  EXPECT_EQ(ip("012.0.0.5").to_string(), "10.0.0.5");  // octal
  EXPECT_EQ(ip("0x0a.0.0.5").to_string(), "10.0.0.5");
  EXPECT_EQ(ip("000000000000127.0.0.1").to_string(), "87.0.0.1");  // octal 127 = 87
}

TEST(EgressIpLiteral, ReadsIpv6WithBracketsAndZones) {
  EXPECT_EQ(ip("::1").to_string(), "::1");
  EXPECT_EQ(ip("[::1]").to_string(), "::1");
  EXPECT_EQ(ip("FD00::1").to_string(), "fd00::1");
  EXPECT_EQ(ip("fe80::1%eth0").to_string(), "fe80::1");
  EXPECT_EQ(ip("[fe80::1%25eth0]").to_string(), "fe80::1");
  EXPECT_EQ(ip("::").to_string(), "::");
  EXPECT_EQ(ip("2001:db8:0:0:0:0:0:1").to_string(), "2001:db8::1");
  EXPECT_TRUE(ip("::1").v6);
  // IPv4-compatible (deprecated) stays IPv6; only IPv4-mapped becomes IPv4.
  EXPECT_TRUE(ip("::127.0.0.1").v6);
  EXPECT_EQ(ip("::127.0.0.1"), ip("::7f00:1"));
  EXPECT_FALSE(ip("::ffff:10.0.0.5").v6);
  EXPECT_EQ(ip("::ffff:10.0.0.5"), ip("10.0.0.5"));
}

TEST(EgressIpLiteral, RefusesWhatIsNoLiteral) {
  for (const char* text : {"",
                           ".",
                           "..",
                           "1..1",
                           ".1",
                           "1.2.3.4.5",
                           "256.0.0.1",
                           "1.256.0.1",
                           "1.2.3.256",
                           "4294967296",
                           "0x100000000",
                           "1.16777216",
                           "1.2.65536",
                           "08.0.0.1",
                           "09",
                           "0x1g",
                           "1.2.3.4..",
                           "[127.0.0.1]",
                           "[::1",
                           "::1]",
                           "1:2",
                           "fe80::1%",
                           "fe80::1%eth/0",
                           "fe80::1%a%b",
                           "12345::",
                           ":::",
                           "1::2::3",
                           "::ffff:0x7f.1",
                           "::ffff:127.1",
                           "example.com",
                           "127.0.0.1 ",
                           " 127.0.0.1",
                           "+1.2.3.4",
                           "1.2.3.-4",
                           "1.2.3.4x",
                           "99999999999999999999999",
                           "0x7f.0.0.1/8",
                           "127.0.0.1%eth0",
                           "[]",
                           "[ ::1]",
                           "::1\n",
                           "::ffff:127.0.0.01",
                           "::ffff:1.2.3",
                           "1:2:3:4:5:6:7:8:9",
                           "::ffff:1.2.3.4.",
                           "::ffff:256.1.1.1",
                           "::00001"}) {
    EXPECT_FALSE(parse_ip_literal(text).has_value()) << text;
  }
  EXPECT_FALSE(parse_ip_literal(std::string_view("::1\0", 4)).has_value());
  EXPECT_FALSE(parse_ip_literal(std::string_view("127.0.0.1\0", 10)).has_value());
}

TEST(EgressIpLiteral, ToStringRoundTrips) {
  for (const char* text :
       {"0.0.0.0", "255.255.255.255", "::", "::1", "::127.0.0.1", "64:ff9b::7f00:1",
        "2002:7f00:1::1", "fe80::1", "1::", "1:2:3:4:5:6:7:8", "::ffff:0:7f00:1"}) {
    const IpAddress a = ip(text);
    EXPECT_EQ(ip(a.to_string()), a) << text << " -> " << a.to_string();
  }
}

TEST(EgressIpLiteral, FromResolverStructsMapsIpv4MappedToIpv4) {
  in6_addr a6{};
  ASSERT_EQ(inet_pton(AF_INET6, "::ffff:169.254.169.254", &a6), 1);
  const IpAddress mapped = IpAddress::from_in6(a6);
  EXPECT_FALSE(mapped.v6);
  EXPECT_EQ(mapped.to_string(), "169.254.169.254");
  ASSERT_EQ(inet_pton(AF_INET6, "fd00::1", &a6), 1);
  EXPECT_EQ(IpAddress::from_in6(a6), ip("fd00::1"));
  in_addr a4{};
  ASSERT_EQ(inet_pton(AF_INET, "10.0.0.5", &a4), 1);
  EXPECT_EQ(IpAddress::from_in(a4), ip("10.0.0.5"));
}

TEST(EgressClassify, NamesEverySpecialRange) {
  struct Case {
    const char* addr;
    AddressClass cls;
  };
  using C = AddressClass;
  const Case cases[] = {
      {"93.184.216.34", C::public_unicast},
      {"8.8.8.8", C::public_unicast},
      {"1.1.1.1", C::public_unicast},
      {"2606:4700::1111", C::public_unicast},
      {"127.0.0.1", C::loopback},
      {"127.255.255.254", C::loopback},
      {"::1", C::loopback},
      {"169.254.169.254", C::link_local},
      {"169.254.0.1", C::link_local},
      {"fe80::1", C::link_local},
      {"febf::1", C::link_local},
      {"10.0.0.5", C::private_use},
      {"172.16.0.1", C::private_use},
      {"172.31.255.255", C::private_use},
      {"172.32.0.1", C::public_unicast},
      {"172.15.255.255", C::public_unicast},
      {"192.168.1.1", C::private_use},
      {"100.64.0.1", C::private_use},
      {"100.127.255.255", C::private_use},
      {"100.128.0.1", C::public_unicast},
      {"fd00::1", C::unique_local},
      {"fc00::1", C::unique_local},
      {"fec0::1", C::unique_local},
      {"0.0.0.0", C::unspecified},
      {"0.1.2.3", C::unspecified},
      {"::", C::unspecified},
      {"224.0.0.1", C::multicast},
      {"239.255.255.250", C::multicast},
      {"ff02::1", C::multicast},
      {"240.0.0.1", C::reserved},
      {"255.255.255.255", C::reserved},
      {"192.0.2.1", C::reserved},
      {"198.51.100.7", C::reserved},
      {"203.0.113.9", C::reserved},
      {"198.18.0.1", C::reserved},
      {"198.19.255.255", C::reserved},
      {"198.20.0.1", C::public_unicast},
      {"192.0.0.170", C::reserved},
      {"192.88.99.1", C::reserved},
      {"2001:db8::1", C::reserved},
      {"3fff::1", C::reserved},
      {"2001::1", C::reserved},
      {"100::1", C::reserved},
      {"::127.0.0.1", C::reserved},
      {"::ffff:0:7f00:1", C::reserved},
      {"4000::1", C::reserved},
      {"5f00::1", C::reserved},
      {"64:ff9b:1::1", C::private_use},
      // NAT64 and 6to4 take the class of the IPv4 address they embed.
      {"64:ff9b::7f00:1", C::loopback},
      {"64:ff9b::a9fe:a9fe", C::link_local},
      {"64:ff9b::a00:5", C::private_use},
      {"64:ff9b::808:808", C::public_unicast},
      {"2002:7f00:1::1", C::loopback},
      {"2002:a9fe:a9fe::", C::link_local},
      {"2002:c0a8:101::1", C::private_use},
      {"2002:808:808::1", C::public_unicast},
      // IPv4-mapped: classified as the IPv4 address.
      {"::ffff:127.0.0.1", C::loopback},
      {"::ffff:169.254.169.254", C::link_local},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(to_string(classify(ip(c.addr))), to_string(c.cls)) << c.addr;
  }
  // A mapped address built by hand (not through the parser) is still IPv4.
  IpAddress raw;
  raw.v6 = true;
  raw.bytes[10] = raw.bytes[11] = 0xff;
  raw.bytes[12] = 127;
  raw.bytes[15] = 1;
  EXPECT_EQ(classify(raw), AddressClass::loopback);
}

TEST(EgressAuthority, ParsesHostPortForms) {
  auto a = parse_authority("API.Example.COM.:8443", std::nullopt);
  ASSERT_TRUE(a.ok()) << a.error().to_string();
  EXPECT_EQ(a->host, "api.example.com");
  EXPECT_EQ(a->port, 8443);
  a = parse_authority("api.example.com", 443);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "api.example.com");
  EXPECT_EQ(a->port, 443);
  a = parse_authority("[FD00::1]:80", std::nullopt);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "fd00::1");
  EXPECT_EQ(a->port, 80);
  a = parse_authority("[::1]", 80);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "::1");
  // An IP literal in any notation comes out canonical.
  a = parse_authority("0x7f.1:443", std::nullopt);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "127.0.0.1");
  a = parse_authority("[::ffff:a9fe:a9fe]:80", std::nullopt);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "169.254.169.254");
  a = parse_authority("under_score.example.com:0080", std::nullopt);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "under_score.example.com");
  EXPECT_EQ(a->port, 80);
  a = parse_authority("xn--bcher-kva.example:443", std::nullopt);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "xn--bcher-kva.example");
  a = parse_authority("localhost:65535", std::nullopt);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->port, 65535);
}

TEST(EgressAuthority, RefusesTricksWithAMessageNamingThem) {
  struct Case {
    std::string text;
    std::string error;
  };
  const std::string rt = "request target ";
  const Case cases[] = {
      {"", rt + "\"\": empty"},
      {"api.example.com@evil.com", rt + "\"api.example.com@evil.com\": userinfo ('user@host') "
                                        "is not allowed in a host"},
      {"evil.com#@api.example.com", rt + "\"evil.com#@api.example.com\": userinfo "
                                         "('user@host') is not allowed in a host"},
      {"user:pass@api.example.com:443", rt + "\"user:pass@api.example.com:443\": userinfo "
                                             "('user@host') is not allowed in a host"},
      {"@api.example.com", rt + "\"@api.example.com\": userinfo ('user@host') is not allowed "
                                "in a host"},
      {"evil.com#api.example.com", rt + "\"evil.com#api.example.com\": '#' cannot appear in a "
                                        "host name or IP address"},
      {"evil.com\\api.example.com", rt + "\"evil.com\\x5capi.example.com\": a backslash is not "
                                         "allowed in a host"},
      {"evil.com/api.example.com", rt + "\"evil.com/api.example.com\": '/' cannot appear in a "
                                        "host name or IP address"},
      {"api.example.com%2e", rt + "\"api.example.com%2e\": percent-encoding and zone ids ('%') "
                                  "are not allowed in a host"},
      {"[fe80::1%25eth0]:80", rt + "\"[fe80::1%25eth0]:80\": percent-encoding and zone ids "
                                   "('%') are not allowed in a host"},
      {"api.example.com :443", rt + "\"api.example.com :443\": a space is not allowed in a host"},
      {"api.example.com\r\nX: y", rt + "\"api.example.com\\x0d\\x0aX: y\": a control byte is "
                                       "not allowed in a host"},
      {"api.example.com\r\n", rt + "\"api.example.com\\x0d\\x0a\": a control byte is not "
                                   "allowed in a host"},
      {std::string("api.example.com\0.evil", 21), rt + "\"api.example.com\\x00.evil\": a control "
                                                       "byte is not allowed in a host"},
      {"b\xc3\xbc"
       "cher.example",
       rt + "\"b\\xc3\\xbccher.example\": a non-ASCII name; write "
            "an internationalised name in its punycode form "
            "(xn--...)"},
      {"api.example.com:", rt + "\"api.example.com:\": an empty port after ':'"},
      {"api.example.com:0", rt + "\"api.example.com:0\": port 0 is not a port"},
      {"api.example.com:65536", rt + "\"api.example.com:65536\": port 65536 is out of range "
                                     "(1-65535)"},
      {"api.example.com:99999999999999999999", rt + "\"api.example.com:99999999999999999999\": "
                                                    "port 99999999999999999999 is out of range "
                                                    "(1-65535)"},
      {"api.example.com:-1", rt + "\"api.example.com:-1\": port '-1' is not a number"},
      {"api.example.com:https", rt + "\"api.example.com:https\": port 'https' is not a number"},
      {"api.example.com:44 3", rt + "\"api.example.com:44 3\": a space is not allowed in a host"},
      {":443", rt + "\":443\": an empty host"},
      {"::1", rt + "\"::1\": an IPv6 address needs brackets, as in [::1]:443"},
      {"::1:443", rt + "\"::1:443\": an IPv6 address needs brackets, as in [::1]:443"},
      {"fd00::1:443", rt + "\"fd00::1:443\": an IPv6 address needs brackets, as in [::1]:443"},
      {"[::1", rt + "\"[::1\": '[' without a closing ']'"},
      {"[::1]443", rt + "\"[::1]443\": unexpected text after ']'"},
      {"[127.0.0.1]:80", rt + "\"[127.0.0.1]:80\": brackets are only for IPv6 addresses"},
      {"[evil.com]:80", rt + "\"[evil.com]:80\": not an IPv6 address in brackets"},
      {"[]:80", rt + "\"[]:80\": not an IPv6 address in brackets"},
      {"a]b:80", rt + "\"a]b:80\": brackets may only enclose a whole IPv6 address"},
      {"a..b:80", rt + "\"a..b:80\": an empty label (two dots in a row, or a leading dot)"},
      {".a:80", rt + "\".a:80\": an empty label (two dots in a row, or a leading dot)"},
      {"a.b..:80", rt + "\"a.b..:80\": an empty label (two dots in a row, or a leading dot)"},
      {".:80", rt + "\".:80\": an empty name"},
      {"-a.example.com", rt + "\"-a.example.com\": a label that starts or ends with '-'"},
      {"a-.example.com", rt + "\"a-.example.com\": a label that starts or ends with '-'"},
      {"*.example.com", rt + "\"*.example.com\": '*' cannot appear in a host name or IP address"},
      // Digits and dots that no IPv4 notation reads: ambiguous, never a name.
      {"1.2.3.4.5", rt + "\"1.2.3.4.5\": ends in a number like an IPv4 address but is not a "
                         "valid one (ambiguous)"},
      {"256.0.0.1", rt + "\"256.0.0.1\": ends in a number like an IPv4 address but is not a "
                         "valid one (ambiguous)"},
      {"08.0.0.1", rt + "\"08.0.0.1\": ends in a number like an IPv4 address but is not a "
                        "valid one (ambiguous)"},
      {"4294967296", rt + "\"4294967296\": ends in a number like an IPv4 address but is not a "
                          "valid one (ambiguous)"},
      {"0x100000000", rt + "\"0x100000000\": ends in a number like an IPv4 address but is not a "
                           "valid one (ambiguous)"},
      {"evil.com.0x7f", rt + "\"evil.com.0x7f\": ends in a number like an IPv4 address but is "
                             "not a valid one (ambiguous)"},
      {"api.example.123", rt + "\"api.example.123\": ends in a number like an IPv4 address but "
                               "is not a valid one (ambiguous)"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(authority_error(c.text), c.error) << c.text;
  }
  auto a = parse_authority("api.example.com", std::nullopt);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error().to_string(),
            "request target \"api.example.com\": no port (expected "
            "host:port)");
  a = parse_authority("api.example.com", 0);
  EXPECT_FALSE(a.ok());
}

TEST(EgressAuthority, BoundsNameAndLabelLengths) {
  const std::string label63(63, 'a');
  const std::string label64(64, 'a');
  EXPECT_TRUE(parse_authority(label63 + ".com", 443).ok());
  EXPECT_EQ(authority_error(label64 + ".com"),
            "request target \"" + label64 + ".com\": a label longer than 63 bytes");
  // 4 labels of 63 and the dots: 255; cut to exactly 253 and 254.
  std::string name = label63 + "." + label63 + "." + label63 + "." + std::string(61, 'b');
  ASSERT_EQ(name.size(), 253u);
  auto a = parse_authority(name, 443);
  ASSERT_TRUE(a.ok()) << a.error().to_string();
  EXPECT_EQ(a->host, name);
  EXPECT_TRUE(parse_authority(name + ".", 443).ok());  // the trailing dot is not counted
  EXPECT_EQ(authority_error(name + "b"), "request target \"" + (name + "b").substr(0, 100) +
                                             "...\": a name longer than 253 bytes");
  const std::string huge(100'000, 'a');
  EXPECT_EQ(authority_error(huge),
            "request target \"" + huge.substr(0, 100) + "...\": a name longer than 253 bytes");
  EXPECT_EQ(authority_error(std::string(100'000, '.')),
            "request target \"" + std::string(100, '.') + "...\": a name longer than 253 bytes");
}

TEST(EgressRules, RefusesBadRulesNamingThem) {
  struct Case {
    std::string rule;
    std::string error;
  };
  const Case cases[] = {
      {"", "--allow '': an empty rule"},
      {"   ", "--allow '   ': an empty rule"},
      {"*", "--allow '*': '*' alone would allow every host; name a domain, as in *.example.org"},
      {"*:443",
       "--allow '*:443': '*' alone would allow every host; name a domain, as in "
       "*.example.org"},
      {"*.", "--allow '*.': a wildcard needs a domain after '*.'"},
      {"*.com",
       "--allow '*.com': a wildcard over a single label (*.com) would allow a whole "
       "top-level domain; name a domain with two labels at least, as in *.example.com"},
      {"*.com.",
       "--allow '*.com.': a wildcard over a single label (*.com) would allow a whole "
       "top-level domain; name a domain with two labels at least, as in "
       "*.example.com"},
      {"a*.example.org",
       "--allow 'a*.example.org': '*' may only be the whole first label, as "
       "in *.example.org"},
      {"*.*.example.org",
       "--allow '*.*.example.org': '*' may only be the whole first label, as "
       "in *.example.org"},
      {"api.*.example.org",
       "--allow 'api.*.example.org': '*' may only be the whole first "
       "label, as in *.example.org"},
      {"*example.org",
       "--allow '*example.org': '*' may only be the whole first label, as in "
       "*.example.org"},
      {"**.example.org",
       "--allow '**.example.org': '*' may only be the whole first label, as "
       "in *.example.org"},
      {"*.10.0.0.5", "--allow '*.10.0.0.5': a wildcard needs a domain, not an IP address"},
      {"https://api.example.com",
       "--allow 'https://api.example.com': a rule is host[:port], "
       "not a URL: leave out the scheme and path"},
      {"api.example.com/v1",
       "--allow 'api.example.com/v1': '/' only follows an IP address, in "
       "a CIDR rule such as 10.1.0.0/16"},
      {"user@api.example.com",
       "--allow 'user@api.example.com': userinfo ('user@host') is not "
       "allowed in a host"},
      {"api.example.com:0", "--allow 'api.example.com:0': port 0 is not a port"},
      {"api.example.com:70000",
       "--allow 'api.example.com:70000': port 70000 is out of range "
       "(1-65535)"},
      {"api.example.com:", "--allow 'api.example.com:': an empty port after ':'"},
      {"api.example.com:http", "--allow 'api.example.com:http': port 'http' is not a number"},
      {"api.example.com:**", "--allow 'api.example.com:**': port '**' is not a number"},
      {"api..example.com",
       "--allow 'api..example.com': an empty label (two dots in a row, or a "
       "leading dot)"},
      {"b\xc3\xbc"
       "cher.de",
       "--allow 'b\\xc3\\xbccher.de': a non-ASCII name; write an "
       "internationalised name in its punycode form (xn--...)"},
      {"1.2.3.4.5",
       "--allow '1.2.3.4.5': ends in a number like an IPv4 address but is not a "
       "valid one (ambiguous)"},
      {"127.1", "--allow '127.1': write the IPv4 address as a dotted quad: 127.0.0.1"},
      {"0x7f.0.0.1",
       "--allow '0x7f.0.0.1': write the IPv4 address as a dotted quad: "
       "127.0.0.1"},
      {"010.0.0.5", "--allow '010.0.0.5': write the IPv4 address as a dotted quad: 8.0.0.5"},
      {"10.0.0.5.", "--allow '10.0.0.5.': write the IPv4 address as a dotted quad: 10.0.0.5"},
      {"fd00::1", "--allow 'fd00::1': write an IPv6 address in brackets: [fd00::1]"},
      {"fd00::1:443",
       "--allow 'fd00::1:443': write an IPv6 address in brackets: "
       "[fd00::1:443]"},
      {"[fe80::1%eth0]",
       "--allow '[fe80::1%eth0]': percent-encoding and zone ids ('%') are "
       "not allowed in a host"},
      {"[10.0.0.5]", "--allow '[10.0.0.5]': brackets are only for IPv6 addresses"},
      {"0.0.0.0",
       "--allow '0.0.0.0': 0.0.0.0 is never allowed: connecting to it reaches this "
       "host (to allow loopback, name 127.0.0.1 or [::1])"},
      {"[::]:80",
       "--allow '[::]:80': :: is never allowed: connecting to it reaches this host "
       "(to allow loopback, name 127.0.0.1 or [::1])"},
      {"10.1.2.3/16",
       "--allow '10.1.2.3/16': bits are set after the prefix; the network is "
       "10.1.0.0/16"},
      {"10.1.0.0/33", "--allow '10.1.0.0/33': the prefix length after '/' must be 0 to 32"},
      {"10.1.0.0/", "--allow '10.1.0.0/': the prefix length after '/' must be 0 to 32"},
      {"10.1.0.0/-1", "--allow '10.1.0.0/-1': the prefix length after '/' must be 0 to 32"},
      {"10.1.0.0/1x", "--allow '10.1.0.0/1x': the prefix length after '/' must be 0 to 32"},
      {"10.1.0.0/16:80",
       "--allow '10.1.0.0/16:80': a CIDR rule takes no port (the name rule "
       "sets the port)"},
      {"10.1/16", "--allow '10.1/16': write the network as a dotted quad (10.0.0.1/...)"},
      {"fd00::/129", "--allow 'fd00::/129': the prefix length after '/' must be 0 to 128"},
      {"fd00::1/8",
       "--allow 'fd00::1/8': bits are set after the prefix; the network is "
       "fd00::/8"},
      {"api.example.com/16",
       "--allow 'api.example.com/16': '/' only follows an IP address, in "
       "a CIDR rule such as 10.1.0.0/16"},
      {"api example.com", "--allow 'api example.com': a space is not allowed in a host"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(rule_error(c.rule), c.error) << c.rule;
  }
  // The first bad rule stops the parse.
  auto p = EgressPolicy::parse({"api.example.com", "*.com", "10.0.0.5"});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().where, "--allow '*.com'");
}

TEST(EgressRules, KeepsTheRulesAsWritten) {
  const std::vector<std::string> rules = {"API.example.com.",  " *.pkg.example.org:443 ",
                                          "10.0.0.5",          "[fd00::1]:80",
                                          "10.1.0.0/16",       "fd00::/8",
                                          "[fd00::]/16",       "x.example.com:*",
                                          "[::ffff:10.9.9.9]", "::ffff:10.8.0.0/112"};
  auto p = EgressPolicy::parse(rules);
  ASSERT_TRUE(p.ok()) << p.error().to_string();
  EXPECT_EQ(p->rules(), rules);
  EXPECT_TRUE(EgressPolicy::parse({}).ok());
}

TEST(EgressCheckName, AllowsAndRefusesExactly) {
  const EgressPolicy p = policy({"api.example.com", "*.pkg.example.org", "git.example.net:8443",
                                 "*.cdn.example.net:443", "dev.example.com:*", "10.0.0.5",
                                 "[fd00::1]:80", "10.1.0.0/16", "under_score.example.com"});
  struct Case {
    std::string target;
    bool allowed;
    std::string reason;
  };
  auto no = [](std::string shown, std::string hint = "") {
    return "no --allow rule matches " + shown + hint + " (to allow it, add --allow " + shown + ")";
  };
  auto no_ip = [](std::string shown, std::string hint = "") {
    return "no --allow rule names the IP address " + shown + hint + " (to allow it, add --allow " +
           shown + ")";
  };
  const Case cases[] = {
      // Exact names: case and one trailing dot are normalised.
      {"api.example.com:443", true, "api.example.com"},
      {"api.example.com:80", true, "api.example.com"},
      {"api.example.com", true, "api.example.com"},
      {"API.EXAMPLE.COM:443", true, "api.example.com"},
      {"Api.Example.Com.:443", true, "api.example.com"},
      {"under_score.example.com", true, "under_score.example.com"},
      {"api.example.com:8443", false,
       no("api.example.com:8443", ": api.example.com allows ports 80 and 443 only")},
      {"api.example.com:22", false,
       no("api.example.com:22", ": api.example.com allows ports 80 and 443 only")},
      // Suffix, prefix and label tricks.
      {"api.example.com.evil.tld", false, no("api.example.com.evil.tld:443")},
      {"evilapi.example.com", false, no("evilapi.example.com:443")},
      {"x.api.example.com", false, no("x.api.example.com:443")},
      {"api.example.co", false, no("api.example.co:443")},
      {"example.com", false, no("example.com:443")},
      {"api-example.com", false, no("api-example.com:443")},
      {"127.0.0.1.nip.io", false, no("127.0.0.1.nip.io:443")},
      // Wildcards: strictly below the domain, any depth.
      {"a.pkg.example.org", true, "*.pkg.example.org"},
      {"a.b.c.pkg.example.org:80", true, "*.pkg.example.org"},
      {"A.PKG.example.ORG.", true, "*.pkg.example.org"},
      {"pkg.example.org", false,
       no("pkg.example.org:443",
          ": *.pkg.example.org covers the names below pkg.example.org, not pkg.example.org "
          "itself")},
      {"badpkg.example.org", false, no("badpkg.example.org:443")},
      {"pkg.example.org.evil.tld", false, no("pkg.example.org.evil.tld:443")},
      {"a.pkg.example.org.evil.tld", false, no("a.pkg.example.org.evil.tld:443")},
      {"a.pkg.example.org:8080", false,
       no("a.pkg.example.org:8080", ": *.pkg.example.org allows ports 80 and 443 only")},
      {"a.cdn.example.net:443", true, "*.cdn.example.net:443"},
      {"a.cdn.example.net:80", false,
       no("a.cdn.example.net:80", ": *.cdn.example.net:443 allows port 443 only")},
      // Ports.
      {"git.example.net:8443", true, "git.example.net:8443"},
      {"git.example.net:443", false,
       no("git.example.net:443", ": git.example.net:8443 allows port 8443 only")},
      {"dev.example.com:1", true, "dev.example.com:*"},
      {"dev.example.com:65535", true, "dev.example.com:*"},
      {"x.dev.example.com:443", false, no("x.dev.example.com:443")},
      // IP literals only by an IP rule for that address and port.
      {"10.0.0.5:443", true, "10.0.0.5"},
      {"10.0.0.5:80", true, "10.0.0.5"},
      {"012.0.0.5:443", true, "10.0.0.5"},
      {"167772165:443", true, "10.0.0.5"},
      {"[::ffff:10.0.0.5]:443", true, "10.0.0.5"},
      {"10.0.0.5:8080", false, no_ip("10.0.0.5:8080", ": 10.0.0.5 allows ports 80 and 443 only")},
      {"10.0.0.4:443", false, no_ip("10.0.0.4:443")},
      {"10.1.2.3:443", false,
       no_ip("10.1.2.3:443",
             ": 10.1.0.0/16 covers only addresses that an allowed name resolves to")},
      {"[fd00::1]:80", true, "[fd00::1]:80"},
      {"[fd00::1]:443", false, no_ip("[fd00::1]:443", ": [fd00::1]:80 allows port 80 only")},
      {"[fd00::2]:80", false, no_ip("[fd00::2]:80")},
      {"93.184.216.34:443", false, no_ip("93.184.216.34:443")},
      {"[2606:4700::1111]:443", false, no_ip("[2606:4700::1111]:443")},
      // Userinfo and other tricks never reach a rule.
      {"api.example.com@evil.com", false,
       "request target \"api.example.com@evil.com\": userinfo ('user@host') is not allowed in a "
       "host"},
      {"evil.com#@api.example.com", false,
       "request target \"evil.com#@api.example.com\": userinfo ('user@host') is not allowed in "
       "a host"},
      {"", false, "request target \"\": empty"},
  };
  for (const Case& c : cases) {
    const Verdict v = request(p, c.target);
    EXPECT_EQ(v.allowed, c.allowed) << c.target;
    EXPECT_EQ(v.reason, c.reason) << c.target;
  }
}

TEST(EgressCheckName, TenDotZeroDotZeroDotFiveRuleAllowsExactlyThatAddress) {
  const EgressPolicy p = policy({"10.0.0.5"});
  for (const char* t : {"10.0.0.5", "10.0.0.5:80", "10.5", "0xa000005", "012.0.0.5",
                        "[::ffff:10.0.0.5]", "[::ffff:a00:5]"}) {
    EXPECT_TRUE(request(p, t).allowed) << t;
  }
  for (const char* t : {"10.0.0.4", "10.0.0.6", "10.0.0.50", "10.0.0.5:22", "110.0.0.5",
                        "[::10.0.0.5]", "[64:ff9b::a00:5]", "[2002:a00:5::]", "10.0.0.5.nip.io"}) {
    EXPECT_FALSE(request(p, t).allowed) << t;
  }
  EXPECT_TRUE(p.check_address("", ip("10.0.0.5"), 8080).allowed);
  EXPECT_FALSE(p.check_address("", ip("10.0.0.6"), 443).allowed);
  EXPECT_FALSE(p.check_address("", ip("10.0.0.4")).allowed);
  EXPECT_TRUE(p.check_address("", ip("::ffff:10.0.0.5")).allowed);
  EXPECT_FALSE(p.check_address("", ip("64:ff9b::a00:5")).allowed);
}

TEST(EgressCheckName, EveryNotationOfLoopbackAndMetadataIsAnAddressNotAName) {
  // Even a policy that allows these spellings as names cannot: they are literals,
  // so rules for them are refused or read as addresses.
  const EgressPolicy p = policy({"*.example.com", "localhost", "metadata.google.internal"});
  for (const auto& text : kLoopbackSpellings) {
    const std::string target = text.find(':') != std::string::npos && text.front() != '['
                                   ? "[" + text + "]:443"
                                   : text + ":443";
    const Verdict v = request(p, target);
    EXPECT_FALSE(v.allowed) << target;
    EXPECT_EQ(v.reason,
              "no --allow rule names the IP address 127.0.0.1:443 (to allow it, add "
              "--allow 127.0.0.1:443)")
        << target;
    EXPECT_FALSE(p.check_address("x.example.com", ip(text), 443).allowed) << text;
  }
  for (const auto& text : kMetadataSpellings) {
    const std::string target = text.find(':') != std::string::npos && text.front() != '['
                                   ? "[" + text + "]:80"
                                   : text + ":80";
    const Verdict v = request(p, target);
    EXPECT_FALSE(v.allowed) << target;
    EXPECT_EQ(v.reason,
              "no --allow rule names the IP address 169.254.169.254:80 (to allow it, "
              "add --allow 169.254.169.254:80)")
        << target;
    const Verdict a = p.check_address("metadata.google.internal", ip(text), 80);
    EXPECT_FALSE(a.allowed) << text;
    EXPECT_EQ(a.reason,
              "metadata.google.internal resolved to 169.254.169.254, a link-local address "
              "(169.254.0.0/16, where cloud metadata services listen), which no --allow rule "
              "covers (to allow it, add --allow 169.254.169.254 or a CIDR rule over it)")
        << text;
  }
  // A name only resolves: localhost passes step 1 and is stopped at step 2.
  EXPECT_TRUE(request(p, "localhost:443").allowed);
  EXPECT_FALSE(p.check_address("localhost", ip("127.0.0.1"), 443).allowed);
  EXPECT_FALSE(p.check_address("localhost", ip("::1"), 443).allowed);
}

TEST(EgressCheckName, RefusesHostsTheProxyDidNotNormalise) {
  const EgressPolicy p = policy({"api.example.com"});
  // Authorities built by hand still go through the same host rules.
  Verdict v = p.check_name({"API.example.com.", 443});
  EXPECT_TRUE(v.allowed);
  v = p.check_name({"api.example.com@evil.com", 443});
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.reason,
            "refused host \"api.example.com@evil.com\": userinfo ('user@host') is not "
            "allowed in a host");
  v = p.check_name({"", 443});
  EXPECT_EQ(v.reason, "refused host \"\": an empty host");
  v = p.check_name({"api.example.com\n", 443});
  EXPECT_EQ(v.reason,
            "refused host \"api.example.com\\x0a\": a control byte is not allowed in "
            "a host");
  v = p.check_name({"api.example.com", 0});
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.reason, "refused api.example.com: port 0");
  v = p.check_name({"[::1]", 443});
  EXPECT_EQ(v.reason,
            "no --allow rule names the IP address [::1]:443 (to allow it, add --allow "
            "[::1]:443)");
  v = p.check_name({"0x7f.1", 443});
  EXPECT_EQ(v.reason,
            "no --allow rule names the IP address 127.0.0.1:443 (to allow it, add "
            "--allow 127.0.0.1:443)");
  v = EgressPolicy{}.check_name({"api.example.com", 443});
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.reason,
            "no --allow rule matches api.example.com:443 (to allow it, add --allow "
            "api.example.com:443)");
}

TEST(EgressCheckAddress, PublicPassesOtherClassesNeedARule) {
  const EgressPolicy p = policy({"api.example.com"});
  Verdict v = p.check_address("api.example.com", ip("93.184.216.34"), 443);
  EXPECT_TRUE(v.allowed);
  EXPECT_EQ(v.reason, "93.184.216.34 is a public address");
  EXPECT_TRUE(p.check_address("api.example.com", ip("2606:4700::1111"), 443).allowed);
  EXPECT_TRUE(p.check_address("api.example.com", ip("64:ff9b::5db8:d822"), 443).allowed);

  struct Case {
    const char* addr;
    const char* kind;
  };
  const Case refused[] = {
      {"127.0.0.1", "a loopback address (127.0.0.0/8)"},
      {"::1", "a loopback address (::1)"},
      {"169.254.169.254",
       "a link-local address (169.254.0.0/16, where cloud metadata services listen)"},
      {"fe80::1", "a link-local address (fe80::/10)"},
      {"10.0.0.5", "a private address (10.0.0.0/8)"},
      {"172.16.0.1", "a private address (172.16.0.0/12)"},
      {"192.168.1.1", "a private address (192.168.0.0/16)"},
      {"100.64.0.1", "a private address (100.64.0.0/10, carrier-grade NAT)"},
      {"fd00::1", "a unique-local address (fc00::/7)"},
      {"224.0.0.1", "a multicast address (224.0.0.0/4)"},
      {"ff02::1", "a multicast address (ff00::/8)"},
      {"240.0.0.1", "a reserved address (240.0.0.0/4, reserved)"},
      {"255.255.255.255", "a reserved address (255.255.255.255, broadcast)"},
      {"192.0.2.1", "a reserved address (192.0.2.0/24, documentation)"},
      {"198.51.100.1", "a reserved address (198.51.100.0/24, documentation)"},
      {"203.0.113.1", "a reserved address (203.0.113.0/24, documentation)"},
      {"198.18.0.1", "a reserved address (198.18.0.0/15, benchmarking)"},
      {"2001:db8::1", "a reserved address (2001:db8::/32, documentation)"},
      {"::127.0.0.1", "a reserved address (::/8, IPv4-compatible and other retired forms)"},
      {"64:ff9b::7f00:1", "a loopback address (NAT64 of 127.0.0.0/8)"},
      {"2002:a9fe:a9fe::1",
       "a link-local address (6to4 of 169.254.0.0/16, where cloud metadata services listen)"},
      {"4000::1", "a reserved address (outside 2000::/3, the global unicast space)"},
  };
  for (const Case& c : refused) {
    const IpAddress a = ip(c.addr);
    v = p.check_address("api.example.com", a, 443);
    EXPECT_FALSE(v.allowed) << c.addr;
    const std::string shown = a.v6 ? "[" + a.to_string() + "]" : a.to_string();
    EXPECT_EQ(v.reason, "api.example.com resolved to " + a.to_string() + ", " + c.kind +
                            ", which no --allow rule covers (to allow it, add --allow " + shown +
                            " or a CIDR rule over it)")
        << c.addr;
  }
  // Unspecified never passes, whatever the rules say.
  const EgressPolicy all = policy({"0.0.0.0/0", "::/0"});
  v = all.check_address("api.example.com", ip("0.0.0.0"), 443);
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.reason,
            "api.example.com resolved to 0.0.0.0, an unspecified address (0.0.0.0/8, "
            "this host), which is never allowed: connecting to it reaches this host");
  EXPECT_FALSE(all.check_address("x", ip("::"), 443).allowed);
  EXPECT_TRUE(all.check_address("x", ip("127.0.0.1"), 443).allowed);
  EXPECT_TRUE(all.check_address("x", ip("fd00::1"), 443).allowed);
  // No name, or the address itself as the name: the message starts with it.
  v = p.check_address("", ip("10.0.0.5"), 443);
  EXPECT_EQ(v.reason,
            "10.0.0.5, a private address (10.0.0.0/8), which no --allow rule covers "
            "(to allow it, add --allow 10.0.0.5 or a CIDR rule over it)");
  v = p.check_address("evil\r\nname", ip("10.0.0.5"), 443);
  EXPECT_EQ(v.reason.substr(0, 37), "evil\\x0d\\x0aname resolved to 10.0.0.5");
}

TEST(EgressCheckAddress, CidrAndAddressRulesCoverTheirRangeAndPort) {
  const EgressPolicy p =
      policy({"internal.example.com:*", "10.1.0.0/16", "fd00:1::/32", "10.0.0.5:8080", "[fd00::5]",
              "::ffff:192.168.4.0/120", "127.0.0.1:9000"});
  EXPECT_EQ(p.check_address("internal.example.com", ip("10.1.0.0"), 5432).reason, "10.1.0.0/16");
  EXPECT_TRUE(p.check_address("internal.example.com", ip("10.1.255.255"), 5432).allowed);
  EXPECT_TRUE(p.check_address("internal.example.com", ip("10.1.2.3")).allowed);
  EXPECT_TRUE(p.check_address("internal.example.com", ip("::ffff:10.1.2.3")).allowed);
  EXPECT_FALSE(p.check_address("internal.example.com", ip("10.2.0.1"), 5432).allowed);
  EXPECT_FALSE(p.check_address("internal.example.com", ip("10.0.255.255"), 5432).allowed);
  EXPECT_EQ(p.check_address("internal.example.com", ip("fd00:1:ffff::1"), 80).reason,
            "fd00:1::/32");
  EXPECT_FALSE(p.check_address("internal.example.com", ip("fd00:2::1"), 80).allowed);
  // ::ffff:192.168.4.0/120 is read as 192.168.4.0/24.
  EXPECT_TRUE(p.check_address("internal.example.com", ip("192.168.4.77"), 80).allowed);
  EXPECT_FALSE(p.check_address("internal.example.com", ip("192.168.5.1"), 80).allowed);
  // A port-less single address covers every port after resolving a name.
  EXPECT_EQ(p.check_address("internal.example.com", ip("fd00::5"), 5432).reason, "[fd00::5]");
  // A single address with a port covers that port only, and only when told the port.
  EXPECT_EQ(p.check_address("internal.example.com", ip("10.0.0.5"), 8080).reason, "10.0.0.5:8080");
  Verdict v = p.check_address("internal.example.com", ip("10.0.0.5"), 5432);
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.reason,
            "internal.example.com resolved to 10.0.0.5, a private address "
            "(10.0.0.0/8), which no --allow rule covers: 10.0.0.5:8080 covers it on "
            "port 8080 only (to allow it, add --allow 10.0.0.5:5432 or a CIDR rule "
            "over it)");
  v = p.check_address("internal.example.com", ip("10.0.0.5"));
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.reason,
            "internal.example.com resolved to 10.0.0.5, a private address "
            "(10.0.0.0/8), which no --allow rule covers: 10.0.0.5:8080 covers it on "
            "port 8080 only, and the port was not given (to allow it, add --allow "
            "10.0.0.5 or a CIDR rule over it)");
  EXPECT_TRUE(p.check_address("", ip("127.0.0.1"), 9000).allowed);
  EXPECT_FALSE(p.check_address("", ip("127.0.0.2"), 9000).allowed);
  EXPECT_FALSE(p.check_address("", ip("127.0.0.1"), 9001).allowed);
  // IPv4 rules never cover IPv6 addresses that embed the same IPv4 address.
  EXPECT_FALSE(p.check_address("", ip("::10.1.2.3"), 80).allowed);
  EXPECT_FALSE(p.check_address("", ip("64:ff9b::a01:203"), 80).allowed);
  // Literal requests: a CIDR rule does not make its addresses requestable.
  EXPECT_FALSE(request(p, "10.1.2.3:443").allowed);
  EXPECT_TRUE(request(p, "127.0.0.1:9000").allowed);
  EXPECT_TRUE(request(p, "[fd00::5]:443").allowed);
  EXPECT_FALSE(request(p, "[fd00::5]:8443").allowed);
}

TEST(EgressCheckAddress, ZeroPrefixCoversItsFamilyOnly) {
  const EgressPolicy p = policy({"0.0.0.0/0"});
  EXPECT_TRUE(p.check_address("", ip("10.0.0.1"), 80).allowed);
  EXPECT_TRUE(p.check_address("", ip("169.254.169.254"), 80).allowed);
  EXPECT_FALSE(p.check_address("", ip("fd00::1"), 80).allowed);
  EXPECT_FALSE(p.check_address("", ip("0.0.0.0"), 80).allowed);
}

}  // namespace
}  // namespace rf::net
