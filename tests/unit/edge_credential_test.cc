// Credentials swapped in at the egress edge (issue 13): the options of the
// gateway and proxy deliveries, their JSON round trip, placeholders, and what
// a sandbox's environment gets. Base64, which Basic authorization and the
// helper's messages use, is tested here too.
#include "net/edge_credential.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/base64.h"

namespace rf::net {
namespace {

EdgeSettings options(EdgeDelivery d, std::string_view text) {
  auto s = parse_edge_options(d, text);
  EXPECT_TRUE(s.ok()) << text << ": " << (s.ok() ? "" : s.error().to_string());
  return s.ok() ? *s : EdgeSettings{};
}

EdgeSettings gateway(std::string_view text) { return options(EdgeDelivery::kGateway, text); }
EdgeSettings proxy(std::string_view text) { return options(EdgeDelivery::kProxy, text); }

std::string error_of(EdgeDelivery d, std::string_view text) {
  auto s = parse_edge_options(d, text);
  return s.ok() ? "(parsed)" : s.error().to_string();
}

std::string gateway_error(std::string_view text) { return error_of(EdgeDelivery::kGateway, text); }
std::string proxy_error(std::string_view text) { return error_of(EdgeDelivery::kProxy, text); }

std::vector<std::string> places(const EdgeSettings& s) {
  std::vector<std::string> out;
  for (const auto& p : s.places) out.push_back(p.to_string());
  return out;
}

// Every field the deliveries use (a gateway's `user` only with Basic).
void expect_same(const EdgeSettings& a, const EdgeSettings& b) {
  EXPECT_EQ(a.delivery, b.delivery);
  EXPECT_EQ(a.upstream.host, b.upstream.host);
  EXPECT_EQ(a.upstream.port, b.upstream.port);
  EXPECT_EQ(a.upstream_path, b.upstream_path);
  EXPECT_EQ(a.header, b.header);
  EXPECT_EQ(a.scheme, b.scheme);
  if (a.scheme == EdgeScheme::kBasic) {
    EXPECT_EQ(a.user, b.user);
  }
  EXPECT_EQ(a.base_env, b.base_env);
  EXPECT_EQ(a.git, b.git);
  EXPECT_EQ(a.hosts, b.hosts);
  EXPECT_EQ(places(a), places(b));
}

bool letters_and_digits(std::string_view s) {
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) {
      return false;
    }
  }
  return true;
}

EdgeCredential credential(std::string key, EdgeSettings settings, std::string value) {
  EdgeCredential c;
  c.key = std::move(key);
  c.secret = "vault:" + c.key;
  c.settings = std::move(settings);
  c.value = std::move(value);
  c.placeholder = make_placeholder(c.value.size()).value();
  return c;
}

// ---- options ----------------------------------------------------------------

TEST(EdgeOptions, GatewayTakesEveryOption) {
  const auto s = gateway(
      "upstream=https://llm.internal.example:8443/api/v2/,header=X-Token,scheme=basic,"
      "user=robot,base_env=LLM_BASE_URL,git=true");
  EXPECT_EQ(s.delivery, EdgeDelivery::kGateway);
  EXPECT_EQ(s.upstream.host, "llm.internal.example");
  EXPECT_EQ(s.upstream.port, 8443);
  EXPECT_EQ(s.upstream_path, "/api/v2");
  EXPECT_EQ(s.header, "x-token");
  EXPECT_EQ(s.scheme, EdgeScheme::kBasic);
  EXPECT_EQ(s.user, "robot");
  EXPECT_EQ(s.base_env, "LLM_BASE_URL");
  EXPECT_TRUE(s.git);
  EXPECT_EQ(s.upstream_url(), "https://llm.internal.example:8443/api/v2");
}

TEST(EdgeOptions, GatewayDefaultsToBearerAuthorizationOnPort443) {
  const auto s = gateway("upstream=https://api.example.com");
  EXPECT_EQ(s.upstream.host, "api.example.com");
  EXPECT_EQ(s.upstream.port, 443);
  EXPECT_EQ(s.upstream_path, "");
  EXPECT_EQ(s.header, "authorization");
  EXPECT_EQ(s.scheme, EdgeScheme::kBearer);
  EXPECT_EQ(s.user, "x-access-token");
  EXPECT_EQ(s.base_env, "");
  EXPECT_FALSE(s.git);
  EXPECT_EQ(s.upstream_url(), "https://api.example.com");
}

TEST(EdgeOptions, OptionNamesAndSchemesIgnoreCase) {
  const auto s = gateway("Upstream=HTTPS://api.example.com,HEADER=X-Api-Key,Scheme=RAW");
  EXPECT_EQ(s.upstream.host, "api.example.com");
  EXPECT_EQ(s.header, "x-api-key");
  EXPECT_EQ(s.scheme, EdgeScheme::kRaw);
}

TEST(EdgeOptions, AnIpv6UpstreamKeepsItsBrackets) {
  const auto s = gateway("upstream=https://[2001:db8::1]:8443/v1");
  EXPECT_EQ(s.upstream.host, "2001:db8::1");
  EXPECT_EQ(s.upstream.port, 8443);
  EXPECT_EQ(s.upstream_url(), "https://[2001:db8::1]:8443/v1");
}

TEST(EdgeOptions, PresetAnthropicSendsTheKeyRawInXApiKey) {
  const auto s = gateway("preset=anthropic");
  EXPECT_EQ(s.upstream_url(), "https://api.anthropic.com");
  EXPECT_EQ(s.header, "x-api-key");
  EXPECT_EQ(s.scheme, EdgeScheme::kRaw);
  EXPECT_EQ(s.base_env, "ANTHROPIC_BASE_URL");
  EXPECT_FALSE(s.git);
}

TEST(EdgeOptions, PresetOpenaiSendsABearerUnderV1) {
  const auto s = gateway("preset=openai");
  EXPECT_EQ(s.upstream_url(), "https://api.openai.com/v1");
  EXPECT_EQ(s.upstream_path, "/v1");
  EXPECT_EQ(s.header, "authorization");
  EXPECT_EQ(s.scheme, EdgeScheme::kBearer);
  EXPECT_EQ(s.base_env, "OPENAI_BASE_URL");
}

TEST(EdgeOptions, PresetGithubSendsBasicAuthAndPointsGitAtTheGateway) {
  const auto s = gateway("preset=github");
  EXPECT_EQ(s.upstream_url(), "https://github.com");
  EXPECT_EQ(s.header, "authorization");
  EXPECT_EQ(s.scheme, EdgeScheme::kBasic);
  EXPECT_EQ(s.user, "x-access-token");
  EXPECT_EQ(s.base_env, "");
  EXPECT_TRUE(s.git);
}

TEST(EdgeOptions, OptionsOverrideAPresetWhereverItStands) {
  for (const char* text : {"preset=openai,upstream=https://llm-proxy.example.com/openai/v1",
                           "upstream=https://llm-proxy.example.com/openai/v1,preset=openai"}) {
    const auto s = gateway(text);
    EXPECT_EQ(s.upstream_url(), "https://llm-proxy.example.com/openai/v1") << text;
    EXPECT_EQ(s.header, "authorization") << text;
    EXPECT_EQ(s.scheme, EdgeScheme::kBearer) << text;
    EXPECT_EQ(s.base_env, "OPENAI_BASE_URL") << text;
  }
  const auto a = gateway("preset=anthropic,base_env=CLAUDE_URL,scheme=bearer");
  EXPECT_EQ(a.base_env, "CLAUDE_URL");
  EXPECT_EQ(a.header, "x-api-key");
  EXPECT_EQ(a.scheme, EdgeScheme::kBearer);
  const auto g = gateway("preset=github,user=bot,git=false");
  EXPECT_EQ(g.user, "bot");
  EXPECT_EQ(g.scheme, EdgeScheme::kBasic);
  EXPECT_FALSE(g.git);
}

TEST(EdgeOptions, AHeaderNamedWithoutASchemeTakesTheValueAsIsUnlessAuthorization) {
  EXPECT_EQ(gateway("upstream=https://a.example.com,header=X-Key").scheme, EdgeScheme::kRaw);
  EXPECT_EQ(gateway("upstream=https://a.example.com,header=Authorization").scheme,
            EdgeScheme::kBearer);
  // A preset's scheme gives way to the header's default too.
  EXPECT_EQ(gateway("preset=github,header=X-Token").scheme, EdgeScheme::kRaw);
  EXPECT_EQ(gateway("preset=anthropic,header=authorization").scheme, EdgeScheme::kBearer);
  // Named both: the scheme as given.
  EXPECT_EQ(gateway("upstream=https://a.example.com,header=X-Key,scheme=bearer").scheme,
            EdgeScheme::kBearer);
}

TEST(EdgeOptions, ProxyTakesHostsAndPlaces) {
  const auto s = proxy(
      "host=api.example.com,host=*.pkg.example.org:443,in=header:X-Api-Key,in=basic,in=query,"
      "in=BODY");
  EXPECT_EQ(s.delivery, EdgeDelivery::kProxy);
  EXPECT_EQ(s.hosts, (std::vector<std::string>{"api.example.com", "*.pkg.example.org:443"}));
  EXPECT_EQ(places(s), (std::vector<std::string>{"header:x-api-key", "basic", "query", "body"}));
}

TEST(EdgeOptions, ProxyPlacesDefaultToAuthorizationAndBasic) {
  const auto s = proxy("host=api.example.com");
  EXPECT_EQ(places(s), (std::vector<std::string>{"header:authorization", "basic"}));
  ASSERT_EQ(s.places.size(), 2u);
  EXPECT_EQ(s.places[0].kind, EdgePlace::Kind::kHeader);
  EXPECT_EQ(s.places[0].header, "authorization");
  EXPECT_EQ(s.places[1].kind, EdgePlace::Kind::kBasic);
}

TEST(EdgeOptions, EachGatewayErrorNamesItsOption) {
  EXPECT_EQ(gateway_error("upstream=http://api.example.com"),
            "upstream: \"http://api.example.com\" is not an https:// URL (the gateway opens "
            "verified TLS to its upstream)");
  EXPECT_EQ(gateway_error("upstream=https://api.example.com/v1?beta=true"),
            "upstream: a base URL has no query or fragment");
  EXPECT_EQ(gateway_error("upstream=https://api.example.com/v1#top"),
            "upstream: a base URL has no query or fragment");
  EXPECT_EQ(gateway_error("upstream=https://user@api.example.com"),
            "upstream: request target \"user@api.example.com\": userinfo ('user@host') is not "
            "allowed in a host");
  EXPECT_EQ(gateway_error("upstream=https://a.example.com,header=X Key"),
            "header: \"X Key\" is not a header name");
  EXPECT_EQ(gateway_error("upstream=https://a.example.com,header=X:Key"),
            "header: \"X:Key\" is not a header name");
  EXPECT_EQ(gateway_error("upstream=https://a.example.com,scheme=digest"),
            "scheme: \"digest\" is not raw, bearer or basic");
  EXPECT_EQ(gateway_error("upstream=https://a.example.com,user=a:b"),
            "user: a basic-auth user has no ':'");
  EXPECT_EQ(gateway_error("upstream=https://a.example.com,base_env=1URL"),
            "base_env: \"1URL\" is not an environment name");
  EXPECT_EQ(gateway_error("upstream=https://a.example.com,git=yes"), "git: true or false");
  EXPECT_EQ(gateway_error("preset=azure"), "preset: \"azure\" is not anthropic, openai or github");
  EXPECT_EQ(gateway_error("upstream=https://a.example.com,host=a.example.com"),
            "host: not a gateway option (preset, upstream, header, scheme, user, base_env, git)");
  EXPECT_EQ(gateway_error("upstream=https://a.example.com,in=body"),
            "in: not a gateway option (preset, upstream, header, scheme, user, base_env, git)");
  EXPECT_EQ(gateway_error("upstream=https://a.example.com,header="), "header: the value is empty");
  EXPECT_EQ(gateway_error("upstream=https://a.example.com,verbose"),
            "verbose: expected OPTION=VALUE");
  EXPECT_EQ(gateway_error(""), "upstream: a gateway needs upstream=https://... or a preset");
  EXPECT_EQ(gateway_error("header=x-api-key"),
            "upstream: a gateway needs upstream=https://... or a preset");
}

TEST(EdgeOptions, EachProxyErrorNamesItsOption) {
  EXPECT_EQ(proxy_error(""), "host: a proxy delivery needs host=RULE (the bound hosts)");
  EXPECT_EQ(proxy_error("in=basic"), "host: a proxy delivery needs host=RULE (the bound hosts)");
  EXPECT_EQ(proxy_error("host=api example.com"),
            "host: --allow 'api example.com': a space is not allowed in a host");
  EXPECT_EQ(proxy_error("host=api.example.com,in=cookie"),
            "in: \"cookie\" is not header:NAME, basic, query or body");
  EXPECT_EQ(proxy_error("host=api.example.com,in=header:"),
            "in: \"header:\" is not header:NAME, basic, query or body");
  EXPECT_EQ(proxy_error("host=api.example.com,in=header:Host"),
            "in: header host frames the request; it takes no placeholder");
  EXPECT_EQ(proxy_error("host=api.example.com,in=header:content-length"),
            "in: header content-length frames the request; it takes no placeholder");
  EXPECT_EQ(proxy_error("host=api.example.com,in=header:Transfer-Encoding"),
            "in: header transfer-encoding frames the request; it takes no placeholder");
  EXPECT_EQ(proxy_error("host=api.example.com,upstream=https://api.example.com"),
            "upstream: not a proxy option (host, in)");
  EXPECT_EQ(proxy_error("host=api.example.com,header=x-api-key"),
            "header: not a proxy option (host, in)");
  EXPECT_EQ(proxy_error("preset=github,host=api.example.com"),
            "preset: only a gateway has presets");
  EXPECT_EQ(proxy_error("host="), "host: the value is empty");
}

TEST(EdgeOptions, SettingsSurviveTheirJsonRoundTrip) {
  const std::vector<std::pair<EdgeDelivery, std::string>> cases = {
      {EdgeDelivery::kGateway, "preset=anthropic"},
      {EdgeDelivery::kGateway, "preset=openai"},
      {EdgeDelivery::kGateway, "preset=github"},
      {EdgeDelivery::kGateway, "preset=github,user=robot,git=false"},
      {EdgeDelivery::kGateway,
       "upstream=https://llm.internal.example:8443/api/v2,header=X-Token,scheme=basic,"
       "user=robot,base_env=LLM_BASE_URL,git=true"},
      {EdgeDelivery::kGateway, "upstream=https://[2001:db8::1]:8443/v1,header=X-Key"},
      {EdgeDelivery::kGateway, "upstream=https://a.example.com,header=authorization,scheme=raw"},
      {EdgeDelivery::kProxy, "host=api.example.com"},
      {EdgeDelivery::kProxy,
       "host=api.example.com,host=*.pkg.example.org:443,host=10.1.0.0/16,in=header:x-api-key,"
       "in=basic,in=query,in=body"},
  };
  for (const auto& [d, text] : cases) {
    const auto s = options(d, text);
    const std::string j = edge_settings_json(s);
    auto back = edge_settings_from_json(d, j);
    ASSERT_TRUE(back.ok()) << text << ": " << j << ": " << back.error().to_string();
    expect_same(s, *back);
    EXPECT_EQ(edge_settings_json(*back), j) << text;
  }
}

TEST(EdgeOptions, SettingsJsonHasTheFieldsTheStoreKeeps) {
  EXPECT_EQ(edge_settings_json(gateway("preset=anthropic")),
            R"({"base_env":"ANTHROPIC_BASE_URL","header":"x-api-key","scheme":"raw",)"
            R"("upstream":"https://api.anthropic.com"})");
  EXPECT_EQ(edge_settings_json(gateway("preset=github")),
            R"({"git":true,"header":"authorization","scheme":"basic",)"
            R"("upstream":"https://github.com","user":"x-access-token"})");
  EXPECT_EQ(edge_settings_json(proxy("host=api.example.com,in=query")),
            R"({"hosts":["api.example.com"],"in":["query"]})");
}

TEST(EdgeOptions, SettingsJsonIsCheckedAsAProfileEntryIs) {
  auto error = [](EdgeDelivery d, std::string_view j) {
    auto s = edge_settings_from_json(d, j);
    return s.ok() ? "(parsed)" : s.error().to_string();
  };
  EXPECT_EQ(error(EdgeDelivery::kGateway, "[]"), "delivery_json: not a JSON object");
  EXPECT_EQ(error(EdgeDelivery::kGateway, "{"), "delivery_json: not a JSON object");
  EXPECT_EQ(error(EdgeDelivery::kGateway, R"({"upstream":"http://a.example.com"})"),
            "delivery_json: upstream: \"http://a.example.com\" is not an https:// URL (the "
            "gateway opens verified TLS to its upstream)");
  EXPECT_EQ(error(EdgeDelivery::kGateway, R"({"upstream":"https://a.example.com","user":"a,b"})"),
            "delivery_json: user: a ',' in the value");
  EXPECT_EQ(error(EdgeDelivery::kGateway, R"({"upstream":"https://a.example.com","git":1})"),
            "delivery_json: git: an unexpected value");
  EXPECT_EQ(error(EdgeDelivery::kProxy, R"({"hosts":["a.example.com",1]})"),
            "delivery_json: hosts: not a list of strings without ','");
  EXPECT_EQ(error(EdgeDelivery::kProxy, R"({"hosts":["a.example.com"],"in":["cookie"]})"),
            "delivery_json: in: \"cookie\" is not header:NAME, basic, query or body");
}

TEST(EdgeOptions, PlacesAndDeliveriesHaveTheirNames) {
  EXPECT_EQ(to_string(EdgeDelivery::kGateway), "gateway");
  EXPECT_EQ(to_string(EdgeDelivery::kProxy), "proxy");
  EXPECT_EQ((EdgePlace{EdgePlace::Kind::kHeader, "x-api-key"}.to_string()), "header:x-api-key");
  EXPECT_EQ((EdgePlace{EdgePlace::Kind::kBasic, ""}.to_string()), "basic");
  EXPECT_EQ((EdgePlace{EdgePlace::Kind::kQuery, ""}.to_string()), "query");
  EXPECT_EQ((EdgePlace{EdgePlace::Kind::kBody, ""}.to_string()), "body");
}

// ---- placeholders -----------------------------------------------------------

TEST(EdgePlaceholder, IsAsLongAsTheValueWithLettersAndDigitsAfterThePrefix) {
  for (size_t n : {size_t{16}, size_t{17}, size_t{40}, size_t{108}, size_t{1000}}) {
    auto p = make_placeholder(n);
    ASSERT_TRUE(p.ok()) << n;
    EXPECT_EQ(p->size(), n);
    EXPECT_TRUE(p->starts_with("rfph_")) << *p;
    EXPECT_TRUE(letters_and_digits(std::string_view(*p).substr(5))) << *p;
  }
}

TEST(EdgePlaceholder, ShorterThan16BytesIsRefusedWithTheReason) {
  auto p = make_placeholder(15);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().to_string(),
            "placeholder: the value is 15 bytes; the gateway and proxy deliveries need at least "
            "16, so that its placeholder can be as long");
  EXPECT_FALSE(make_placeholder(0).ok());
  EXPECT_FALSE(make_placeholder(5).ok());
}

TEST(EdgePlaceholder, TwoCallsGiveDifferentPlaceholders) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) seen.insert(make_placeholder(16).value());
  EXPECT_EQ(seen.size(), 100u);
  EXPECT_NE(make_placeholder(64).value(), make_placeholder(64).value());
}

TEST(EdgePlaceholder, UsesEveryLetterAndDigit) {
  std::set<char> seen;
  for (int i = 0; i < 200; ++i) {
    const std::string p = make_placeholder(64).value();
    seen.insert(p.begin() + 5, p.end());
  }
  EXPECT_EQ(seen.size(), 62u);
}

// ---- credentials --------------------------------------------------------------

TEST(EdgeCredentialBinds, OnlyAProxyCredentialBindsAndOnlyItsHosts) {
  const auto p = credential("API_KEY", proxy("host=api.example.com,host=*.svc.example.org:8443"),
                            "0123456789abcdef");
  EXPECT_TRUE(p.binds({"api.example.com", 443}));
  EXPECT_TRUE(p.binds({"api.example.com", 80}));
  EXPECT_FALSE(p.binds({"api.example.com", 8443}));
  EXPECT_FALSE(p.binds({"other.example.com", 443}));
  EXPECT_TRUE(p.binds({"a.svc.example.org", 8443}));
  EXPECT_FALSE(p.binds({"a.svc.example.org", 443}));
  EXPECT_FALSE(p.binds({"svc.example.org", 8443}));
  const auto g = credential("ANTHROPIC_API_KEY", gateway("preset=anthropic"), "0123456789abcdef");
  EXPECT_FALSE(g.binds({"api.anthropic.com", 443}));
}

TEST(EdgeCredentialHeader, WritesTheValueRawAsABearerOrInBasicAuth) {
  const std::string v = "sk-0123456789abcdef";
  EXPECT_EQ(credential("K", gateway("preset=anthropic"), v).gateway_header_value(), v);
  EXPECT_EQ(credential("K", gateway("preset=openai"), v).gateway_header_value(), "Bearer " + v);
  EXPECT_EQ(credential("K", gateway("preset=github"), v).gateway_header_value(),
            "Basic " + base64_encode("x-access-token:" + v));
  EXPECT_EQ(credential("K", gateway("preset=github,user=bot"), "ghp_0123456789abcdef")
                .gateway_header_value(),
            "Basic Ym90OmdocF8wMTIzNDU2Nzg5YWJjZGVm");
}

TEST(EdgeCredentialEnvironment, AGatewayGetsItsPlaceholderAndItsBaseUrl) {
  const auto c = credential("ANTHROPIC_API_KEY", gateway("preset=anthropic"), "sk-ant-0123456789");
  int git = 0;
  const auto env = edge_environment(c, &git);
  EXPECT_EQ(env, (std::vector<std::pair<std::string, std::string>>{
                     {"ANTHROPIC_API_KEY", c.placeholder},
                     {"ANTHROPIC_BASE_URL", "http://127.0.0.1:3128/.rf/gw/ANTHROPIC_API_KEY"}}));
  EXPECT_EQ(git, 0);
}

TEST(EdgeCredentialEnvironment, GitIsSentToTheGatewayWithTheNextConfigIndex) {
  const auto c = credential("GH_TOKEN", gateway("preset=github"), "ghp_0123456789abcdef");
  int git = 2;
  const auto env = edge_environment(c, &git);
  EXPECT_EQ(env, (std::vector<std::pair<std::string, std::string>>{
                     {"GH_TOKEN", c.placeholder},
                     {"GIT_CONFIG_KEY_2", "url.http://127.0.0.1:3128/.rf/gw/GH_TOKEN/.insteadOf"},
                     {"GIT_CONFIG_VALUE_2", "https://github.com/"}}));
  EXPECT_EQ(git, 3);
}

TEST(EdgeCredentialEnvironment, AProxyCredentialGetsOnlyItsPlaceholder) {
  const auto c = credential("API_KEY", proxy("host=api.example.com"), "0123456789abcdef");
  int git = 0;
  EXPECT_EQ(edge_environment(c, &git),
            (std::vector<std::pair<std::string, std::string>>{{"API_KEY", c.placeholder}}));
  EXPECT_EQ(git, 0);
}

TEST(EdgeCredentialEnvironment, TheGatewayUrlIsUnderTheSandboxProxy) {
  EXPECT_EQ(gateway_url("OPENAI_API_KEY"), "http://127.0.0.1:3128/.rf/gw/OPENAI_API_KEY");
}

// ---- base64 -------------------------------------------------------------------

TEST(Base64, EncodesTheRfc4648Vectors) {
  EXPECT_EQ(base64_encode(""), "");
  EXPECT_EQ(base64_encode("f"), "Zg==");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_EQ(base64_encode("foob"), "Zm9vYg==");
  EXPECT_EQ(base64_encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64_encode(std::string("\xfb\xff\xbf", 3)), "+/+/");
}

TEST(Base64, DecodesTheRfc4648Vectors) {
  EXPECT_EQ(base64_decode(""), "");
  EXPECT_EQ(base64_decode("Zg=="), "f");
  EXPECT_EQ(base64_decode("Zm8="), "fo");
  EXPECT_EQ(base64_decode("Zm9v"), "foo");
  EXPECT_EQ(base64_decode("Zm9vYg=="), "foob");
  EXPECT_EQ(base64_decode("Zm9vYmE="), "fooba");
  EXPECT_EQ(base64_decode("Zm9vYmFy"), "foobar");
  EXPECT_EQ(base64_decode("+/+/"), std::string("\xfb\xff\xbf", 3));
}

TEST(Base64, AcceptsUnpaddedInput) {
  EXPECT_EQ(base64_decode("Zg"), "f");
  EXPECT_EQ(base64_decode("Zm8"), "fo");
  EXPECT_EQ(base64_decode("Zm9vYg"), "foob");
  EXPECT_EQ(base64_decode("Zm9vYmE"), "fooba");
}

TEST(Base64, RefusesBytesOutsideTheAlphabet) {
  for (const char* text : {"Zm9v YmFy", "Zm9v\nYmFy", "Zm9-", "Zm9_", "Zm9v*", "Zm\x80v"}) {
    EXPECT_EQ(base64_decode(text), std::nullopt) << text;
  }
}

TEST(Base64, RefusesBadPaddingAndImpossibleLengths) {
  for (const char* text : {"Z", "Zm9vY", "Z===", "Zg=", "Zg===", "=", "==", "Zg==Zg==", "Zm=v",
                           "Zm9v=", "Zm8==", "Zm9vYg="}) {
    EXPECT_EQ(base64_decode(text), std::nullopt) << text;
  }
}

TEST(Base64, EveryByteStringSurvivesTheRoundTrip) {
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  for (size_t n = 0; n <= all.size(); n += 7) {
    const std::string s = all.substr(all.size() - n);
    EXPECT_EQ(base64_decode(base64_encode(s)), s) << n;
  }
}

}  // namespace
}  // namespace rf::net
