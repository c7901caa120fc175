// Credentials swapped in at the egress edge (issue 13), against a real HTTPS
// origin (python3 http.server, a test certificate for origin.test) and real
// clients (raw sockets, curl, Python's ssl): the gateway and the proxy
// delivery, through the egress proxy and ringfence-egress-tls. The origin
// records what it received, so each test sees both sides: the origin got the
// value, the client only ever the placeholder.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/base64.h"
#include "net/edge_credential.h"
#include "proxy/egress_proxy.h"
#include "proxy/proxy_test_support.h"
#include "proxy/responses.h"

namespace rf::proxy {
namespace {

using namespace rf::testing;
using namespace std::chrono_literals;
using json = nlohmann::json;

net::IpAddress ip(const char* text) { return *net::parse_ip_literal(text); }

constexpr const char* kGatewayValue = "sk-gateway-REAL-0123456789abcdef";  // 32 bytes
constexpr const char* kProxyValue = "ghp_proxyREAL_0123456789ABCDEFGHIJKLMN";

class EdgeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    cert_ = *dir_ / "cert.pem";
    const RunResult r =
        run({"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes", "-keyout", *dir_ / "key.pem", "-out", cert_, "-days", "2", "-subj",
             "/CN=origin.test", "-addext", "subjectAltName=DNS:origin.test"});
    ASSERT_EQ(r.exit_code, 0) << r.out;
    record_ = *dir_ / "requests.jsonl";
    origin_ = new Child({"python3", RF_PROXY_ORIGIN_PY, "--cert", cert_, "--key", *dir_ / "key.pem",
                         "--record", record_});
    plain_ = new Child({"python3", RF_PROXY_ORIGIN_PY, "--record", record_});
    const std::string a = origin_->read_line(), b = plain_->read_line();
    ASSERT_EQ(a.rfind("port ", 0), 0u) << a;
    ASSERT_EQ(b.rfind("port ", 0), 0u) << b;
    port_ = static_cast<uint16_t>(std::stoi(a.substr(5)));
    plain_port_ = static_cast<uint16_t>(std::stoi(b.substr(5)));
  }
  static void TearDownTestSuite() {
    delete origin_;
    delete plain_;
    delete dir_;
  }

  void SetUp() override {
    ProxyOptions o;
    o.system_dns = false;
    // wrong.test reaches the same origin, whose certificate does not name it.
    o.resolve_override = {{"origin.test", {ip("127.0.0.1")}}, {"wrong.test", {ip("127.0.0.1")}}};
    o.on_event = [this](const ConnectionEvent& e) { events_.add(e); };
    o.edge.helper = RF_EGRESS_TLS_PATH;
    o.edge.ca_file = cert_;
    auto p = EgressProxy::start(o);
    ASSERT_TRUE(p.ok()) << p.error().to_string();
    proxy_ = std::move(*p);
    sock_ = *dir_ / (std::string(::testing::UnitTest::GetInstance()->current_test_info()->name())
                         .substr(0, 40) +
                     ".sock");
    auto policy = net::EgressPolicy::parse({"origin.test:" + P(port_), "wrong.test:" + P(port_),
                                            "127.0.0.1:" + P(plain_port_), "127.0.0.1/32"});
    ASSERT_TRUE(policy.ok()) << policy.error().to_string();
    ASSERT_TRUE(proxy_->add_sandbox({"sb1", std::move(*policy), 64, 0}, sock_).ok());
    auto ca = proxy_->sandbox_ca("sb1");
    ASSERT_TRUE(ca.ok()) << ca.error().to_string();
    sandbox_ca_ = *dir_ / "sandbox-ca.pem";
    std::ofstream(sandbox_ca_) << *ca;
    std::ofstream(record_, std::ios::trunc).close();
  }

  static std::string P(uint16_t port) { return std::to_string(port); }

  net::EdgeCredential gateway(const std::string& options) {
    net::EdgeCredential c;
    c.key = "API_KEY";
    c.secret = "acme-api";
    c.settings = *net::parse_edge_options(net::EdgeDelivery::kGateway, options);
    c.value = kGatewayValue;
    c.placeholder = *net::make_placeholder(c.value.size());
    return c;
  }
  net::EdgeCredential proxied(const std::string& options) {
    net::EdgeCredential c;
    c.key = "GH_TOKEN";
    c.secret = "acme-gh";
    c.settings = *net::parse_edge_options(net::EdgeDelivery::kProxy, options);
    c.value = kProxyValue;
    c.placeholder = *net::make_placeholder(c.value.size());
    return c;
  }
  void bind(std::vector<net::EdgeCredential> creds) {
    creds_ = creds;
    auto s = proxy_->bind_credentials("sb1", std::move(creds), [this](const net::EdgeEvent& e) {
      std::lock_guard lock(mu_);
      edge_events_.push_back(e);
    });
    ASSERT_TRUE(s.ok()) << s.error().to_string();
  }
  // What the origin received, in order.
  std::vector<json> received() {
    std::vector<json> out;
    std::ifstream in(record_);
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) out.push_back(json::parse(line));
    }
    return out;
  }
  static std::string header(const json& request, const std::string& name) {
    for (const auto& h : request["headers"]) {
      std::string n = h[0];
      std::transform(n.begin(), n.end(), n.begin(), ::tolower);
      if (n == name) return h[1];
    }
    return "";
  }
  std::vector<net::EdgeEvent> edge_events() {
    std::lock_guard lock(mu_);
    return edge_events_;
  }
  // curl through the proxy (as a sandbox's client would reach it), trusting
  // the sandbox's CA as the sandbox does.
  RunResult curl(std::vector<std::string> args) {
    TcpFront front(sock_);
    std::vector<std::string> argv{"curl",    "-sS",       "--max-time", "10",
                                  "--proxy", front.url(), "--cacert",   sandbox_ca_};
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv);
  }

  static TempDir* dir_;
  static std::string cert_, record_;
  static Child *origin_, *plain_;
  static uint16_t port_, plain_port_;

  EventLog events_;
  std::mutex mu_;
  std::vector<net::EdgeEvent> edge_events_;
  std::unique_ptr<EgressProxy> proxy_;
  std::string sock_, sandbox_ca_;
  std::vector<net::EdgeCredential> creds_;
};

TempDir* EdgeTest::dir_ = nullptr;
std::string EdgeTest::cert_, EdgeTest::record_;
Child* EdgeTest::origin_ = nullptr;
Child* EdgeTest::plain_ = nullptr;
uint16_t EdgeTest::port_ = 0, EdgeTest::plain_port_ = 0;

TEST_F(EdgeTest, TheGatewaySendsTheRealHeaderOverVerifiedTlsAndTheAnswerHoldsOnlyThePlaceholder) {
  auto gw = gateway("upstream=https://origin.test:" + P(port_) + "/base,header=x-api-key");
  const std::string ph = gw.placeholder;
  bind({gw});
  const std::string raw = roundtrip(sock_,
                                    "GET /.rf/gw/API_KEY/models?limit=2 HTTP/1.1\r\n"
                                    "Host: 127.0.0.1:3128\r\nX-Api-Key: " +
                                        ph + "\r\nConnection: keep-alive\r\n\r\n");
  const HttpAnswer a = parse_answer(raw);
  ASSERT_EQ(a.status, 200) << raw;
  EXPECT_NE(a.head.find("Connection: close"), std::string::npos) << a.head;
  // The origin echoes the headers it got: the value comes back as the placeholder.
  EXPECT_NE(a.body.find("X-Api-Key: " + ph), std::string::npos) << a.body;
  EXPECT_EQ(raw.find(kGatewayValue), std::string::npos);
  const auto got = received();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0]["path"], "/base/models?limit=2");
  EXPECT_EQ(header(got[0], "x-api-key"), kGatewayValue);
  EXPECT_EQ(header(got[0], "host"), "origin.test:" + P(port_));
  // The whole request was in hand: the upstream's connection may serve the next.
  EXPECT_EQ(header(got[0], "connection"), "keep-alive");
  ASSERT_TRUE(events_.wait_for(1));
  const ConnectionEvent e = events_.last();
  EXPECT_EQ(e.credential, "API_KEY");
  EXPECT_EQ(e.delivery, "gateway");
  EXPECT_EQ(e.status, 200);
  EXPECT_EQ(e.substitutions, 1);
  EXPECT_GE(e.restored, 1);
  EXPECT_EQ(e.host, "origin.test");
  EXPECT_EQ(e.error, "");
  EXPECT_EQ(to_json(e).find(kGatewayValue), std::string::npos);
  const auto heard = edge_events();
  ASSERT_EQ(heard.size(), 1u);
  EXPECT_EQ(heard[0].key, "API_KEY");
  EXPECT_EQ(heard[0].secret, "acme-api");
  EXPECT_FALSE(heard[0].refused);
}

// A sandbox's next request to the same upstream goes on the connection the
// last one left open (no TCP or TLS handshake); one whose upstream closed it
// meanwhile goes on a fresh one, unnoticed by the sandbox.
TEST_F(EdgeTest, ASandboxesNextRequestsReuseItsUpstreamConnection) {
  auto gw = gateway("upstream=https://origin.test:" + P(port_) + ",header=x-api-key");
  bind({gw, proxied("host=origin.test:" + P(port_))});
  const std::string get = "GET /.rf/gw/API_KEY/n HTTP/1.1\r\nHost: x\r\n\r\n";
  for (int i = 0; i < 3; ++i) ASSERT_EQ(parse_answer(roundtrip(sock_, get)).status, 200) << i;
  // A POST with a body, and curl through the proxy delivery, on it too.
  const HttpAnswer post = parse_answer(roundtrip(
      sock_, "POST /.rf/gw/API_KEY/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"));
  EXPECT_EQ(post.status, 200);
  EXPECT_EQ(post.body, "hello");
  RunResult r = curl({"https://origin.test:" + P(port_) + "/c"});
  EXPECT_EQ(r.exit_code, 0) << r.out;
  const auto got = received();
  ASSERT_EQ(got.size(), 5u);
  for (const auto& g : got) EXPECT_EQ(g["peer"], got[0]["peer"]) << g.dump();
  // The upstream closes the connection after an answer that did not say so:
  // the next request still gets its answer, on a new connection, kept in turn.
  const auto go = [&](const std::string& path) {
    return parse_answer(
        roundtrip(sock_, "GET /.rf/gw/API_KEY" + path + " HTTP/1.1\r\nHost: x\r\n\r\n"));
  };
  EXPECT_EQ(go("/drop").status, 200);
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(go("/after").status, 200);
  EXPECT_EQ(go("/again").status, 200);
  const auto all = received();
  ASSERT_EQ(all.size(), 8u);
  EXPECT_EQ(all[5]["peer"], got[0]["peer"]);
  EXPECT_NE(all[6]["peer"], got[0]["peer"]);
  EXPECT_EQ(all[7]["peer"], all[6]["peer"]);
}

TEST_F(EdgeTest, TheGatewayStreamsServerSentEventsAsTheyArrive) {
  bind({gateway("upstream=https://origin.test:" + P(port_) + ",header=x-api-key")});
  UniqueFd fd = unix_connect(sock_);
  ASSERT_TRUE(fd);
  const auto t0 = std::chrono::steady_clock::now();
  send_all(fd.get(), "GET /.rf/gw/API_KEY/sse?n=4&gap_ms=400 HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string seen;
  while (seen.find("data: 0\n\n") == std::string::npos) {
    char buf[4096];
    pollfd p{fd.get(), POLLIN, 0};
    ASSERT_GT(::poll(&p, 1, 5000), 0) << seen;
    const ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
    ASSERT_GT(n, 0) << seen;
    seen.append(buf, static_cast<size_t>(n));
  }
  const auto first = std::chrono::steady_clock::now() - t0;
  const std::string rest = read_to_eof(fd.get());
  const auto all = std::chrono::steady_clock::now() - t0;
  EXPECT_NE(rest.find("data: 3\n\n"), std::string::npos) << rest;
  // The first event came while the origin was still writing (1.2 s of gaps).
  EXPECT_LT(first, all - 800ms);
}

TEST_F(EdgeTest, CurlGetsThePlaceholderSwappedInsideTlsTerminatedWithTheSandboxesCa) {
  bind({proxied("host=origin.test:" + P(port_) + ",in=header:authorization,in=query")});
  const std::string ph = creds_[0].placeholder;
  RunResult r = curl({"-H", "Authorization: Bearer " + ph,
                      "https://origin.test:" + P(port_) + "/repos?token=" + ph});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("Authorization: Bearer " + ph), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(kProxyValue), std::string::npos) << r.out;
  const auto got = received();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(header(got[0], "authorization"), std::string("Bearer ") + kProxyValue);
  EXPECT_EQ(got[0]["path"], "/repos?token=" + std::string(kProxyValue));
  ASSERT_TRUE(events_.wait_for(1));
  EXPECT_EQ(events_.last().delivery, "proxy");
  EXPECT_EQ(events_.last().substitutions, 2);
}

TEST_F(EdgeTest, BasicAuthAndAnOptedInBodyAreSwappedAndTheBodyKeepsItsLength) {
  bind({proxied("host=origin.test:" + P(port_) + ",in=basic,in=body")});
  const std::string ph = creds_[0].placeholder;
  const std::string body = "{\"token\":\"" + ph + "\"}";
  RunResult r = curl({"-u", "x-access-token:" + ph, "--data-binary", body,
                      "https://origin.test:" + P(port_) + "/echo"});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  // The echoed body holds the value: it comes back as the placeholder.
  EXPECT_EQ(r.out, body);
  const auto got = received();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0]["body"], "{\"token\":\"" + std::string(kProxyValue) + "\"}");
  EXPECT_EQ(header(got[0], "authorization"),
            "Basic " + base64_encode(std::string("x-access-token:") + kProxyValue));
  EXPECT_EQ(header(got[0], "content-length"), std::to_string(body.size()));
}

TEST_F(EdgeTest, AMisplacedPlaceholderIsRefusedWith403NamingTheKeyAndNothingReachesTheOrigin) {
  auto gh = proxied("host=origin.test:" + P(port_));  // header:authorization and basic
  auto gw = gateway("upstream=https://origin.test:" + P(port_) + ",header=x-api-key");
  bind({gh, gw});
  const std::string url = "https://origin.test:" + P(port_);
  struct Case {
    std::vector<std::string> args;
    std::string place;
  };
  const std::vector<Case> cases = {
      {{url + "/q?token=" + gh.placeholder}, "the query"},
      {{"-H", "X-Token: " + gh.placeholder, url + "/h"}, "header x-token"},
      {{url + "/p/" + gh.placeholder}, "the path"},
      {{"--data-binary", "t=" + gh.placeholder, url + "/echo"}, "the body"},
      // The gateway's placeholder goes nowhere but its gateway.
      {{"-H", "Authorization: Bearer " + gw.placeholder, url + "/g"}, "header authorization"},
      // Plain HTTP: nothing is swapped there.
      {{"-H", "Authorization: Bearer " + gh.placeholder,
        "http://127.0.0.1:" + P(plain_port_) + "/plain"},
       "a plain-HTTP request"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args{"-i"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    RunResult r = curl(args);
    EXPECT_NE(r.out.find("HTTP/1.1 403 Forbidden"), std::string::npos) << c.place << ": " << r.out;
    EXPECT_NE(r.out.find("is in " + c.place), std::string::npos) << c.place << ": " << r.out;
  }
  EXPECT_TRUE(received().empty()) << received().size();
  ASSERT_TRUE(events_.wait_for(cases.size()));
  int refused = 0;
  for (const auto& e : events_.all()) refused += e.placeholder_refused ? 1 : 0;
  EXPECT_EQ(refused, static_cast<int>(cases.size()));
  for (const auto& e : edge_events()) {
    EXPECT_TRUE(e.refused) << e.key;
    EXPECT_NE(e.reason.find("placeholder of"), std::string::npos) << e.reason;
  }
}

TEST_F(EdgeTest, AClientThatInsistsOnHttp2FailsLoudly) {
  bind({proxied("host=origin.test:" + P(port_))});
  TcpFront front(sock_);
  // Python's ssl offering h2 only: the handshake fails, nothing unsubstituted goes out.
  const std::string py =
      "import socket, ssl, sys\n"
      "s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n"
      "s.sendall(b'CONNECT origin.test:' + sys.argv[2].encode() + b' HTTP/1.1\\r\\n\\r\\n')\n"
      "assert s.recv(4096).startswith(b'HTTP/1.1 200')\n"
      "ctx = ssl.create_default_context(cafile=sys.argv[3])\n"
      "ctx.set_alpn_protocols(['h2'])\n"
      "try:\n"
      "    ctx.wrap_socket(s, server_hostname='origin.test')\n"
      "    print('handshake succeeded')\n"
      "except ssl.SSLError as e:\n"
      "    print('failed:', e)\n";
  RunResult r = run({"python3", "-c", py, P(front.port()), P(port_), sandbox_ca_});
  EXPECT_NE(r.out.find("no application protocol"), std::string::npos) << r.out;
  // The prior-knowledge preface in the clear, at the gateway: a 400 that says so.
  bind({gateway("upstream=https://origin.test:" + P(port_) + ",header=x-api-key")});
  const HttpAnswer a = parse_answer(roundtrip(sock_, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"));
  EXPECT_EQ(a.status, 400);
  EXPECT_NE(a.body.find("HTTP/2.0"), std::string::npos) << a.body;
  EXPECT_TRUE(received().empty());
}

TEST_F(EdgeTest, AnUpstreamWhoseCertificateDoesNotNameItFailsWith502) {
  bind({gateway("upstream=https://wrong.test:" + P(port_) + ",header=x-api-key")});
  const HttpAnswer a =
      parse_answer(roundtrip(sock_, "GET /.rf/gw/API_KEY/ HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_EQ(a.status, 502) << a.body;
  EXPECT_NE(a.body.find("certificate verify failed"), std::string::npos) << a.body;
  EXPECT_TRUE(received().empty());
}

TEST_F(EdgeTest, TakenAwayCredentialsApplyFromTheNextRequest) {
  auto gw = gateway("upstream=https://origin.test:" + P(port_) + ",header=x-api-key");
  auto gh = proxied("host=origin.test:" + P(port_));
  bind({gw, gh});
  const std::string get = "GET /.rf/gw/API_KEY/ HTTP/1.1\r\nHost: x\r\n\r\n";
  EXPECT_EQ(parse_answer(roundtrip(sock_, get)).status, 200);
  bind({});
  const HttpAnswer a = parse_answer(roundtrip(sock_, get));
  EXPECT_EQ(a.status, 403);
  EXPECT_NE(a.body.find("no gateway API_KEY in sandbox sb1"), std::string::npos) << a.body;
  // A host no credential binds any more is tunnelled: TLS to the origin itself.
  TcpFront front(sock_);
  RunResult r = run({"curl", "-sS", "--max-time", "10", "--proxy", front.url(), "--cacert", cert_,
                     "https://origin.test:" + P(port_) + "/after"});
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(received().size(), 2u);
}

TEST_F(EdgeTest, AHostNoCredentialBindsIsTunnelledUntouched) {
  bind({proxied("host=other.test")});
  TcpFront front(sock_);
  RunResult r = run({"curl", "-sS", "--max-time", "10", "--proxy", front.url(), "--cacert", cert_,
                     "https://origin.test:" + P(port_) + "/t"});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("GET /t HTTP/1.1"), std::string::npos) << r.out;
  ASSERT_TRUE(events_.wait_for(1));
  EXPECT_TRUE(events_.last().credential.empty());
}

}  // namespace
}  // namespace rf::proxy
