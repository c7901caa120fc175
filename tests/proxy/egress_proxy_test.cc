// The egress proxy against real clients (curl, Python's urllib, raw sockets)
// and real servers (python3 http.server over HTTP and HTTPS, small TCP
// servers), all on 127.0.0.1. Names resolve through the proxy's override map:
// allowed.test, rebind.test and multi.test lead to loopback, meta.test to the
// cloud metadata address; system DNS is off, so nothing ever leaves the host.
#include "proxy/egress_proxy.h"

#include <grp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <optional>

#include "proxy/proxy_test_support.h"
#include "proxy/request_head.h"
#include "proxy/responses.h"
#include "support/ci_skip.h"

namespace rf::proxy {
namespace {

using namespace rf::testing;
using namespace std::chrono_literals;

net::IpAddress ip(const char* text) { return *net::parse_ip_literal(text); }

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// The 403 the proxy answers for `reason`, byte for byte.
std::string refusal(const std::string& host, uint16_t port, const std::string& reason) {
  return http_response(403, refusal_body(host, port, reason));
}

std::string bad_request(const std::string& why) {
  return http_response(400, "ringfence egress proxy: bad request: " + why + "\n");
}

class EgressProxyTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    cert_ = *dir_ / "cert.pem";
    const RunResult r =
        run({"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes", "-keyout", *dir_ / "key.pem", "-out", cert_, "-days", "2", "-subj",
             "/CN=allowed.test", "-addext", "subjectAltName=DNS:allowed.test"});
    ASSERT_EQ(r.exit_code, 0) << r.out;
    http_origin_ = new Child({"python3", RF_PROXY_ORIGIN_PY});
    https_origin_ =
        new Child({"python3", RF_PROXY_ORIGIN_PY, "--cert", cert_, "--key", *dir_ / "key.pem"});
    const std::string a = http_origin_->read_line(), b = https_origin_->read_line();
    ASSERT_EQ(a.rfind("port ", 0), 0u) << a;
    ASSERT_EQ(b.rfind("port ", 0), 0u) << b;
    http_port_ = static_cast<uint16_t>(std::stoi(a.substr(5)));
    https_port_ = static_cast<uint16_t>(std::stoi(b.substr(5)));
  }
  static void TearDownTestSuite() {
    delete http_origin_;
    delete https_origin_;
    delete dir_;
  }

  // A proxy with one sandbox, "sb1", listening at sock_.
  void start(const std::vector<std::string>& rules, int max_connections = 64,
             uint64_t max_bytes_sent = 0, const std::function<void(ProxyOptions&)>& tweak = {}) {
    ProxyOptions o;
    o.system_dns = false;
    o.resolve_override = {{"allowed.test", {ip("127.0.0.1")}},
                          {"rebind.test", {ip("127.0.0.1")}},
                          {"meta.test", {ip("169.254.169.254")}},
                          {"multi.test", {ip("169.254.169.254"), ip("127.0.0.1")}}};
    o.on_event = [this](const ConnectionEvent& e) { events_.add(e); };
    o.on_lookup = [this](const std::string& n) { lookups_.add(n); };
    if (tweak) tweak(o);
    auto p = EgressProxy::start(o);
    ASSERT_TRUE(p.ok()) << p.error().to_string();
    proxy_ = std::move(*p);
    sock_ = dir_path("sb1.sock");
    add("sb1", sock_, rules, max_connections, max_bytes_sent);
  }

  void add(const std::string& id, const std::string& path, const std::vector<std::string>& rules,
           int max_connections = 64, uint64_t max_bytes_sent = 0) {
    auto policy = net::EgressPolicy::parse(rules);
    ASSERT_TRUE(policy.ok()) << policy.error().to_string();
    policy_ = *policy;
    auto s = proxy_->add_sandbox({id, std::move(*policy), max_connections, max_bytes_sent}, path);
    ASSERT_TRUE(s.ok()) << s.error().to_string();
  }

  std::string dir_path(const std::string& name) {
    const auto* t = ::testing::UnitTest::GetInstance()->current_test_info();
    return *dir_ / (std::string(t->name()).substr(0, 40) + "-" + name);
  }

  static std::string P(uint16_t port) { return std::to_string(port); }

  static TempDir* dir_;
  static std::string cert_;
  static Child* http_origin_;
  static Child* https_origin_;
  static uint16_t http_port_, https_port_;

  // Declared before proxy_: the proxy reports to them until it is gone.
  EventLog events_;
  LookupLog lookups_;
  net::EgressPolicy policy_;
  std::unique_ptr<EgressProxy> proxy_;
  std::string sock_;
};

TempDir* EgressProxyTest::dir_ = nullptr;
std::string EgressProxyTest::cert_;
Child* EgressProxyTest::http_origin_ = nullptr;
Child* EgressProxyTest::https_origin_ = nullptr;
uint16_t EgressProxyTest::http_port_ = 0;
uint16_t EgressProxyTest::https_port_ = 0;

TEST_F(EgressProxyTest, PlainHttpGoesToTheOriginInOriginFormWithoutHopByHopHeaders) {
  start({"allowed.test:" + P(http_port_), "127.0.0.1/32"});
  const std::string raw = roundtrip(sock_, "GET http://allowed.test:" + P(http_port_) +
                                               "/echo?x=1 HTTP/1.1\r\n"
                                               "Host: wrong.test\r\n"
                                               "User-Agent: t\r\n"
                                               "Proxy-Authorization: Basic Zm9vOmJhcg==\r\n"
                                               "Proxy-Connection: keep-alive\r\n"
                                               "Connection: keep-alive, X-Hop\r\n"
                                               "X-Hop: secret\r\n"
                                               "Keep-Alive: timeout=5\r\n"
                                               "X-Keep: yes\r\n\r\n");
  const HttpAnswer a = parse_answer(raw);
  EXPECT_EQ(a.status, 200) << raw;
  // The origin echoes what it received: origin form, Host from the URI, no
  // hop-by-hop header, Connection: close.
  EXPECT_EQ(a.body, "GET /echo?x=1 HTTP/1.1\nHost: allowed.test:" + P(http_port_) +
                        "\nUser-Agent: t\nX-Keep: yes\nConnection: close\n");

  ASSERT_TRUE(events_.wait_for(1));
  const ConnectionEvent e = events_.last();
  EXPECT_EQ(e.sandbox_id, "sb1");
  EXPECT_EQ(e.protocol, "http");
  EXPECT_EQ(e.host, "allowed.test");
  EXPECT_EQ(e.port, http_port_);
  EXPECT_EQ(e.address, "127.0.0.1");
  EXPECT_TRUE(e.allowed);
  EXPECT_EQ(e.reason, "allowed.test:" + P(http_port_));
  EXPECT_EQ(e.status, 200);
  EXPECT_EQ(e.outcome, Outcome::completed);
  EXPECT_EQ(e.error, "");
  const std::string sent_head = "GET /echo?x=1 HTTP/1.1\r\nHost: allowed.test:" + P(http_port_) +
                                "\r\nUser-Agent: t\r\nX-Keep: yes\r\nConnection: close\r\n\r\n";
  EXPECT_EQ(e.bytes_sent, sent_head.size());
  EXPECT_EQ(e.bytes_received, raw.size());
  EXPECT_GT(e.duration.count(), 0);
  EXPECT_LT(e.duration, std::chrono::microseconds(5s));
  EXPECT_EQ(lookups_.all(), std::vector<std::string>{"allowed.test"});
}

TEST_F(EgressProxyTest, CurlAndPythonReachAllowedOriginsOverHttpAndHttps) {
  start({"allowed.test:" + P(http_port_), "allowed.test:" + P(https_port_), "127.0.0.1/32"});
  TcpFront front(sock_);
  const std::string http_url = "http://allowed.test:" + P(http_port_) + "/plain";
  const std::string https_url = "https://allowed.test:" + P(https_port_) + "/tls";

  RunResult r = run({"curl", "-sS", "--max-time", "10", "--proxy", front.url(), http_url});
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(first_line(r.out), "GET /plain HTTP/1.1");
  EXPECT_NE(r.out.find("Host: allowed.test:" + P(http_port_) + "\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("Proxy-Connection"), std::string::npos) << r.out;

  r = run(
      {"curl", "-sS", "--max-time", "10", "--proxy", front.url(), "--cacert", cert_, https_url});
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(first_line(r.out), "GET /tls HTTP/1.1");

  const std::string py =
      "import ssl, sys, urllib.request as u\n"
      "o = u.build_opener(u.ProxyHandler({'http': sys.argv[1], 'https': sys.argv[1]}),\n"
      "                   u.HTTPSHandler(context=ssl.create_default_context(cafile=sys.argv[2])))\n"
      "for url in sys.argv[3:]:\n"
      "    print(o.open(url, timeout=10).read().decode().splitlines()[0])\n";
  r = run({"python3", "-c", py, front.url(), cert_, http_url, https_url});
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out, "GET /plain HTTP/1.1\nGET /tls HTTP/1.1\n");

  ASSERT_TRUE(events_.wait_for(4));
  std::vector<std::string> protocols;
  for (const auto& e : events_.all()) {
    protocols.push_back(e.protocol);
    EXPECT_TRUE(e.allowed);
    EXPECT_EQ(e.outcome, Outcome::completed) << e.error;
    EXPECT_EQ(e.address, "127.0.0.1");
    EXPECT_GT(e.bytes_sent, 0u);
    EXPECT_GT(e.bytes_received, 0u);
  }
  std::sort(protocols.begin(), protocols.end());
  EXPECT_EQ(protocols, (std::vector<std::string>{"connect", "connect", "http", "http"}));
}

TEST_F(EgressProxyTest, ConnectTunnelCarriesBytesBothWaysAndTheEventCountsThem) {
  TcpServer echo_server(echo);
  start({"allowed.test:" + P(echo_server.port()), "127.0.0.1/32"});
  {
    UniqueFd fd = open_tunnel(sock_, "allowed.test:" + P(echo_server.port()));
    ASSERT_TRUE(fd);
    const std::string data(1000, 'x');
    ASSERT_TRUE(send_all(fd.get(), data));
    std::string back;
    EXPECT_EQ(read_exactly(fd.get(), back, 1000), 1000u);
    EXPECT_EQ(back, data);
    std::this_thread::sleep_for(60ms);
  }
  ASSERT_TRUE(events_.wait_for(1));
  const ConnectionEvent e = events_.last();
  EXPECT_EQ(e.protocol, "connect");
  EXPECT_EQ(e.host, "allowed.test");
  EXPECT_EQ(e.address, "127.0.0.1");
  EXPECT_TRUE(e.allowed);
  EXPECT_EQ(e.status, 200);
  EXPECT_EQ(e.outcome, Outcome::completed);
  EXPECT_EQ(e.bytes_sent, 1000u);
  EXPECT_EQ(e.bytes_received, 1000u);
  EXPECT_GE(e.duration, std::chrono::microseconds(60ms));
  EXPECT_LT(e.duration, std::chrono::microseconds(5s));
}

TEST_F(EgressProxyTest, UnknownNameGets403NamingWhyAndIsNeverLookedUp) {
  start({"allowed.test:" + P(http_port_), "127.0.0.1/32"});
  const std::string connect = roundtrip(sock_, "CONNECT unknown.test:443 HTTP/1.1\r\n\r\n");
  const std::string reason = policy_.check_name({"unknown.test", 443}).reason;
  EXPECT_EQ(connect, refusal("unknown.test", 443, reason));
  EXPECT_EQ(reason,
            "no --allow rule matches unknown.test:443 (to allow it, add --allow unknown.test:443)");
  EXPECT_EQ(parse_answer(connect).head,
            "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\n"
            "Content-Length: " +
                std::to_string(parse_answer(connect).body.size()) +
                "\r\nConnection: close\r\n\r\n");

  const std::string plain = roundtrip(sock_, "GET http://unknown.test/x HTTP/1.1\r\n\r\n");
  EXPECT_EQ(plain, refusal("unknown.test", 80, policy_.check_name({"unknown.test", 80}).reason));

  // The allowed port only: the same name on another port is refused too.
  const std::string other_port = roundtrip(sock_, "CONNECT allowed.test:443 HTTP/1.1\r\n\r\n");
  EXPECT_EQ(other_port,
            refusal("allowed.test", 443, policy_.check_name({"allowed.test", 443}).reason));

  EXPECT_EQ(lookups_.all(), std::vector<std::string>{});  // no query for any of them
  ASSERT_TRUE(events_.wait_for(3));
  for (const auto& e : events_.all()) {
    EXPECT_FALSE(e.allowed);
    EXPECT_EQ(e.status, 403);
    EXPECT_EQ(e.outcome, Outcome::refused);
    EXPECT_EQ(e.address, "");
    EXPECT_EQ(e.bytes_sent, 0u);
    EXPECT_EQ(e.bytes_received, 0u);
    EXPECT_NE(e.reason.find("no --allow rule matches"), std::string::npos);
  }
}

TEST_F(EgressProxyTest, EveryMatchingTrickIsRefusedAtTheProxy) {
  const std::string p = P(http_port_);
  start({"allowed.test:" + p, "127.0.0.1/32"});
  struct Case {
    std::string request;  // request line
    int status;
    std::string host;  // the host the 403 names
  };
  const std::vector<Case> cases = {
      // IP literals in every notation: only a rule naming the address allows
      // one, and 127.0.0.1/32 only covers what an allowed name resolves to.
      {"CONNECT 127.0.0.1:" + p, 403, "127.0.0.1"},
      {"CONNECT 2130706433:" + p, 403, "127.0.0.1"},
      {"CONNECT 0x7f000001:" + p, 403, "127.0.0.1"},
      {"CONNECT 0x7f.1:" + p, 403, "127.0.0.1"},
      {"CONNECT 0177.0.0.1:" + p, 403, "127.0.0.1"},
      {"CONNECT 127.1:" + p, 403, "127.0.0.1"},
      {"CONNECT [::ffff:127.0.0.1]:" + p, 403, "127.0.0.1"},
      {"CONNECT [::ffff:7f00:1]:" + p, 403, "127.0.0.1"},
      {"CONNECT [::1]:" + p, 403, "::1"},
      {"CONNECT 169.254.169.254:80", 403, "169.254.169.254"},
      {"CONNECT 93.184.216.34:443", 403, "93.184.216.34"},
      {"GET http://127.0.0.1:" + p + "/", 403, "127.0.0.1"},
      {"GET http://2130706433:" + p + "/", 403, "127.0.0.1"},
      {"GET http://0x7f.0.0.1:" + p + "/", 403, "127.0.0.1"},
      {"GET http://[::1]:" + p + "/", 403, "::1"},
      {"GET http://[::ffff:127.0.0.1]:" + p + "/", 403, "127.0.0.1"},
      // Names that only look like the allowed one.
      {"CONNECT allowed.test.evil.tld:" + p, 403, "allowed.test.evil.tld"},
      {"CONNECT evilallowed.test:" + p, 403, "evilallowed.test"},
      {"CONNECT xallowed.test:" + p, 403, "xallowed.test"},
      {"CONNECT sub.allowed.test:" + p, 403, "sub.allowed.test"},
      {"GET http://allowed.test.evil.tld:" + p + "/", 403, "allowed.test.evil.tld"},
      {"GET http://evilallowed.test:" + p + "/", 403, "evilallowed.test"},
      {"GET http://evil.test#@allowed.test:" + p + "/", 403, "evil.test"},
      {"GET http://evil.test?@allowed.test:" + p + "/", 403, "evil.test"},
      // Userinfo and bytes no host has: not even a name to refuse.
      {"CONNECT allowed.test@evil.test:" + p, 400, ""},
      {"CONNECT evil.test@allowed.test:" + p, 400, ""},
      {"GET http://allowed.test:" + p + "@evil.test/", 400, ""},
      {"GET http://user:pw@allowed.test:" + p + "/", 400, ""},
      {"GET http://evil.test\\@allowed.test:" + p + "/", 400, ""},
      {"GET http://evil.test\\allowed.test:" + p + "/", 400, ""},
      {"CONNECT allowed.test%2eevil.tld:" + p, 400, ""},
      {"CONNECT allowed.test:" + p + ":" + p, 400, ""},
      {"CONNECT ::1:" + p, 400, ""},
  };
  for (const Case& c : cases) {
    const std::string head = c.request + " HTTP/1.1\r\n\r\n";
    const std::string raw = roundtrip(sock_, head);
    EXPECT_EQ(parse_answer(raw).status, c.status) << c.request << "\n" << raw;
    auto req = parse_proxy_request(head);
    if (c.status == 400) {
      ASSERT_FALSE(req.ok()) << c.request;
      EXPECT_EQ(raw, bad_request(req.error().message)) << c.request;
      continue;
    }
    ASSERT_TRUE(req.ok()) << c.request;
    EXPECT_EQ(req->target.host, c.host) << c.request;
    const net::Verdict v = policy_.check_name(req->target);
    EXPECT_FALSE(v.allowed) << c.request;
    EXPECT_EQ(raw, refusal(c.host, req->target.port, v.reason)) << c.request;
  }
  // Refused before any lookup, every one.
  EXPECT_EQ(lookups_.all(), std::vector<std::string>{});
  ASSERT_TRUE(events_.wait_for(cases.size()));
  for (const auto& e : events_.all()) {
    EXPECT_FALSE(e.allowed);
    EXPECT_EQ(e.address, "");
    EXPECT_TRUE(e.outcome == Outcome::refused || e.outcome == Outcome::bad_request);
  }
  // And the real name still works.
  EXPECT_EQ(
      parse_answer(roundtrip(sock_, "GET http://allowed.test:" + p + "/ HTTP/1.1\r\n\r\n")).status,
      200);
}

TEST_F(EgressProxyTest, RebindingToLoopbackOrMetadataIsRefusedAtConnectTime) {
  const std::string p = P(http_port_);
  start({"rebind.test:" + p, "meta.test:" + p, "meta.test:80"});
  const std::string a = roundtrip(sock_, "CONNECT rebind.test:" + p + " HTTP/1.1\r\n\r\n");
  const net::Verdict va = policy_.check_address("rebind.test", ip("127.0.0.1"), http_port_);
  EXPECT_EQ(a, refusal("rebind.test", http_port_, va.reason));
  EXPECT_NE(va.reason.find("rebind.test resolved to 127.0.0.1, a loopback address"),
            std::string::npos)
      << va.reason;

  const std::string b = roundtrip(sock_, "GET http://meta.test/latest/meta-data/ HTTP/1.1\r\n\r\n");
  const net::Verdict vb = policy_.check_address("meta.test", ip("169.254.169.254"), 80);
  EXPECT_EQ(b, refusal("meta.test", 80, vb.reason));
  EXPECT_NE(vb.reason.find("meta.test resolved to 169.254.169.254, a link-local address"),
            std::string::npos)
      << vb.reason;

  ASSERT_TRUE(events_.wait_for(2));
  for (const auto& e : events_.all()) {
    EXPECT_FALSE(e.allowed);
    EXPECT_EQ(e.status, 403);
    EXPECT_EQ(e.outcome, Outcome::refused);
    EXPECT_EQ(e.address, "");
  }
  EXPECT_EQ(events_.all()[0].reason, va.reason);
  // The names were allowed, so they were resolved; the addresses were not.
  EXPECT_EQ(lookups_.all(), (std::vector<std::string>{"rebind.test", "meta.test"}));
}

TEST_F(EgressProxyTest, AnAllowedAddressAmongRefusedOnesIsTheOneConnectedTo) {
  start({"multi.test:" + P(http_port_), "127.0.0.1/32"});
  const std::string raw =
      roundtrip(sock_, "GET http://multi.test:" + P(http_port_) + "/m HTTP/1.1\r\n\r\n");
  EXPECT_EQ(parse_answer(raw).status, 200) << raw;
  ASSERT_TRUE(events_.wait_for(1));
  EXPECT_EQ(events_.last().address, "127.0.0.1");  // 169.254.169.254 came first, refused
}

TEST_F(EgressProxyTest, MalformedHeadsGet400WithTheReason) {
  start({"allowed.test:" + P(http_port_), "127.0.0.1/32"});
  const std::string a = "GET http://allowed.test/ HTTP/1.1\r\n";
  struct Case {
    std::string bytes;
    std::string why;
  };
  const std::vector<Case> cases = {
      {"GARBAGE\r\n\r\n", "request line is not METHOD TARGET HTTP/1.1: \"GARBAGE\""},
      {"\r\n\r\n", "request line is not METHOD TARGET HTTP/1.1: \"\""},
      {"GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
       "a proxy request needs an absolute URI (http://host/path) or CONNECT host:port, got \"/\""},
      {"GET https://allowed.test/ HTTP/1.1\r\n\r\n",
       "an https:// URI goes through CONNECT host:443, not as a plain request"},
      {"GET ftp://allowed.test/ HTTP/1.1\r\n\r\n", "scheme \"ftp\" is not supported (http is)"},
      {"GET http://allowed.test/ HTTP/2.0\r\n\r\n",
       "unsupported HTTP version \"HTTP/2.0\" (HTTP/1.0 and HTTP/1.1 are)"},
      {"GET  http://allowed.test/ HTTP/1.1\r\n\r\n", "empty request target"},
      {"G(T http://allowed.test/ HTTP/1.1\r\n\r\n", "bad method \"G(T\""},
      {"CONNECT allowed.test HTTP/1.1\r\n\r\n",
       "CONNECT \"allowed.test\": request target \"allowed.test\": no port (expected host:port)"},
      {a + "NoColon\r\n\r\n", "header line without a colon: \"NoColon\""},
      {a + "Bad Name: x\r\n\r\n", "bad header name \"Bad Name\""},
      {a + "X: a\r\n folded\r\n\r\n", "obsolete line folding in header \" folded\""},
      {a + "X: a\rb\r\n\r\n", "a bare CR in the request head"},
      {a + std::string("X: a\0b\r\n\r\n", 10), "control byte in header \"X\""},
      {a + "Host: a\r\nHost: b\r\n\r\n", "more than one Host header"},
      {a + "Content-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
       "both Content-Length and Transfer-Encoding"},
      {a + "Content-Length: 1\r\nContent-Length: 2\r\n\r\n", "conflicting Content-Length headers"},
      {a + "Content-Length: -1\r\n\r\n", "bad Content-Length \"-1\""},
      {a + "X: " + std::string(17000, 'a') + "\r\n\r\n", "request head larger than 16384 bytes"},
      {"GET http://allowed.test/" + std::string(9000, 'a') + " HTTP/1.1\r\n\r\n",
       "request line longer than 8192 bytes"},
      {std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 15),
       "request line is not METHOD TARGET HTTP/1.1: "
       "\"\\x16\\x03\\x01\\x02\\x00\\x01\\x00\\x01\\xfc\\x03\\x03\""},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(roundtrip(sock_, c.bytes), bad_request(c.why)) << c.why;
  }
  ASSERT_TRUE(events_.wait_for(cases.size()));
  for (const auto& e : events_.all()) {
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.outcome, Outcome::bad_request);
    EXPECT_FALSE(e.allowed);
  }
  EXPECT_EQ(lookups_.all(), std::vector<std::string>{});
}

TEST_F(EgressProxyTest, AnIncompleteHeadTimesOutWith408) {
  start({"allowed.test:" + P(http_port_)}, 64, 0,
        [](ProxyOptions& o) { o.head_timeout = std::chrono::milliseconds(200); });
  UniqueFd fd = unix_connect(sock_);
  ASSERT_TRUE(fd);
  send_all(fd.get(), "GET http://allowed.test/ HTTP/1.1\r\nHost: allo");
  const auto t0 = std::chrono::steady_clock::now();
  const std::string raw = read_to_eof(fd.get());
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 150ms);
  EXPECT_EQ(raw, http_response(408, "ringfence egress proxy: no complete request within 200 ms\n"));
  ASSERT_TRUE(events_.wait_for(1));
  EXPECT_EQ(events_.last().outcome, Outcome::head_timeout);
  EXPECT_EQ(events_.last().status, 408);
}

TEST_F(EgressProxyTest, UnreachableOriginsGet502AndSlowOnes504) {
  // A port nobody listens on: bind one, note it, close it.
  uint16_t closed = 0;
  tcp_listen(&closed);
  // A listener whose accept queue is full: SYNs to it are dropped, connect hangs.
  uint16_t full = 0;
  UniqueFd full_fd = tcp_listen(&full, 0);
  std::vector<UniqueFd> fillers;
  for (int i = 0; i < 2; ++i) {
    fillers.emplace_back(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons(full);
    (void)::connect(fillers.back().get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa);
  }
  start({"allowed.test:" + P(closed), "allowed.test:" + P(full), "127.0.0.1/32", "nowhere.test"},
        64, 0, [](ProxyOptions& o) { o.connect_timeout = std::chrono::milliseconds(300); });

  EXPECT_EQ(
      roundtrip(sock_, "CONNECT allowed.test:" + P(closed) + " HTTP/1.1\r\n\r\n"),
      http_response(502, "ringfence egress proxy: cannot reach allowed.test:" + P(closed) +
                             ": connect to 127.0.0.1:" + P(closed) + ": Connection refused\n"));
  EXPECT_EQ(roundtrip(sock_, "GET http://nowhere.test/ HTTP/1.1\r\n\r\n"),
            http_response(502,
                          "ringfence egress proxy: cannot reach nowhere.test:80: nowhere.test "
                          "does not resolve: not in the proxy's resolver overrides, and "
                          "system DNS is off\n"));
  EXPECT_EQ(roundtrip(sock_, "CONNECT allowed.test:" + P(full) + " HTTP/1.1\r\n\r\n"),
            http_response(504, "ringfence egress proxy: timed out reaching allowed.test:" +
                                   P(full) + ": connecting took more than 300 ms\n"));
  ASSERT_TRUE(events_.wait_for(3));
  const auto ev = events_.all();
  EXPECT_EQ(ev[0].outcome, Outcome::upstream_failed);
  EXPECT_EQ(ev[0].status, 502);
  EXPECT_TRUE(ev[0].allowed);
  EXPECT_EQ(ev[0].error, "connect to 127.0.0.1:" + P(closed) + ": Connection refused");
  EXPECT_EQ(ev[1].outcome, Outcome::upstream_failed);
  EXPECT_EQ(ev[2].outcome, Outcome::upstream_timeout);
  EXPECT_EQ(ev[2].status, 504);
}

TEST_F(EgressProxyTest, ConnectionsOverTheCapGet429) {
  TcpServer echo_server(echo);
  const std::string target = "allowed.test:" + P(echo_server.port());
  start({target, "127.0.0.1/32"}, /*max_connections=*/2);
  UniqueFd t1 = open_tunnel(sock_, target);
  UniqueFd t2 = open_tunnel(sock_, target);
  ASSERT_TRUE(t1 && t2);
  EXPECT_EQ(proxy_->stats("sb1")->open_connections, 2);
  const std::string over = roundtrip(sock_, "CONNECT " + target + " HTTP/1.1\r\n\r\n");
  EXPECT_EQ(over, http_response(429, refusal_body("allowed.test", echo_server.port(),
                                                  "sandbox sb1 already has 2 connections open, "
                                                  "the most it may")));
  ASSERT_TRUE(events_.wait_for(1));
  EXPECT_EQ(events_.last().outcome, Outcome::over_capacity);
  EXPECT_EQ(events_.last().status, 429);
  // One closes: there is room again.
  t1.reset();
  ASSERT_TRUE(events_.wait_for(2));
  UniqueFd t3 = open_tunnel(sock_, target);
  EXPECT_TRUE(t3);
}

TEST_F(EgressProxyTest, AnUploadPastTheByteCapIsCutAndReported) {
  std::atomic<size_t> received{0};
  std::atomic<bool> eof{false};
  TcpServer sink([&](int fd) {
    char buf[65536];
    for (;;) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 5000) <= 0) return;
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      received += static_cast<size_t>(n);
    }
    eof = true;
  });
  const std::string target = "allowed.test:" + P(sink.port());
  start({target, "127.0.0.1/32"}, 64, /*max_bytes_sent=*/100000);
  {
    UniqueFd fd = open_tunnel(sock_, target);
    ASSERT_TRUE(fd);
    const std::string chunk(65536, 'u');
    for (int i = 0; i < 16; ++i) {
      if (!send_all(fd.get(), chunk)) break;  // cut under us
    }
    EXPECT_EQ(read_to_eof(fd.get()), "");  // closed by the proxy
  }
  ASSERT_TRUE(events_.wait_for(1));
  const ConnectionEvent e = events_.last();
  EXPECT_EQ(e.outcome, Outcome::byte_cap);
  EXPECT_EQ(e.bytes_sent, 100000u);
  EXPECT_EQ(e.error, "cut: sandbox sb1 reached its cap of 100000 bytes sent");
  EXPECT_EQ(proxy_->stats("sb1")->bytes_sent, 100000u);
  for (int i = 0; i < 500 && !eof; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(eof.load());
  EXPECT_EQ(received.load(), 100000u);  // not a byte more reached the origin

  // The cap is for the sandbox's lifetime: the next connection is refused.
  EXPECT_EQ(roundtrip(sock_, "CONNECT " + target + " HTTP/1.1\r\n\r\n"),
            refusal("allowed.test", sink.port(), "sandbox sb1 has sent 100000 bytes, its cap"));

  // Caps are per sandbox: another one, and curl uploading through it.
  const std::string sock2 = dir_path("sb2.sock");
  add("sb2", sock2, {"allowed.test:" + P(http_port_), "127.0.0.1/32"}, 64, 50000);
  TcpFront front(sock2);
  const std::string file = dir_path("upload");
  { std::ofstream(file) << std::string(300000, 'p'); }
  const RunResult r =
      run({"curl", "-sS", "--max-time", "10", "--proxy", front.url(), "--data-binary", "@" + file,
           "http://allowed.test:" + P(http_port_) + "/upload"});
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out.find("got 300000 bytes"), std::string::npos);
  ASSERT_TRUE(events_.wait_for(3));
  EXPECT_EQ(events_.last().sandbox_id, "sb2");
  EXPECT_EQ(events_.last().outcome, Outcome::byte_cap);
  EXPECT_EQ(events_.last().bytes_sent, 50000u);
}

TEST_F(EgressProxyTest, AnIdleTunnelIsClosed) {
  TcpServer echo_server(echo);
  const std::string target = "allowed.test:" + P(echo_server.port());
  start({target, "127.0.0.1/32"}, 64, 0,
        [](ProxyOptions& o) { o.idle_timeout = std::chrono::milliseconds(200); });
  UniqueFd fd = open_tunnel(sock_, target);
  ASSERT_TRUE(fd);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(read_to_eof(fd.get()), "");
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 150ms);
  ASSERT_TRUE(events_.wait_for(1));
  EXPECT_EQ(events_.last().outcome, Outcome::idle_timeout);
}

TEST_F(EgressProxyTest, RemoveSandboxClosesItsListenerAndItsTunnels) {
  TcpServer echo_server(echo);
  const std::string target = "allowed.test:" + P(echo_server.port());
  start({target, "127.0.0.1/32"});
  UniqueFd fd = open_tunnel(sock_, target);
  ASSERT_TRUE(fd);
  struct stat st {};
  ASSERT_EQ(::lstat(sock_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  proxy_->remove_sandbox("sb1");
  EXPECT_EQ(read_to_eof(fd.get(), 2000ms), "");
  EXPECT_EQ(::lstat(sock_.c_str(), &st), -1);  // the socket file is gone
  EXPECT_FALSE(unix_connect(sock_));
  EXPECT_EQ(proxy_->stats("sb1"), std::nullopt);
  ASSERT_TRUE(events_.wait_for(1));
  EXPECT_EQ(events_.last().outcome, Outcome::closed_by_owner);
}

TEST_F(EgressProxyTest, AStaleSocketIsReplacedAndAnyOtherFileRefused) {
  // A socket file left by a proxy that died: nobody listens on it.
  {
    const std::string stale = dir_path("sb1.sock");
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM, 0));
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    stale.copy(a.sun_path, sizeof a.sun_path - 1);
    ASSERT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  }
  start({"allowed.test"});  // at that same path
  EXPECT_EQ(parse_answer(roundtrip(sock_, "CONNECT evil.test:443 HTTP/1.1\r\n\r\n")).status, 403);

  const std::string file = dir_path("not-a-socket");
  { std::ofstream(file) << "x"; }
  auto policy = net::EgressPolicy::parse({"allowed.test"});
  ASSERT_TRUE(policy.ok());
  const Status s = proxy_->add_sandbox({"sb2", *policy, 64, 0}, file);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().to_string(), file + ": exists and is not a socket");
  const Status dup = proxy_->add_sandbox({"sb1", *policy, 64, 0}, dir_path("dup.sock"));
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.error().to_string(), "egress proxy: sandbox sb1 is already added");
  struct stat st {};
  EXPECT_EQ(::lstat(dir_path("dup.sock").c_str(), &st), -1);
}

// The relay in a sandbox runs as an unprivileged host uid: the socket can be
// given to it, and then it alone (besides root) may connect.
TEST_F(EgressProxyTest, TheSocketCanBeOwnedByTheRelaysUser) {
  if (::geteuid() != 0) RF_SKIP() << "chown needs root";
  start({"allowed.test"});
  ASSERT_EQ(::chmod(dir_->path().c_str(), 0711), 0);  // let others reach the socket's name
  const std::string path = dir_path("owned.sock");
  auto policy = net::EgressPolicy::parse({"allowed.test"});
  ASSERT_TRUE(policy.ok());
  ASSERT_TRUE(proxy_->add_sandbox({"sb2", *policy, 64, 0}, path, SocketOwner{4242, 4343}).ok());
  struct stat st {};
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 4242u);
  EXPECT_EQ(st.st_gid, 4343u);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // Connect as a given uid in a child process; its errno, or 0.
  auto connect_as = [&](uid_t uid) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      if (::setgroups(0, nullptr) != 0 || ::setresgid(uid, uid, uid) != 0 ||
          ::setresuid(uid, uid, uid) != 0) {
        ::_exit(255);
      }
      ::_exit(unix_connect(path) ? 0 : errno);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  EXPECT_EQ(connect_as(4242), 0);
  EXPECT_EQ(connect_as(4244), EACCES);
  ::chmod(dir_->path().c_str(), 0700);
}

TEST_F(EgressProxyTest, Socks5ConnectWithDomainAndAddressTypes) {
  start({"allowed.test:" + P(http_port_), "127.0.0.1/32"});
  TcpFront front(sock_);
  // curl resolving nothing itself (socks5h): the name goes to the proxy.
  const RunResult r = run({"curl", "-sS", "--max-time", "10", "--proxy", front.url("socks5h"),
                           "http://allowed.test:" + P(http_port_) + "/socks"});
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(first_line(r.out), "GET /socks HTTP/1.1");
  ASSERT_TRUE(events_.wait_for(1));
  EXPECT_EQ(events_.last().protocol, "socks5");
  EXPECT_EQ(events_.last().outcome, Outcome::completed);

  auto socks = [&](const std::string& request) {
    UniqueFd fd = unix_connect(sock_);
    send_all(fd.get(), std::string("\x05\x01\x00", 3));
    std::string got;
    read_exactly(fd.get(), got, 2);
    send_all(fd.get(), request);
    return got + read_to_eof(fd.get());
  };
  const std::string port = {static_cast<char>(http_port_ >> 8),
                            static_cast<char>(http_port_ & 0xff)};
  const std::string refused =
      std::string("\x05\x00", 2) + std::string("\x05\x02\x00\x01\0\0\0\0\0\0", 10);
  // A domain no rule allows, an IPv4 and an IPv6 literal: "not allowed by ruleset".
  EXPECT_EQ(socks(std::string("\x05\x01\x00\x03\x0c", 5) + "unknown.test" + port), refused);
  EXPECT_EQ(socks(std::string("\x05\x01\x00\x01\x7f\x00\x00\x01", 8) + port), refused);
  EXPECT_EQ(socks(std::string("\x05\x01\x00\x04", 4) + std::string(15, '\0') + "\x01" + port),
            refused);
  // BIND: command not supported.
  EXPECT_EQ(socks(std::string("\x05\x02\x00\x03\x0c", 5) + "allowed.test" + port),
            std::string("\x05\x00", 2) + std::string("\x05\x07\x00\x01\0\0\0\0\0\0", 10));
  // No acceptable method: 05 FF, closed.
  {
    UniqueFd fd = unix_connect(sock_);
    send_all(fd.get(), std::string("\x05\x01\x02", 3));
    EXPECT_EQ(read_to_eof(fd.get()), std::string("\x05\xff", 2));
  }
  ASSERT_TRUE(events_.wait_for(6));
  const auto ev = events_.all();
  EXPECT_EQ(ev[1].host, "unknown.test");
  EXPECT_EQ(ev[1].outcome, Outcome::refused);
  EXPECT_EQ(ev[2].host, "127.0.0.1");
  EXPECT_EQ(ev[3].host, "::1");
  EXPECT_EQ(ev[4].outcome, Outcome::bad_request);
  EXPECT_EQ(lookups_.all(), std::vector<std::string>{"allowed.test"});
}

TEST_F(EgressProxyTest, ManyConnectionsAtOnceOnTwoThreads) {
  TcpServer echo_server(echo);
  const std::string target = "allowed.test:" + P(echo_server.port());
  start({target, "127.0.0.1/32"}, 64, 0, [](ProxyOptions& o) { o.threads = 2; });
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < 24; ++i) {
    clients.emplace_back([&, i] {
      UniqueFd fd = open_tunnel(sock_, target);
      if (!fd) return;
      const std::string data(10000 + i, static_cast<char>('a' + i));
      std::string back;
      if (send_all(fd.get(), data) && read_exactly(fd.get(), back, data.size()) == data.size() &&
          back == data) {
        ++ok;
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), 24);
  ASSERT_TRUE(events_.wait_for(24));
  for (const auto& e : events_.all()) EXPECT_EQ(e.outcome, Outcome::completed) << e.error;
}

// The proxy in a process of its own, killed in the middle of a download: the
// client's transfer fails, and nothing else can connect (fails closed).
TEST_F(EgressProxyTest, AProxyKilledMidTransferFailsClosed) {
  std::atomic<bool> source_saw_close{false};
  TcpServer source([&](int fd) {
    const std::string chunk(65536, 's');
    while (send_all(fd, chunk)) {
    }
    source_saw_close = true;
  });
  const std::string sock = dir_path("child.sock");
  const std::string target = "allowed.test:" + P(source.port());
  Child proxy({RF_EGRESS_PROXY_PATH, "--socket", sock, "--no-dns", "--allow", target, "--allow",
               "127.0.0.1/32", "--resolve", "allowed.test=127.0.0.1"});
  ASSERT_EQ(proxy.read_line(), "ready");
  TcpFront front(sock);

  UniqueFd fd = open_tunnel(sock, target);
  ASSERT_TRUE(fd);
  std::string got;
  ASSERT_EQ(read_exactly(fd.get(), got, 1 << 20), size_t{1} << 20);
  ASSERT_EQ(::kill(proxy.pid(), SIGKILL), 0);
  EXPECT_EQ(proxy.wait(), 128 + SIGKILL);
  // The client's stream ends (what was in flight drains, then EOF or reset).
  const auto t0 = std::chrono::steady_clock::now();
  std::string rest = read_to_eof(fd.get(), 2000ms);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  EXPECT_LT(rest.size(), size_t{16} << 20);
  // New connections are refused: the socket has no listener.
  errno = 0;
  EXPECT_FALSE(unix_connect(sock));
  EXPECT_EQ(errno, ECONNREFUSED);
  // And a client through the relay sees its request fail, not an open path.
  const RunResult r = run({"curl", "-sS", "--max-time", "5", "--proxy", front.url(),
                           "http://allowed.test:" + P(http_port_) + "/"});
  EXPECT_NE(r.exit_code, 0);
  source.stop();
  EXPECT_TRUE(source_saw_close.load());
}

}  // namespace
}  // namespace rf::proxy
