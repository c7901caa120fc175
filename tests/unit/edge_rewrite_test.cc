// What the egress edge does to a request carrying a placeholder (issue 13):
// the gateway and intercepted rewrites, the plain-HTTP check, the streaming
// swap over bodies and responses, the response heads, and the messages
// between the egress proxy and ringfence-egress-tls.
#include "proxy/edge_rewrite.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/base64.h"
#include "proxy/edge_messages.h"
#include "redact/forms.h"

namespace rf::proxy {
namespace {

using net::EdgeCredential;
using net::EdgeDelivery;

// "rfph_" + tag, padded with '0' to n bytes: fixed, so the texts are exact.
std::string ph(std::string_view tag, size_t n) {
  std::string out = "rfph_" + std::string(tag);
  out.resize(n, '0');
  return out;
}

EdgeCredential cred(std::string key, EdgeDelivery d, std::string_view options, std::string value,
                    std::string_view tag) {
  EdgeCredential c;
  c.key = std::move(key);
  c.secret = "secret-" + c.key;
  auto s = net::parse_edge_options(d, options);
  EXPECT_TRUE(s.ok()) << options;
  if (s.ok()) c.settings = *s;
  c.placeholder = ph(tag, value.size());
  c.value = std::move(value);
  return c;
}

// The sandbox's credentials: one gateway, four proxy-delivered (three bound
// to api.example.com, one to another host).
std::vector<EdgeCredential> all_credentials() {
  std::vector<EdgeCredential> all;
  all.push_back(cred("ANTHROPIC_API_KEY", EdgeDelivery::kGateway, "preset=anthropic",
                     "sk-ant-api03-real-value-0001", "Gw"));
  all.push_back(cred("GITHUB_TOKEN", EdgeDelivery::kProxy, "host=api.example.com",
                     "ghp-real-token-000000000001", "Px"));
  all.push_back(cred("SEARCH_KEY", EdgeDelivery::kProxy,
                     "host=api.example.com,in=query,in=header:x-token", "q+v/al=ue&0000000001",
                     "Qy"));
  all.push_back(cred("BODY_KEY", EdgeDelivery::kProxy, "host=api.example.com,in=body",
                     "body-secret-000001", "Bd"));
  all.push_back(cred("OTHER_TOKEN", EdgeDelivery::kProxy, "host=other.example.com",
                     "other-secret-00001", "Ot"));
  return all;
}

const std::vector<EdgeCredential>& all() {
  static const std::vector<EdgeCredential> creds = all_credentials();
  return creds;
}
const EdgeCredential& gw() { return all()[0]; }
const EdgeCredential& px() { return all()[1]; }
const EdgeCredential& qy() { return all()[2]; }
const EdgeCredential& bd() { return all()[3]; }
const EdgeCredential& ot() { return all()[4]; }

const net::Authority kApi{"api.example.com", 443};

RequestHead head(const std::string& text) {
  auto h = parse_request_head(text);
  EXPECT_TRUE(h.ok()) << text << ": " << (h.ok() ? "" : h.error().to_string());
  return h.ok() ? *h : RequestHead{};
}

EdgeRequest gateway(const std::string& text, const EdgeCredential& c = gw(),
                    std::span<const EdgeCredential> creds = all()) {
  const RequestHead h = head(text);
  auto t = parse_gateway_target(h.target);
  EXPECT_TRUE(t.has_value()) << h.target;
  return rewrite_gateway_request(h, t.value_or(GatewayTarget{}), c, creds);
}

EdgeRequest intercept(const std::string& text, const net::Authority& target = kApi,
                      std::span<const EdgeCredential> creds = all()) {
  return rewrite_intercepted_request(head(text), target, creds);
}

std::string basic(std::string_view user_pass) { return "Basic " + base64_encode(user_pass); }

// `v` as the redactor writes it in form `f` (forms_of leaves out a form equal
// to the raw value: a value with nothing to escape).
std::string in_form(redact::Form f, std::string_view v) {
  for (const auto& [form, text] : redact::forms_of(v))
    if (form == f) return text;
  return std::string(v);
}
std::string percent_encode(std::string_view v) { return redact::url_encoded(v); }
std::string to_hex(std::string_view v) { return in_form(redact::Form::hex_lower, v); }

std::string misplaced(const EdgeCredential& c, std::string_view place, std::string_view host,
                      std::string_view allowed) {
  return "the placeholder of " + c.key + " is in " + std::string(place) + " of a request to " +
         std::string(host) + ": refused (" + c.key + std::string(allowed) + ")";
}

std::string in_plain_http(const EdgeCredential& c, std::string_view host,
                          std::string_view allowed) {
  return "the placeholder of " + c.key + " is in a plain-HTTP request to " + std::string(host) +
         ": refused (" + c.key + std::string(allowed) + ")";
}

constexpr char kGwAllowed[] =
    " is delivered by gateway: the gateway at http://127.0.0.1:3128/.rf/gw/ANTHROPIC_API_KEY "
    "sets its header itself; its placeholder goes nowhere";
constexpr char kPxAllowed[] =
    " is swapped only in header:authorization, basic of HTTPS requests to api.example.com";
constexpr char kQyAllowed[] =
    " is swapped only in query, header:x-token of HTTPS requests to api.example.com";

// ---- the gateway target --------------------------------------------------------

TEST(EdgeGatewayTarget, TakesTheKeyAndWhatFollowsInOriginOrAbsoluteForm) {
  auto t = parse_gateway_target("/.rf/gw/ANTHROPIC_API_KEY/v1/messages?beta=true");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->key, "ANTHROPIC_API_KEY");
  EXPECT_EQ(t->rest, "/v1/messages?beta=true");
  t = parse_gateway_target("http://127.0.0.1:3128/.rf/gw/K/x");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->key, "K");
  EXPECT_EQ(t->rest, "/x");
  t = parse_gateway_target("HTTP://LOCALHOST:3128/.rf/gw/K?q=1#frag");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->key, "K");
  EXPECT_EQ(t->rest, "?q=1");
  t = parse_gateway_target("/.rf/gw/K");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->key, "K");
  EXPECT_EQ(t->rest, "");
  t = parse_gateway_target("/.rf/gw/K#/elsewhere");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->rest, "");
}

TEST(EdgeGatewayTarget, AnythingElseIsNotTheGateway) {
  for (const char* target :
       {"/.rf/gw/", "/.rf/gw//x", "/.rf/gw/?x", "/.rf/g/K", "/v1/messages", "*",
        "http://127.0.0.1:31280/.rf/gw/K", "http://evil.example.com/.rf/gw/K",
        "http://127.0.0.1:3128@evil.example.com/.rf/gw/K", "https://127.0.0.1:3128/.rf/gw/K"}) {
    EXPECT_EQ(parse_gateway_target(target), std::nullopt) << target;
  }
}

// ---- the gateway rewrite ---------------------------------------------------------

TEST(EdgeGatewayRewrite, SendsThePathToTheUpstreamWithTheRealHeader) {
  const auto r = gateway(
      "POST /.rf/gw/ANTHROPIC_API_KEY/v1/messages?beta=true HTTP/1.1\r\n"
      "Host: 127.0.0.1:3128\r\n"
      "X-Api-Key: " +
      gw().placeholder +
      "\r\n"
      "Content-Type: application/json\r\n"
      "Content-Length: 2\r\n"
      "Connection: keep-alive, X-Trace\r\n"
      "X-Trace: 1\r\n"
      "Keep-Alive: timeout=5\r\n"
      "Proxy-Authorization: Basic eDp5\r\n"
      "Proxy-Connection: keep-alive\r\n"
      "TE: trailers\r\n"
      "Upgrade: h2c\r\n"
      "\r\n");
  EXPECT_FALSE(r.refused);
  EXPECT_EQ(r.bad_request, 0);
  EXPECT_EQ(r.head,
            "POST /v1/messages?beta=true HTTP/1.1\r\n"
            "Host: api.anthropic.com\r\n"
            "Content-Type: application/json\r\n"
            "Content-Length: 2\r\n"
            "X-Api-Key: sk-ant-api03-real-value-0001\r\n"
            "Accept-Encoding: identity\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(r.substitutions, 1);
  EXPECT_TRUE(r.body_swaps.empty());
}

TEST(EdgeGatewayRewrite, TheHeaderIsReplacedWhateverTheClientSentThere) {
  const auto r = gateway(
      "GET /.rf/gw/ANTHROPIC_API_KEY/v1/models HTTP/1.1\r\n"
      "x-api-key: not-the-placeholder\r\n"
      "X-API-KEY: another\r\n"
      "\r\n");
  EXPECT_EQ(r.head,
            "GET /v1/models HTTP/1.1\r\n"
            "Host: api.anthropic.com\r\n"
            "X-Api-Key: sk-ant-api03-real-value-0001\r\n"
            "Accept-Encoding: identity\r\nConnection: close\r\n\r\n");
  const auto none = gateway("GET /.rf/gw/ANTHROPIC_API_KEY/v1/models HTTP/1.0\r\n\r\n");
  EXPECT_EQ(none.head,
            "GET /v1/models HTTP/1.0\r\n"
            "Host: api.anthropic.com\r\n"
            "X-Api-Key: sk-ant-api03-real-value-0001\r\n"
            "Accept-Encoding: identity\r\nConnection: close\r\n\r\n");
}

TEST(EdgeGatewayRewrite, ThePathGoesUnderTheUpstreamBasePathAndKeepsItsQuery) {
  auto openai = cred("OPENAI_API_KEY", EdgeDelivery::kGateway, "preset=openai",
                     "sk-proj-real-value-000001", "Oa");
  const std::vector<EdgeCredential> creds = {openai};
  auto line = [&](const std::string& target) {
    const std::string h = gateway("GET " + target + " HTTP/1.1\r\n\r\n", openai, creds).head;
    return h.substr(0, h.find("\r\n"));
  };
  EXPECT_EQ(line("/.rf/gw/OPENAI_API_KEY/chat/completions"), "GET /v1/chat/completions HTTP/1.1");
  EXPECT_EQ(line("/.rf/gw/OPENAI_API_KEY"), "GET /v1 HTTP/1.1");
  EXPECT_EQ(line("/.rf/gw/OPENAI_API_KEY?limit=2"), "GET /v1?limit=2 HTTP/1.1");
  EXPECT_EQ(line("http://127.0.0.1:3128/.rf/gw/OPENAI_API_KEY/models?a=1&b=2#x"),
            "GET /v1/models?a=1&b=2 HTTP/1.1");
  EXPECT_EQ(line("/.rf/gw/ANTHROPIC_API_KEY"), "GET /v1 HTTP/1.1");
  const std::string anthropic = gateway("GET /.rf/gw/ANTHROPIC_API_KEY?x=1 HTTP/1.1\r\n\r\n").head;
  EXPECT_EQ(anthropic.substr(0, anthropic.find("\r\n")), "GET /?x=1 HTTP/1.1");
  EXPECT_EQ(gateway("GET /.rf/gw/ANTHROPIC_API_KEY HTTP/1.1\r\n\r\n").head.substr(0, 16),
            "GET / HTTP/1.1\r\n");
}

TEST(EdgeGatewayRewrite, HostIsTheUpstreamWithItsPortAndBasicAuthIsEncoded) {
  auto c = cred("GH_TOKEN", EdgeDelivery::kGateway,
                "upstream=https://git.example.com:8443/base,scheme=basic,user=bot",
                "ghp-0123456789abcdef", "Gh");
  const std::vector<EdgeCredential> creds = {c};
  const auto r = gateway(
      "GET /.rf/gw/GH_TOKEN/org/repo.git/info/refs?service=git-upload-pack HTTP/1.1\r\n"
      "Host: 127.0.0.1:3128\r\n"
      "Authorization: Basic eC1hY2Nlc3MtdG9rZW46\r\n"
      "User-Agent: git/2.43\r\n\r\n",
      c, creds);
  EXPECT_EQ(r.head,
            "GET /base/org/repo.git/info/refs?service=git-upload-pack HTTP/1.1\r\n"
            "Host: git.example.com:8443\r\n"
            "User-Agent: git/2.43\r\n"
            "Authorization: " +
                basic("bot:ghp-0123456789abcdef") +
                "\r\n"
                "Accept-Encoding: identity\r\nConnection: close\r\n\r\n");
}

TEST(EdgeGatewayRewrite, APlaceholderInTheTargetIsRefusedNamingTheKeyAndThePlace) {
  const auto r = gateway("GET /.rf/gw/ANTHROPIC_API_KEY/v1/models?token=" + px().placeholder +
                         " HTTP/1.1\r\n\r\n");
  ASSERT_TRUE(r.refused);
  EXPECT_EQ(r.refused->key, "GITHUB_TOKEN");
  EXPECT_EQ(r.refused->reason,
            "the placeholder of GITHUB_TOKEN is in the request target of a request to "
            "api.anthropic.com: refused (GITHUB_TOKEN is swapped only in header:authorization, "
            "basic of HTTPS requests to api.example.com)");
  EXPECT_EQ(r.head, "");
  const auto own =
      gateway("GET /.rf/gw/ANTHROPIC_API_KEY/" + gw().placeholder + " HTTP/1.1\r\n\r\n");
  ASSERT_TRUE(own.refused);
  EXPECT_EQ(own.refused->reason,
            misplaced(gw(), "the request target", "api.anthropic.com", kGwAllowed));
}

TEST(EdgeGatewayRewrite, APlaceholderInAnotherHeaderIsRefusedNamingTheKeyAndTheHeader) {
  const auto r = gateway(
      "GET /.rf/gw/ANTHROPIC_API_KEY/v1/models HTTP/1.1\r\n"
      "Authorization: Bearer " +
      gw().placeholder + "\r\n\r\n");
  ASSERT_TRUE(r.refused);
  EXPECT_EQ(r.refused->key, "ANTHROPIC_API_KEY");
  EXPECT_EQ(r.refused->reason,
            "the placeholder of ANTHROPIC_API_KEY is in header authorization of a request to "
            "api.anthropic.com: refused (ANTHROPIC_API_KEY is delivered by gateway: the gateway "
            "at http://127.0.0.1:3128/.rf/gw/ANTHROPIC_API_KEY sets its header itself; its "
            "placeholder goes nowhere)");
  const auto other = gateway(
      "GET /.rf/gw/ANTHROPIC_API_KEY/v1/models HTTP/1.1\r\n"
      "X-Other: x" +
      ot().placeholder + "y\r\n\r\n");
  ASSERT_TRUE(other.refused);
  EXPECT_EQ(other.refused->key, "OTHER_TOKEN");
  const auto host = gateway(
      "GET /.rf/gw/ANTHROPIC_API_KEY/v1/models HTTP/1.1\r\n"
      "Host: " +
      px().placeholder + "\r\n\r\n");
  ASSERT_TRUE(host.refused);
  EXPECT_EQ(host.refused->reason, misplaced(px(), "header host", "api.anthropic.com", kPxAllowed));
  const auto hidden = gateway(
      "GET /.rf/gw/ANTHROPIC_API_KEY/v1/models HTTP/1.1\r\n"
      "Authorization: " +
      basic("x-access-token:" + px().placeholder) + "\r\n\r\n");
  ASSERT_TRUE(hidden.refused);
  EXPECT_EQ(hidden.refused->reason,
            misplaced(px(), "header authorization", "api.anthropic.com", kPxAllowed));
}

TEST(EdgeGatewayRewrite, APlaceholderInTheMethodOrAHeaderNameIsRefused) {
  const auto method =
      gateway(px().placeholder + " /.rf/gw/ANTHROPIC_API_KEY/v1/models HTTP/1.1\r\n\r\n");
  ASSERT_TRUE(method.refused);
  EXPECT_EQ(method.refused->reason, misplaced(px(), "the method", "api.anthropic.com", kPxAllowed));
  const auto name = gateway(
      "GET /.rf/gw/ANTHROPIC_API_KEY/v1/models HTTP/1.1\r\n"
      "X-" +
      px().placeholder + ": 1\r\n\r\n");
  ASSERT_TRUE(name.refused);
  EXPECT_EQ(name.refused->reason,
            misplaced(px(), "a header name", "api.anthropic.com", kPxAllowed));
}

TEST(EdgeGatewayRewrite, AValueWithALineBreakIsRefused) {
  auto c = cred("ANTHROPIC_API_KEY", EdgeDelivery::kGateway, "preset=anthropic",
                "sk-ant\r\nX-Evil: 1-0000", "Cr");
  const std::vector<EdgeCredential> creds = {c};
  const auto r = gateway("GET /.rf/gw/ANTHROPIC_API_KEY/v1 HTTP/1.1\r\n\r\n", c, creds);
  ASSERT_TRUE(r.refused);
  EXPECT_EQ(r.refused->key, "ANTHROPIC_API_KEY");
  EXPECT_EQ(r.refused->reason,
            "the value of ANTHROPIC_API_KEY holds a control byte: it cannot go into a header");
  EXPECT_EQ(r.head, "");
  // In Basic authorization it is base64: nothing breaks the line.
  auto b = cred("K", EdgeDelivery::kGateway, "upstream=https://git.example.com,scheme=basic",
                "ghp\r\n0123456789abc", "Cb");
  const std::vector<EdgeCredential> bs = {b};
  EXPECT_FALSE(gateway("GET /.rf/gw/K/x HTTP/1.1\r\n\r\n", b, bs).refused);
}

TEST(EdgeGatewayRewrite, AmbiguousFramingIsABadRequest) {
  const struct {
    const char* head;
    const char* error;
  } cases[] = {
      {"GET /.rf/gw/ANTHROPIC_API_KEY/v1 HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
       "more than one Host header"},
      {"POST /.rf/gw/ANTHROPIC_API_KEY/v1 HTTP/1.1\r\nContent-Length: 3\r\n"
       "Transfer-Encoding: chunked\r\n\r\n",
       "both Content-Length and Transfer-Encoding"},
      {"POST /.rf/gw/ANTHROPIC_API_KEY/v1 HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n"
       "\r\n",
       "conflicting Content-Length headers"},
      {"POST /.rf/gw/ANTHROPIC_API_KEY/v1 HTTP/1.1\r\nContent-Length: -3\r\n\r\n",
       "bad Content-Length \"-3\""},
  };
  for (const auto& c : cases) {
    const auto r = gateway(c.head);
    EXPECT_EQ(r.bad_request, 400) << c.head;
    EXPECT_EQ(r.error, c.error) << c.head;
    EXPECT_FALSE(r.refused);
    EXPECT_EQ(r.head, "");
  }
}

// ---- the intercepted rewrite -------------------------------------------------------

TEST(EdgeInterceptRewrite, SwapsTheValueInAnAuthorizationHeader) {
  const auto r = intercept(
      "GET /repos/o/r HTTP/1.1\r\n"
      "Host: api.example.com\r\n"
      "Authorization: Bearer " +
      px().placeholder +
      "\r\n"
      "Accept: application/json\r\n"
      "Connection: keep-alive\r\n\r\n");
  EXPECT_FALSE(r.refused);
  EXPECT_EQ(r.bad_request, 0);
  EXPECT_EQ(r.head,
            "GET /repos/o/r HTTP/1.1\r\n"
            "Host: api.example.com\r\n"
            "Authorization: Bearer ghp-real-token-000000000001\r\n"
            "Accept: application/json\r\n"
            "Accept-Encoding: identity\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(r.substitutions, 1);
  EXPECT_EQ(r.body_swaps,
            (std::vector<std::pair<std::string, std::string>>{{bd().placeholder, bd().value}}));
}

TEST(EdgeInterceptRewrite, SwapsTheValueInsideBasicAuthorization) {
  const auto r = intercept(
      "GET /o/r.git/info/refs HTTP/1.1\r\n"
      "Authorization: " +
      basic("x-access-token:" + px().placeholder) + "\r\n\r\n");
  EXPECT_FALSE(r.refused);
  EXPECT_EQ(r.head,
            "GET /o/r.git/info/refs HTTP/1.1\r\n"
            "Host: api.example.com\r\n"
            "Authorization: " +
                basic("x-access-token:ghp-real-token-000000000001") +
                "\r\n"
                "Accept-Encoding: identity\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(r.substitutions, 1);
}

TEST(EdgeInterceptRewrite, SwapsTheValuePercentEncodedInTheQueryAndRawInItsHeader) {
  const auto r = intercept("GET /search?key=" + qy().placeholder + "&again=" + qy().placeholder +
                           "&q=x HTTP/1.1\r\n"
                           "X-Token: t=" +
                           qy().placeholder + "\r\n\r\n");
  EXPECT_FALSE(r.refused);
  EXPECT_EQ(r.head,
            "GET /search?key=q%2Bv%2Fal%3Due%260000000001&again=q%2Bv%2Fal%3Due%260000000001&q=x "
            "HTTP/1.1\r\n"
            "Host: api.example.com\r\n"
            "X-Token: t=q+v/al=ue&0000000001\r\n"
            "Accept-Encoding: identity\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(r.substitutions, 3);
}

TEST(EdgeInterceptRewrite, APlaceholderInThePathIsRefused) {
  const auto r = intercept("GET /users/" + px().placeholder + "/keys HTTP/1.1\r\n\r\n");
  ASSERT_TRUE(r.refused);
  EXPECT_EQ(r.refused->key, "GITHUB_TOKEN");
  EXPECT_EQ(r.refused->reason,
            "the placeholder of GITHUB_TOKEN is in the path of a request to api.example.com: "
            "refused (GITHUB_TOKEN is swapped only in header:authorization, basic of HTTPS "
            "requests to api.example.com)");
  // A credential that takes the query does not take the path either.
  const auto q =
      intercept("GET /" + qy().placeholder + "?k=" + qy().placeholder + " HTTP/1.1\r\n\r\n");
  ASSERT_TRUE(q.refused);
  EXPECT_EQ(q.refused->reason, misplaced(qy(), "the path", "api.example.com", kQyAllowed));
}

TEST(EdgeInterceptRewrite, APlaceholderInAnotherHeaderIsRefused) {
  const auto r = intercept(
      "GET / HTTP/1.1\r\n"
      "Cookie: session=" +
      px().placeholder + "\r\n\r\n");
  ASSERT_TRUE(r.refused);
  EXPECT_EQ(r.refused->reason, misplaced(px(), "header cookie", "api.example.com", kPxAllowed));
  // x-token is SEARCH_KEY's header, not GITHUB_TOKEN's.
  const auto t = intercept("GET / HTTP/1.1\r\nX-Token: " + px().placeholder + "\r\n\r\n");
  ASSERT_TRUE(t.refused);
  EXPECT_EQ(t.refused->reason, misplaced(px(), "header x-token", "api.example.com", kPxAllowed));
  // A credential bound to another host is swapped nowhere here.
  const auto o =
      intercept("GET / HTTP/1.1\r\nAuthorization: Bearer " + ot().placeholder + "\r\n\r\n");
  ASSERT_TRUE(o.refused);
  EXPECT_EQ(o.refused->reason,
            misplaced(ot(), "header authorization", "api.example.com",
                      " is swapped only in header:authorization, basic of HTTPS requests to "
                      "other.example.com"));
  // Nor is a gateway's.
  const auto g = intercept("GET / HTTP/1.1\r\nX-Api-Key: " + gw().placeholder + "\r\n\r\n");
  ASSERT_TRUE(g.refused);
  EXPECT_EQ(g.refused->reason, misplaced(gw(), "header x-api-key", "api.example.com", kGwAllowed));
}

TEST(EdgeInterceptRewrite, APlaceholderInTheQueryIsRefusedUnlessItsCredentialNamesQuery) {
  const auto r = intercept("GET /x?access_token=" + px().placeholder + " HTTP/1.1\r\n\r\n");
  ASSERT_TRUE(r.refused);
  EXPECT_EQ(r.refused->key, "GITHUB_TOKEN");
  EXPECT_EQ(r.refused->reason, misplaced(px(), "the query", "api.example.com", kPxAllowed));
}

TEST(EdgeInterceptRewrite, BasicAuthHidingAPlaceholderOfACredentialWithoutBasicIsRefused) {
  const auto r = intercept("GET / HTTP/1.1\r\nAuthorization: " + basic("user:" + qy().placeholder) +
                           "\r\n\r\n");
  ASSERT_TRUE(r.refused);
  EXPECT_EQ(r.refused->key, "SEARCH_KEY");
  EXPECT_EQ(r.refused->reason,
            misplaced(qy(), "header authorization", "api.example.com", kQyAllowed));
  // Both in one Basic header: the bound one is swapped, the other still refuses.
  const auto both = intercept("GET / HTTP/1.1\r\nAuthorization: " +
                              basic(px().placeholder + ":" + qy().placeholder) + "\r\n\r\n");
  ASSERT_TRUE(both.refused);
  EXPECT_EQ(both.refused->key, "SEARCH_KEY");
}

TEST(EdgeInterceptRewrite, AValueWithALineBreakIsNotSwappedIntoAHeader) {
  auto c =
      cred("API_KEY", EdgeDelivery::kProxy, "host=api.example.com", "abc\r\nX-Evil: 1-0000", "Lb");
  const std::vector<EdgeCredential> creds = {c};
  const auto r = intercept("GET / HTTP/1.1\r\nAuthorization: Bearer " + c.placeholder + "\r\n\r\n",
                           kApi, creds);
  ASSERT_TRUE(r.refused);
  EXPECT_EQ(r.refused->key, "API_KEY");
  EXPECT_EQ(r.refused->reason,
            "the value of API_KEY holds a control byte: it cannot go into a header");
}

TEST(EdgeInterceptRewrite, AHostOtherThanTheTlsTargetIsRefused) {
  const auto r = intercept("GET / HTTP/1.1\r\nHost: evil.example.com\r\n\r\n");
  ASSERT_TRUE(r.refused);
  EXPECT_EQ(r.refused->key, "");
  EXPECT_EQ(r.refused->reason,
            "Host evil.example.com does not match the TLS target api.example.com (the CONNECT "
            "and the server name): refused");
  const auto port = intercept("GET / HTTP/1.1\r\nHost: api.example.com:8443\r\n\r\n");
  ASSERT_TRUE(port.refused);
  EXPECT_EQ(port.refused->reason,
            "Host api.example.com:8443 does not match the TLS target api.example.com (the "
            "CONNECT and the server name): refused");
  EXPECT_FALSE(intercept("GET / HTTP/1.1\r\nHost: API.Example.com:443\r\n\r\n").refused);
}

TEST(EdgeInterceptRewrite, AnAbsoluteTargetMustNameTheTlsTarget) {
  const auto r = intercept("GET https://api.example.com/repos?per_page=1 HTTP/1.1\r\n\r\n");
  EXPECT_FALSE(r.refused);
  EXPECT_EQ(r.bad_request, 0);
  EXPECT_EQ(r.head,
            "GET /repos?per_page=1 HTTP/1.1\r\nHost: api.example.com\r\nAccept-Encoding: "
            "identity\r\nConnection: close\r\n\r\n");
  const auto bare = intercept("GET https://api.example.com:443 HTTP/1.1\r\n\r\n");
  EXPECT_EQ(bare.head,
            "GET / HTTP/1.1\r\nHost: api.example.com\r\nAccept-Encoding: identity\r\nConnection: "
            "close\r\n\r\n");
  const auto other = intercept("GET https://evil.example.com/x HTTP/1.1\r\n\r\n");
  EXPECT_EQ(other.bad_request, 400);
  EXPECT_EQ(other.error, "the request names evil.example.com, not the TLS target api.example.com");
  EXPECT_EQ(other.head, "");
  const auto port = intercept("GET https://api.example.com:8443/x HTTP/1.1\r\n\r\n");
  EXPECT_EQ(port.bad_request, 400);
  EXPECT_EQ(port.error,
            "the request names api.example.com:8443, not the TLS target api.example.com");
  const auto http = intercept("GET http://api.example.com/x HTTP/1.1\r\n\r\n");
  EXPECT_EQ(http.bad_request, 400);
  EXPECT_EQ(http.error, "the request target is not a path");
}

TEST(EdgeInterceptRewrite, AQueryWithoutAPathGoesAsSlashQuery) {
  const auto r = intercept("GET ?k=" + qy().placeholder + " HTTP/1.1\r\n\r\n");
  EXPECT_FALSE(r.refused);
  EXPECT_EQ(r.head,
            "GET /?k=q%2Bv%2Fal%3Due%260000000001 HTTP/1.1\r\nHost: api.example.com\r\n"
            "Accept-Encoding: identity\r\nConnection: close\r\n\r\n");
  const auto a = intercept("GET https://api.example.com?x=1 HTTP/1.1\r\n\r\n");
  EXPECT_EQ(a.head,
            "GET /?x=1 HTTP/1.1\r\nHost: api.example.com\r\nAccept-Encoding: "
            "identity\r\nConnection: close\r\n\r\n");
}

TEST(EdgeInterceptRewrite, APortOtherThan443IsInTheHost) {
  const net::Authority target{"api.example.com", 8443};
  auto c =
      cred("API_KEY", EdgeDelivery::kProxy, "host=api.example.com:8443", "0123456789abcdef", "Pt");
  const std::vector<EdgeCredential> creds = {c};
  const auto r =
      intercept("GET / HTTP/1.1\r\nHost: api.example.com:8443\r\nAuthorization: " + c.placeholder +
                    "\r\n\r\n",
                target, creds);
  EXPECT_EQ(r.head,
            "GET / HTTP/1.1\r\nHost: api.example.com:8443\r\nAuthorization: 0123456789abcdef\r\n"
            "Accept-Encoding: identity\r\nConnection: close\r\n\r\n");
}

TEST(EdgeInterceptRewrite, BodySwapsAreOnlyForCredentialsWithInBody) {
  EXPECT_EQ(intercept("GET / HTTP/1.1\r\n\r\n").body_swaps,
            (std::vector<std::pair<std::string, std::string>>{{bd().placeholder, bd().value}}));
  const std::vector<EdgeCredential> no_body = {gw(), px(), qy(), ot()};
  EXPECT_TRUE(intercept("GET / HTTP/1.1\r\n\r\n", kApi, no_body).body_swaps.empty());
  // Bound elsewhere: nothing for api.example.com's body.
  auto elsewhere = cred("BODY_KEY", EdgeDelivery::kProxy, "host=other.example.com,in=body",
                        "body-secret-000001", "Bd");
  const std::vector<EdgeCredential> creds = {elsewhere};
  EXPECT_TRUE(intercept("GET / HTTP/1.1\r\n\r\n", kApi, creds).body_swaps.empty());
}

TEST(EdgeInterceptRewrite, APlaceholderInTheMethodOrAHeaderNameIsRefused) {
  const auto method = intercept(px().placeholder + " / HTTP/1.1\r\n\r\n");
  ASSERT_TRUE(method.refused);
  EXPECT_EQ(method.refused->reason, misplaced(px(), "the method", "api.example.com", kPxAllowed));
  const auto name = intercept("GET / HTTP/1.1\r\n" + px().placeholder + ": 1\r\n\r\n");
  ASSERT_TRUE(name.refused);
  EXPECT_EQ(name.refused->reason, misplaced(px(), "a header name", "api.example.com", kPxAllowed));
}

TEST(EdgeInterceptRewrite, AmbiguousFramingIsABadRequest) {
  const auto r =
      intercept("GET / HTTP/1.1\r\nHost: api.example.com\r\nhost: api.example.com\r\n\r\n");
  EXPECT_EQ(r.bad_request, 400);
  EXPECT_EQ(r.error, "more than one Host header");
}

// ---- plain HTTP ----------------------------------------------------------------

TEST(EdgePlainRequest, FindsARawPlaceholderAnywhereInTheHead) {
  const net::Authority target{"example.com", 80};
  const auto r = check_plain_request(
      "GET http://example.com/x?k=" + px().placeholder + " HTTP/1.1\r\nHost: example.com\r\n\r\n",
      target, all());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->key, "GITHUB_TOKEN");
  EXPECT_EQ(r->reason,
            "the placeholder of GITHUB_TOKEN is in a plain-HTTP request to "
            "example.com: refused (GITHUB_TOKEN is swapped only in header:authorization, basic "
            "of HTTPS requests to api.example.com)");
  const auto g = check_plain_request(
      "GET http://api.anthropic.com/ HTTP/1.1\r\nX-Api-Key: " + gw().placeholder + "\r\n\r\n",
      {"api.anthropic.com", 8080}, all());
  ASSERT_TRUE(g);
  EXPECT_EQ(g->reason, in_plain_http(gw(), "api.anthropic.com:8080", kGwAllowed));
}

TEST(EdgePlainRequest, FindsAPlaceholderInsideBasicAuthorization) {
  const net::Authority target{"example.com", 80};
  const auto r = check_plain_request("GET http://example.com/ HTTP/1.1\r\nauthorization:   " +
                                         basic("x-access-token:" + qy().placeholder) + "\r\n\r\n",
                                     target, all());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->key, "SEARCH_KEY");
  EXPECT_EQ(r->reason, in_plain_http(qy(), "example.com", kQyAllowed));
  const auto lf = check_plain_request(
      "GET http://example.com/ HTTP/1.1\nAuthorization: " + basic("u:" + px().placeholder) + "\n\n",
      target, all());
  ASSERT_TRUE(lf);
  EXPECT_EQ(lf->key, "GITHUB_TOKEN");
}

TEST(EdgePlainRequest, AHeadWithoutAPlaceholderPasses) {
  EXPECT_EQ(check_plain_request("GET http://example.com/ HTTP/1.1\r\nAuthorization: " +
                                    basic("user:password") + "\r\n\r\n",
                                {"example.com", 80}, all()),
            std::nullopt);
}

// ---- the streaming swap -----------------------------------------------------------

struct Swept {
  std::string out;
  std::optional<size_t> stop;  // as feed() returned it
  bool stopped = false;        // by feed() or, held behind a longer partial match, by finish()
  int swapped = 0;
};

// The whole stream at once, as the patterns promise: leftmost first, then
// longest, then the first listed; a stopping pattern ends the output.
Swept replace_all_at_once(std::string_view text, const std::vector<EdgeStream::Pattern>& ps) {
  Swept r;
  size_t pos = 0;
  for (;;) {
    size_t best = std::string_view::npos, which = 0;
    for (size_t i = 0; i < ps.size(); ++i) {
      const size_t f = text.find(ps[i].from, pos);
      if (f == std::string_view::npos) continue;
      if (f < best || (f == best && ps[i].from.size() > ps[which].from.size())) {
        best = f;
        which = i;
      }
    }
    if (best == std::string_view::npos) break;
    r.out.append(text.substr(pos, best - pos));
    if (!ps[which].to) {
      r.stop = which;
      r.stopped = true;
      return r;
    }
    r.out.append(*ps[which].to);
    ++r.swapped;
    pos = best + ps[which].from.size();
  }
  r.out.append(text.substr(pos));
  return r;
}

Swept stream_in_chunks(std::string_view text, const std::vector<EdgeStream::Pattern>& ps,
                       const std::vector<size_t>& sizes) {
  EdgeStream s(ps);
  Swept r;
  size_t at = 0;
  for (size_t i = 0; at < text.size(); ++i) {
    const size_t n = std::min(sizes[i % sizes.size()], text.size() - at);
    const size_t before = r.out.size();
    auto stop = s.feed(text.substr(at, n), &r.out);
    if (r.stop) {
      EXPECT_EQ(r.out.size(), before) << "output after a stop";
    }
    if (stop) {
      EXPECT_FALSE(r.stop) << "a second stop";
      r.stop = stop;
    }
    at += n;
  }
  const size_t before = r.out.size();
  s.finish(&r.out);
  if (r.stop) {
    EXPECT_EQ(r.out.size(), before) << "output after a stop";
  }
  r.swapped = s.swapped();
  r.stopped = s.stopped();
  if (r.stop) {
    EXPECT_TRUE(r.stopped);
  }
  return r;
}

std::string random_text(std::mt19937& rng, std::string_view alphabet, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += alphabet[rng() % alphabet.size()];
  return out;
}

// Random haystacks with the patterns put in, fed in random chunkings: the
// same bytes, swaps and stop as all at once. `alphabet` small: patterns that
// overlap, contain and prefix each other.
void property(uint32_t seed, std::string_view alphabet, size_t max_pattern, bool placeholders) {
  std::mt19937 rng(seed);
  for (int round = 0; round < 300; ++round) {
    std::vector<EdgeStream::Pattern> ps;
    const size_t count = 1 + rng() % 4;
    for (size_t i = 0; i < count; ++i) {
      EdgeStream::Pattern p;
      if (placeholders) {
        p.from = "rfph_" + random_text(rng, alphabet, 11 + rng() % max_pattern);
      } else {
        p.from = random_text(rng, alphabet, 1 + rng() % max_pattern);
      }
      if (rng() % 5 != 0) p.to = random_text(rng, "ABCDEFGHIJ", p.from.size());
      p.key = "KEY_" + std::to_string(i);
      ps.push_back(std::move(p));
    }
    std::string text;
    const size_t pieces = rng() % 12;
    for (size_t i = 0; i < pieces; ++i) {
      text += random_text(rng, alphabet, rng() % 8);
      const std::string& from = ps[rng() % ps.size()].from;
      // Whole, or cut short so that only a partial match is there.
      text += rng() % 4 == 0 ? from.substr(0, rng() % from.size()) : from;
    }
    text += random_text(rng, alphabet, rng() % 4);
    const Swept want = replace_all_at_once(text, ps);
    std::vector<std::vector<size_t>> chunkings = {{1}, {text.size() + 1}};
    for (int k = 0; k < 6; ++k) {
      std::vector<size_t> sizes;
      for (int j = 0; j < 8; ++j) sizes.push_back(1 + rng() % 9);
      chunkings.push_back(sizes);
    }
    for (const auto& sizes : chunkings) {
      const Swept got = stream_in_chunks(text, ps, sizes);
      std::string patterns;
      for (const auto& p : ps) patterns += " " + p.from + (p.to ? "" : "(stop)");
      ASSERT_EQ(got.out, want.out) << "seed " << seed << " round " << round << " text " << text
                                   << " patterns" << patterns << " chunk " << sizes[0];
      ASSERT_EQ(got.stopped, want.stopped) << text << patterns;
      if (got.stop) {
        ASSERT_EQ(got.stop, want.stop) << text << patterns;
      }
      if (!want.stop) {
        ASSERT_EQ(got.swapped, want.swapped) << text << patterns;
      }
    }
  }
}

TEST(EdgeStreamProperty, AnyChunkingGivesWhatTheWholeStreamGivesWithPlaceholders) {
  property(20261124, "ABCabc012", 6, /*placeholders=*/true);
}

TEST(EdgeStreamProperty, AnyChunkingGivesWhatTheWholeStreamGivesWithOverlappingPatterns) {
  property(13, "ab", 4, /*placeholders=*/false);
  property(1313, "abc", 6, /*placeholders=*/false);
}

TEST(EdgeStream, BytesThatNeverStartAPatternAreNotHeldBack) {
  EdgeStream s({{"xyz", std::string("XYZ"), "K"}});
  std::string out;
  EXPECT_EQ(s.feed("abc", &out), std::nullopt);
  EXPECT_EQ(out, "abc");
  EXPECT_EQ(s.feed("a-x", &out), std::nullopt);
  EXPECT_EQ(out, "abca-");
  EXPECT_EQ(s.feed("yz-xy", &out), std::nullopt);
  EXPECT_EQ(out, "abca-XYZ-");
  EXPECT_EQ(s.swapped(), 1);
}

TEST(EdgeStream, FinishFlushesTheHeldTail) {
  EdgeStream s({{"xyz", std::string("XYZ"), "K"}});
  std::string out;
  s.feed("abxy", &out);
  EXPECT_EQ(out, "ab");
  s.finish(&out);
  EXPECT_EQ(out, "abxy");
  EXPECT_EQ(s.swapped(), 0);
}

TEST(EdgeStream, AStoppingPatternReturnsItsIndexAndNothingFromItOnGoesOut) {
  EdgeStream s({{"swapme", std::string("SWAPPD"), "A"}, {"stop", std::nullopt, "B"}});
  std::string out;
  EXPECT_EQ(s.feed("one swapme two st", &out), std::nullopt);
  EXPECT_EQ(out, "one SWAPPD two ");
  EXPECT_EQ(s.feed("op three", &out), 1u);
  EXPECT_EQ(out, "one SWAPPD two ");
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(s.pattern(1).key, "B");
  EXPECT_EQ(s.feed("more swapme", &out), std::nullopt);
  s.finish(&out);
  EXPECT_EQ(out, "one SWAPPD two ");
}

TEST(EdgeStream, WithoutPatternsEverythingPassesAtOnce) {
  EdgeStream s({});
  std::string out;
  EXPECT_EQ(s.feed("rfph_anything", &out), std::nullopt);
  s.finish(&out);
  EXPECT_EQ(out, "rfph_anything");
}

TEST(EdgeStream, ALongerPatternSplitAcrossChunksWinsOverAShorterOneInsideIt) {
  // The value of one credential inside another's: the longer goes back whole.
  EdgeStream s(
      {{"secret", std::string("PHPHPH"), "A"}, {"xsecrety", std::string("QQQQQQQQ"), "B"}});
  std::string out;
  s.feed("-xsecr", &out);
  s.feed("et", &out);
  s.feed("y-", &out);
  s.finish(&out);
  EXPECT_EQ(out, "-QQQQQQQQ-");
  EdgeStream t(
      {{"secret", std::string("PHPHPH"), "A"}, {"xsecrety", std::string("QQQQQQQQ"), "B"}});
  std::string out2;
  t.feed("-xsecret", &out2);
  t.finish(&out2);
  EXPECT_EQ(out2, "-xPHPHPH");
}

TEST(EdgeStream, AStopHeldBehindALongerPartialMatchIsFoundAtTheEnd) {
  EdgeStream s({{"bc", std::nullopt, "A"}, {"abcd", std::string("WXYZ"), "B"}});
  std::string out;
  EXPECT_EQ(s.feed("-abc", &out), std::nullopt);
  EXPECT_EQ(out, "-");
  EXPECT_FALSE(s.stopped());
  s.finish(&out);
  EXPECT_EQ(out, "-a");
  EXPECT_TRUE(s.stopped());
}

TEST(EdgeStream, RequestBodyPatternsSwapTheBodyCredentialsAndStopOnTheRest) {
  const auto ps = request_body_patterns(all(), {{bd().placeholder, bd().value}});
  ASSERT_EQ(ps.size(), 5u);
  for (size_t i = 0; i < ps.size(); ++i) {
    EXPECT_EQ(ps[i].from, all()[i].placeholder);
    EXPECT_EQ(ps[i].key, all()[i].key);
    EXPECT_EQ(ps[i].to, i == 3 ? std::optional<std::string>(bd().value) : std::nullopt);
  }
  EdgeStream s(ps);
  std::string out;
  const std::string body = R"({"a":")" + bd().placeholder + R"(","b":")" + bd().placeholder;
  EXPECT_EQ(s.feed(body.substr(0, 20), &out), std::nullopt);
  EXPECT_EQ(s.feed(body.substr(20), &out), std::nullopt);
  EXPECT_EQ(s.feed(R"("})", &out), std::nullopt);
  s.finish(&out);
  EXPECT_EQ(out, R"({"a":"body-secret-000001","b":"body-secret-000001"})");
  EXPECT_EQ(out.size(), body.size() + 2);
  EXPECT_EQ(s.swapped(), 2);
  EdgeStream refuse(ps);
  out.clear();
  EXPECT_EQ(refuse.feed("token=" + px().placeholder.substr(0, 9), &out), std::nullopt);
  EXPECT_EQ(refuse.feed(px().placeholder.substr(9) + "&x=1", &out), 1u);
  EXPECT_EQ(out, "token=");
  EXPECT_EQ(refuse.pattern(1).key, "GITHUB_TOKEN");
}

TEST(EdgeStream, ResponsePatternsSwapEachValueBackToItsPlaceholder) {
  const std::vector<EdgeCredential> bound = {px(), qy()};
  const auto ps = response_patterns(bound);
  ASSERT_GT(ps.size(), 2u);
  EXPECT_EQ(ps[0].from, px().value);
  EXPECT_EQ(ps[0].to, px().placeholder);
  EXPECT_EQ(ps[0].key, "GITHUB_TOKEN");
  const auto second =
      std::find_if(ps.begin(), ps.end(), [](const auto& p) { return p.key != "GITHUB_TOKEN"; });
  ASSERT_NE(second, ps.end());
  EXPECT_EQ(second->from, qy().value);
  EXPECT_EQ(second->to, qy().placeholder);
  EdgeStream s(ps);
  std::string out;
  const std::string answer = "{\"token\":\"" + px().value + "\"}";
  for (char c : answer) s.feed(std::string_view(&c, 1), &out);
  s.finish(&out);
  EXPECT_EQ(out, "{\"token\":\"" + px().placeholder + "\"}");
  // A value whose placeholder is not as long would change the framing: left out.
  EdgeCredential odd = px();
  odd.placeholder = "rfph_short000000";
  const std::vector<EdgeCredential> odd_bound = {odd};
  EXPECT_TRUE(response_patterns(odd_bound).empty());
}

// An upstream that echoes what it was sent (httpbin's /headers, an error
// page quoting the request) gives the value back in the form it went: a Basic
// header's base64, a query's percent-encoding. Each goes back to the
// placeholder's same form, so the sandbox never holds the value in any.
TEST(EdgeStream, ResponsePatternsSwapEncodedEchoesBack) {
  const EdgeCredential p = px(), q = qy();
  const std::vector<EdgeCredential> bound = {p, q};
  EdgeStream s(response_patterns(bound));
  const std::string basic = base64_encode("x-access-token:" + p.value);
  const std::string answer = "{\"authorization\":\"Basic " + basic +
                             "\",\"url\":\"/s?k=" + percent_encode(q.value) + "\",\"hex\":\"" +
                             to_hex(p.value) + "\"}";
  std::string out;
  for (char c : answer) s.feed(std::string_view(&c, 1), &out);
  s.finish(&out);
  EXPECT_EQ(out.size(), answer.size());
  for (const std::string& v : {p.value, q.value}) {
    EXPECT_EQ(out.find(v), std::string::npos) << out;
    EXPECT_EQ(out.find(percent_encode(v)), std::string::npos) << out;
    EXPECT_EQ(out.find(to_hex(v)), std::string::npos) << out;
  }
  // The Basic header decodes to the user and the placeholder (the value
  // starts and ends on base64's 3-byte boundaries here).
  auto decoded = base64_decode(out.substr(out.find("Basic ") + 6, basic.size()));
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(*decoded, "x-access-token:" + p.placeholder);
  EXPECT_NE(out.find(to_hex(p.placeholder)), std::string::npos) << out;
  // The query's value had bytes to escape: its placeholder, padded to length.
  const std::string padded =
      q.placeholder + std::string(percent_encode(q.value).size() - q.placeholder.size(), '_');
  EXPECT_NE(out.find("/s?k=" + padded + "\""), std::string::npos) << out;
}

// ---- response heads ------------------------------------------------------------------

std::string heads_at_once(std::string_view answer, bool* final_head = nullptr) {
  ResponseHeads h;
  std::string out;
  auto r = h.feed(answer, &out);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().to_string());
  if (final_head) *final_head = r.ok() && *r;
  return out;
}

TEST(EdgeResponseHeads, ConnectionAndKeepAliveGiveWayToConnectionClose) {
  bool final_head = false;
  EXPECT_EQ(heads_at_once("HTTP/1.1 200 OK\r\n"
                          "Content-Type: text/plain\r\n"
                          "Connection: keep-alive\r\n"
                          "Keep-Alive: timeout=5, max=100\r\n"
                          "proxy-connection: keep-alive\r\n"
                          "Content-Length: 5\r\n"
                          "\r\n"
                          "hello",
                          &final_head),
            "HTTP/1.1 200 OK\r\n"
            "Content-Type: text/plain\r\n"
            "Content-Length: 5\r\n"
            "Connection: close\r\n"
            "\r\n"
            "hello");
  EXPECT_TRUE(final_head);
}

TEST(EdgeResponseHeads, AnInterimHeadAndTheFinalOneAreBothRewritten) {
  ResponseHeads h;
  std::string out;
  auto r = h.feed("HTTP/1.1 100 Continue\r\n\r\n", &out);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(*r);
  EXPECT_FALSE(h.in_body());
  EXPECT_EQ(h.status(), 0);
  EXPECT_EQ(out, "HTTP/1.1 100 Continue\r\nConnection: close\r\n\r\n");
  r = h.feed(
      "HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\nHTTP/1.1 201 Created\r\n"
      "Connection: keep-alive\r\nLocation: /x\r\n\r\n{}",
      &out);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(*r);
  EXPECT_TRUE(h.in_body());
  EXPECT_EQ(h.status(), 201);
  EXPECT_EQ(out,
            "HTTP/1.1 100 Continue\r\nConnection: close\r\n\r\n"
            "HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\nConnection: close\r\n\r\n"
            "HTTP/1.1 201 Created\r\nLocation: /x\r\nConnection: close\r\n\r\n{}");
}

TEST(EdgeResponseHeads, SwitchingProtocolsIsTheFinalHead) {
  ResponseHeads h;
  std::string out;
  auto r = h.feed("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n\x81\x05", &out);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(*r);
  EXPECT_EQ(h.status(), 101);
  EXPECT_EQ(out,
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: close\r\n\r\n"
            "\x81\x05");
}

TEST(EdgeResponseHeads, TheBodyPassesUntouched) {
  ResponseHeads h;
  std::string out;
  ASSERT_TRUE(h.feed("HTTP/1.0 404 Not Found\n\n", &out).ok());
  EXPECT_EQ(h.status(), 404);
  EXPECT_EQ(out, "HTTP/1.0 404 Not Found\r\nConnection: close\r\n\r\n");
  out.clear();
  const std::string body("HTTP/1.1 200 OK\r\nConnection: keep-alive\r\n\r\n\0\xff", 45);
  auto r = h.feed(body, &out);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(*r);
  EXPECT_EQ(out, body);
  EXPECT_EQ(h.status(), 404);
}

TEST(EdgeResponseHeads, AHeadSplitAcrossManyFeedsComesOutAsOne) {
  const std::string answer =
      "HTTP/1.1 100 Continue\r\n\r\n"
      "HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nContent-Length: 3\r\nX-A: b\r\n\r\nabc";
  const std::string want = heads_at_once(answer);
  EXPECT_EQ(want,
            "HTTP/1.1 100 Continue\r\nConnection: close\r\n\r\n"
            "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nX-A: b\r\nConnection: close\r\n\r\nabc");
  for (size_t step : {1, 2, 3, 5, 7}) {
    ResponseHeads h;
    std::string out;
    for (size_t at = 0; at < answer.size(); at += step) {
      auto r = h.feed(std::string_view(answer).substr(at, step), &out);
      ASSERT_TRUE(r.ok()) << step;
    }
    EXPECT_EQ(out, want) << step;
    EXPECT_EQ(h.status(), 200);
  }
}

TEST(EdgeResponseHeads, AnythingButHttp1IsAnError) {
  for (const char* answer :
       {"HTTP/2 200\r\n\r\n", "HTTP/2.0 200 OK\r\n\r\n", "SSH-2.0-OpenSSH_9.6\r\n\r\n",
        "HTTP/1.1\r\n\r\n", "HTTP/1.1 20\r\n\r\n", "\r\n\r\n", "http/1.1 200 OK\r\n\r\n",
        "HTTP/1.1 -12 Odd\r\n\r\n", "HTTP/1.1 1000 Odd\r\n\r\n", "HTTP/1.1 2xx OK\r\n\r\n",
        "HTTP/1.1 200OK\r\n\r\n"}) {
    ResponseHeads h;
    std::string out;
    auto r = h.feed(answer, &out);
    ASSERT_FALSE(r.ok()) << answer;
    EXPECT_EQ(r.error().to_string(), "response: not an HTTP/1.x response") << answer;
    EXPECT_EQ(out, "") << answer;
  }
}

TEST(EdgeResponseHeads, AHeadOver64KiBIsAnError) {
  const std::string line = "X-Filler: " + std::string(1000, 'f') + "\r\n";
  std::string big = "HTTP/1.1 200 OK\r\n";
  while (big.size() <= 64 * 1024) big += line;
  {
    ResponseHeads h;
    std::string out;
    auto r = h.feed(big, &out);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().to_string(), "response: a response head larger than 64 KiB");
    EXPECT_EQ(out, "");
  }
  {
    // The same with its end in the same chunk.
    ResponseHeads h;
    std::string out;
    auto r = h.feed(big + "\r\nbody", &out);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().to_string(), "response: a response head larger than 64 KiB");
    EXPECT_EQ(out, "");
  }
  {
    // Fed in pieces, each small.
    ResponseHeads h;
    std::string out;
    Result<bool> r = false;
    for (size_t at = 0; at < big.size() && r.ok(); at += 4096) {
      r = h.feed(std::string_view(big).substr(at, 4096), &out);
    }
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(out, "");
  }
}

TEST(EdgeResponseHeads, AHeadJustUnder64KiBPasses) {
  std::string head = "HTTP/1.1 200 OK\r\nX-Filler: ";
  head += std::string(64 * 1024 - head.size(), 'f');
  ASSERT_EQ(head.size(), 64u * 1024);
  ResponseHeads h;
  std::string out;
  auto r = h.feed(head + "\r\n\r\n", &out);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_TRUE(*r);
}

// ---- the messages to and from ringfence-egress-tls --------------------------------------

using edge::Bind;
using edge::CaAnswer;
using edge::CaRequest;
using edge::Conn;
using edge::ConnKind;
using edge::Done;
using edge::Forget;
using edge::Message;

Message round_trip(const Message& m) {
  const std::string bytes = edge::encode(m);
  auto back = edge::decode(bytes);
  EXPECT_TRUE(back.ok()) << bytes << ": " << (back.ok() ? "" : back.error().to_string());
  return back.ok() ? *back : Message{};
}

std::string decode_error(std::string_view bytes) {
  auto m = edge::decode(bytes);
  return m.ok() ? "(decoded)" : m.error().to_string();
}

TEST(EdgeMessages, CaRequestAndAnswersSurviveTheRoundTrip) {
  EXPECT_EQ(edge::encode(CaRequest{"sb-1"}), R"({"op":"ca","sandbox":"sb-1"})");
  auto req = std::get<CaRequest>(round_trip(CaRequest{"sb-1"}));
  EXPECT_EQ(req.sandbox, "sb-1");
  const std::string pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
  auto ok = std::get<CaAnswer>(round_trip(CaAnswer{"sb-1", pem, ""}));
  EXPECT_EQ(ok.sandbox, "sb-1");
  EXPECT_EQ(ok.pem, pem);
  EXPECT_EQ(ok.error, "");
  auto failed = std::get<CaAnswer>(round_trip(CaAnswer{"sb-1", "", "no entropy"}));
  EXPECT_EQ(failed.pem, "");
  EXPECT_EQ(failed.error, "no entropy");
}

TEST(EdgeMessages, BindKeepsEveryCredentialAndValuesThatAreNotUtf8) {
  Bind b{"sb-2", {gw(), px()}};
  b.creds[1].value = std::string("\xff\xfe\x00\x80tail-of-a-value", 19);
  b.creds[1].placeholder = ph("Nu", 19);
  const std::string bytes = edge::encode(b);
  EXPECT_EQ(bytes.find(gw().value), std::string::npos) << "values go as base64";
  auto back = std::get<Bind>(round_trip(b));
  EXPECT_EQ(back.sandbox, "sb-2");
  ASSERT_EQ(back.creds.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(back.creds[i].key, b.creds[i].key);
    EXPECT_EQ(back.creds[i].secret, b.creds[i].secret);
    EXPECT_EQ(back.creds[i].delivery(), b.creds[i].delivery());
    EXPECT_EQ(net::edge_settings_json(back.creds[i].settings),
              net::edge_settings_json(b.creds[i].settings));
    EXPECT_EQ(back.creds[i].placeholder, b.creds[i].placeholder);
    EXPECT_EQ(back.creds[i].value, b.creds[i].value);
  }
  EXPECT_TRUE(std::get<Bind>(round_trip(Bind{"sb-3", {}})).creds.empty());
}

TEST(EdgeMessages, ForgetSurvivesTheRoundTrip) {
  EXPECT_EQ(std::get<Forget>(round_trip(Forget{"sb-4"})).sandbox, "sb-4");
}

TEST(EdgeMessages, ConnKeepsItsTrailingBytesExactly) {
  Conn c;
  c.id = 18446744073709551615u;
  c.sandbox = "sb-5";
  c.kind = ConnKind::kIntercept;
  c.key = "";
  c.target = {"api.example.com", 8443};
  c.max_up = 1 << 20;
  c.initial = std::string("GET / HTTP/1.1\r\n\r\n\n{\"op\":\"x\"}\0\xff\xc3", 32);
  const std::string bytes = edge::encode(c);
  EXPECT_EQ(bytes.substr(bytes.size() - c.initial.size() - 1), "\n" + c.initial);
  auto back = std::get<Conn>(round_trip(c));
  EXPECT_EQ(back.id, c.id);
  EXPECT_EQ(back.sandbox, "sb-5");
  EXPECT_EQ(back.kind, ConnKind::kIntercept);
  EXPECT_EQ(back.key, "");
  EXPECT_EQ(back.target.host, "api.example.com");
  EXPECT_EQ(back.target.port, 8443);
  EXPECT_EQ(back.max_up, 1u << 20);
  EXPECT_EQ(back.initial, c.initial);
  Conn g;
  g.id = 7;
  g.sandbox = "sb-5";
  g.key = "ANTHROPIC_API_KEY";
  g.target = {"10.0.0.7", 443};
  auto gb = std::get<Conn>(round_trip(g));
  EXPECT_EQ(gb.kind, ConnKind::kGateway);
  EXPECT_EQ(gb.key, "ANTHROPIC_API_KEY");
  EXPECT_EQ(gb.target.host, "10.0.0.7");
  EXPECT_EQ(gb.initial, "");
}

TEST(EdgeMessages, ConnToAnIpv6TargetSurvivesTheRoundTrip) {
  Conn c;
  c.id = 1;
  c.sandbox = "sb-6";
  c.kind = ConnKind::kGateway;
  c.key = "K";
  c.target = {"2001:db8::1", 8443};
  auto back = edge::decode(edge::encode(c));
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(std::get<Conn>(*back).target.host, "2001:db8::1");
  EXPECT_EQ(std::get<Conn>(*back).target.port, 8443);
}

TEST(EdgeMessages, DoneKeepsEveryField) {
  Done d;
  d.id = 9;
  d.status = 403;
  d.outcome = "refused";
  d.bytes_up = 1234;
  d.bytes_down = 5678;
  d.reason = "the placeholder of K is in the path";
  d.error = "reset";
  d.key = "K";
  d.refused = true;
  d.substitutions = 2;
  d.restored = 3;
  auto back = std::get<Done>(round_trip(d));
  EXPECT_EQ(back.id, 9u);
  EXPECT_EQ(back.status, 403);
  EXPECT_EQ(back.outcome, "refused");
  EXPECT_EQ(back.bytes_up, 1234u);
  EXPECT_EQ(back.bytes_down, 5678u);
  EXPECT_EQ(back.reason, d.reason);
  EXPECT_EQ(back.error, "reset");
  EXPECT_EQ(back.key, "K");
  EXPECT_TRUE(back.refused);
  EXPECT_EQ(back.substitutions, 2);
  EXPECT_EQ(back.restored, 3);
}

TEST(EdgeMessages, TextThatIsNotUtf8IsReplacedNotThrown) {
  Done d;
  d.outcome = "completed";
  d.error = "bad \xff byte";
  auto back = std::get<Done>(round_trip(d));
  EXPECT_EQ(back.error, "bad \xEF\xBF\xBD byte");
}

TEST(EdgeMessages, EachDecodeErrorNamesTheField) {
  const std::string creds_ok =
      R"({"key":"K","secret":"s","delivery":"proxy","settings":"{\"hosts\":[\"a.example.com\"]}",)"
      R"("placeholder":"rfph_0123456789a","value":"MDEyMzQ1Njc4OWFiY2RlZg=="})";
  const struct {
    std::string bytes;
    std::string error;
  } cases[] = {
      {"[1,2]", "egress TLS message: message: not a JSON object"},
      {"", "egress TLS message: message: not a JSON object"},
      {R"({"op":"ca")", "egress TLS message: message: not a JSON object"},
      {R"({"sandbox":"s"})", "egress TLS message: op: missing"},
      {R"({"op":7})", "egress TLS message: op: not a string"},
      {R"({"op":"hello"})",
       "egress TLS message: op: \"hello\" is not ca, bind, forget, conn or done"},
      {R"({"op":"ca"})", "egress TLS message: sandbox: missing"},
      {R"({"op":"ca","sandbox":"s","pem":1})", "egress TLS message: pem: not a string"},
      {"{\"op\":\"forget\",\"sandbox\":\"s\"}\nextra",
       "egress TLS message: message: bytes after the JSON"},
      {R"({"op":"bind","sandbox":"s"})", "egress TLS message: creds: not a list"},
      {R"({"op":"bind","sandbox":"s","creds":[1]})", "egress TLS message: creds: not an object"},
      {R"({"op":"bind","sandbox":"s","creds":[{"key":"K"}]})",
       "egress TLS message: delivery: missing"},
      {R"({"op":"bind","sandbox":"s","creds":[)" + creds_ok + "]}", "(decoded)"},
      {R"({"op":"bind","sandbox":"s","creds":[{"key":"","delivery":"proxy","settings":"{}",)"
       R"("placeholder":"p","value":""}]})",
       "egress TLS message: creds.key: empty"},
      {R"({"op":"bind","sandbox":"s","creds":[{"key":"K","delivery":"carrier","settings":"{}",)"
       R"("placeholder":"p","value":""}]})",
       "egress TLS message: creds.delivery: carrier"},
      {R"({"op":"bind","sandbox":"s","creds":[{"key":"K","delivery":"proxy","settings":"{}",)"
       R"("placeholder":"p","value":""}]})",
       "egress TLS message: creds.settings: delivery_json: host: a proxy delivery needs "
       "host=RULE (the bound hosts)"},
      {R"({"op":"bind","sandbox":"s","creds":[{"key":"K","delivery":"proxy",)"
       R"("settings":"{\"hosts\":[\"a.example.com\"]}","placeholder":"rfph_0123456789a",)"
       R"("value":"not base64!"}]})",
       "egress TLS message: creds.value: not base64"},
      {R"({"op":"bind","sandbox":"s","creds":[{"key":"K","delivery":"proxy",)"
       R"("settings":"{\"hosts\":[\"a.example.com\"]}","placeholder":"rfph_0123456789ab",)"
       R"("value":"MDEyMzQ1Njc4OWFiY2RlZg=="}]})",
       "egress TLS message: creds.placeholder: not as long as the value, or shorter than 16 "
       "bytes"},
      {R"({"op":"bind","sandbox":"s","creds":[{"key":"K","delivery":"proxy",)"
       R"("settings":"{\"hosts\":[\"a.example.com\"]}","placeholder":"rfph_012345","value":"MDEy"}]})",
       "egress TLS message: creds.placeholder: not as long as the value, or shorter than 16 "
       "bytes"},
      {R"({"op":"conn","sandbox":"s","kind":"gateway","host":"a.example.com","port":0})",
       "egress TLS message: port: 0"},
      {R"({"op":"conn","sandbox":"s","kind":"gateway","host":"a.example.com"})",
       "egress TLS message: port: 0"},
      {R"({"op":"conn","sandbox":"s","kind":"gateway","host":"a.example.com","port":65536})",
       "egress TLS message: port: 65536"},
      {R"({"op":"conn","sandbox":"s","kind":"gateway","host":"a.example.com","port":"443"})",
       "egress TLS message: port: not a whole number"},
      {R"({"op":"conn","sandbox":"s","kind":"gateway","host":"a.example.com","port":-1})",
       "egress TLS message: port: not a whole number"},
      {R"({"op":"conn","sandbox":"s","kind":"gateway","host":"a.example.com","port":4.5})",
       "egress TLS message: port: not a whole number"},
      {R"({"op":"conn","sandbox":"s","kind":"tunnel","host":"a.example.com","port":443})",
       "egress TLS message: kind: tunnel"},
      {R"({"op":"conn","sandbox":"s","kind":"gateway","port":443})",
       "egress TLS message: host: missing"},
      {R"({"op":"conn","sandbox":"s","kind":"gateway","host":"a.example.com:80","port":443})",
       "egress TLS message: host: not a host name or address"},
      {R"({"op":"conn","sandbox":"s","kind":"gateway","host":"A.example.com","port":443})",
       "egress TLS message: host: not a host name or address"},
      {R"({"op":"conn","sandbox":"s","kind":"gateway","host":"a.example.com","port":443,"id":-2})",
       "egress TLS message: id: not a whole number"},
      {R"({"op":"done","outcome":"completed","status":1000})", "egress TLS message: status: 1000"},
      {R"({"op":"done","outcome":"completed","refused":"yes"})",
       "egress TLS message: refused: not a boolean"},
      {R"({"op":"done"})", "egress TLS message: outcome: missing"},
  };
  for (const auto& c : cases) EXPECT_EQ(decode_error(c.bytes), c.error) << c.bytes;
  EXPECT_EQ(decode_error(std::string(256 * 1024 + 1, ' ')),
            "egress TLS message: message: larger than 256 KiB");
}

}  // namespace
}  // namespace rf::proxy
