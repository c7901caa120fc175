// Network policy against real sandboxes (issue 4): --network proxy with real
// clients inside (Debian's curl, Python's urllib) reaching real origins on the
// host's 127.0.0.1 (python3 http.server over HTTP and HTTPS) through the
// host-side egress proxy and the runner's bridge; the attacks that must fail;
// --network host. Names resolve only through the proxy's own override map
// (allowed.test, rebind.test -> 127.0.0.1; meta.test -> 169.254.169.254):
// nothing is ever looked up in DNS and nothing leaves the host.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/backends.h"
#include "integration/harness.h"
#include "native/native_backend.h"
#include "proxy/proxy_test_support.h"
#include "worker/worker.h"

namespace rf::testing {
namespace {

using namespace std::chrono_literals;

class Network : public SandboxTest {
 protected:
  static void SetUpTestSuite() {
    SandboxTest::SetUpTestSuite();
    if (::geteuid() != 0) return;
    dir_ = new TempDir();
    // A certificate for allowed.test, so curl verifies the origin for real.
    auto made = rf::testing::run({"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                                  "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj",
                                  "/CN=allowed.test", "-addext", "subjectAltName=DNS:allowed.test",
                                  "-keyout", *dir_ / "key.pem", "-out", *dir_ / "cert.pem"});
    ASSERT_EQ(made.exit_code, 0) << made.out;
    http_ = new Child({"python3", RF_PROXY_ORIGIN_PY});
    https_ = new Child(
        {"python3", RF_PROXY_ORIGIN_PY, "--cert", *dir_ / "cert.pem", "--key", *dir_ / "key.pem"});
    http_port_ = port_of(http_->read_line());
    https_port_ = port_of(https_->read_line());
    ASSERT_GT(http_port_, 0);
    ASSERT_GT(https_port_, 0);
    native::NativeOptions o{RF_RUNNER_PATH, "ringfence-test"};
    o.egress.resolve = {{"allowed.test", {*net::parse_ip_literal("127.0.0.1")}},
                        {"rebind.test", {*net::parse_ip_literal("127.0.0.1")}},
                        {"meta.test", {*net::parse_ip_literal("169.254.169.254")}}};
    auto b = native::make_native_backend(o);
    ASSERT_TRUE(b.ok()) << b.error().to_string();
    net_backend_ = std::move(*b).release();
  }
  static void TearDownTestSuite() {
    delete net_backend_;
    delete http_;
    delete https_;
    delete dir_;
    SandboxTest::TearDownTestSuite();
  }
  static int port_of(const std::string& line) {
    return line.rfind("port ", 0) == 0 ? std::atoi(line.c_str() + 5) : -1;
  }
  static std::string hp(const std::string& host, int port) {
    return host + ":" + std::to_string(port);
  }

  // A sandbox with network proxy and these rules; the origin's certificate at /workspace/cert.pem.
  std::unique_ptr<Sandbox> proxied(std::vector<std::string> allow, Limits limits = {}) {
    SandboxSpec spec;
    spec.network = NetworkPolicy::kProxy;
    spec.allow = std::move(allow);
    spec.limits = limits;
    auto sb = net_backend_->create(spec);
    EXPECT_TRUE(sb.ok()) << sb.error().to_string();
    if (!sb.ok()) return nullptr;
    EXPECT_TRUE((*sb)->write_file("/workspace/cert.pem", slurp(*dir_ / "cert.pem")).ok());
    return std::move(*sb);
  }
  // Both origins by name, and loopback once resolved (the origins live there).
  std::vector<std::string> allowed_origins() const {
    return {hp("allowed.test", http_port_), hp("allowed.test", https_port_), "127.0.0.1/32"};
  }
  // curl through the proxy (HTTP_PROXY from the sandbox's environment); prints
  // the body, then "status N".
  static Out curl(Sandbox& sb, const std::string& url, const std::string& extra = "") {
    return sh(sb, "curl -sS --cacert /workspace/cert.pem " + extra +
                      " -w '\\nstatus %{http_code}' '" + url + "'");
  }
  static Out py(Sandbox& sb, const std::string& code) { return run(sb, {"python3", "-c", code}); }

  static inline TempDir* dir_ = nullptr;
  static inline Child* http_ = nullptr;
  static inline Child* https_ = nullptr;
  static inline int http_port_ = 0, https_port_ = 0;
  static inline Backend* net_backend_ = nullptr;
};

TEST_F(Network, CurlReachesAnAllowedNameOverHttpAndHttps) {
  auto sb = proxied(allowed_origins());
  ASSERT_TRUE(sb);
  Out plain = curl(*sb, "http://" + hp("allowed.test", http_port_) + "/plain");
  EXPECT_EQ(plain.result.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.out.substr(0, 20), "GET /plain HTTP/1.1\n");
  EXPECT_NE(plain.out.find("\nstatus 200"), std::string::npos) << plain.out;
  // TLS end to end: the proxy only tunnels (CONNECT), curl verifies allowed.test's certificate.
  Out tls = curl(*sb, "https://" + hp("allowed.test", https_port_) + "/tls");
  EXPECT_EQ(tls.result.exit_code, 0) << tls.err;
  EXPECT_EQ(tls.out.substr(0, 18), "GET /tls HTTP/1.1\n");
  EXPECT_NE(tls.out.find("\nstatus 200"), std::string::npos) << tls.out;
}

TEST_F(Network, PythonUrllibUsesTheProxyFromTheEnvironment) {
  auto sb = proxied(allowed_origins());
  ASSERT_TRUE(sb);
  Out r = py(*sb, "import urllib.request; print(urllib.request.urlopen('http://" +
                      hp("allowed.test", http_port_) +
                      "/py', timeout=10).read().decode().splitlines()[0])");
  EXPECT_EQ(r.result.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "GET /py HTTP/1.1\n");
  Out env = sh(*sb, "echo $HTTP_PROXY $https_proxy $NO_PROXY");
  EXPECT_EQ(env.out, "http://127.0.0.1:3128 http://127.0.0.1:3128 localhost,127.0.0.1,::1\n");
}

TEST_F(Network, AnyOtherNameGetsA403ThatSaysWhy) {
  auto sb = proxied(allowed_origins());
  ASSERT_TRUE(sb);
  Out r = curl(*sb, "http://evil.test/");
  EXPECT_EQ(r.out,
            "ringfence egress proxy: refused evil.test:80: no --allow rule matches evil.test:80 "
            "(to allow it, "
            "add --allow evil.test:80)\n\nstatus 403");
  // Over TLS the refusal is the CONNECT's answer: curl says so and fails.
  Out tls = curl(*sb, "https://evil.test/");
  EXPECT_EQ(tls.result.exit_code, 56) << tls.err;
  EXPECT_NE(tls.err.find("CONNECT tunnel failed, response 403"), std::string::npos) << tls.err;
}

// Every matching trick of the issue, through the proxy: each is refused with a 403.
// (--noproxy '': NO_PROXY names 127.0.0.1, and curl would go straight to the
// sandbox's own loopback, where nothing listens; see AttackConnectingAroundTheProxyFails.)
TEST_F(Network, AttackMatchingTricksAreRefused) {
  auto sb = proxied(allowed_origins());
  ASSERT_TRUE(sb);
  const std::string port = std::to_string(http_port_);
  for (const std::string& url :
       {"http://allowed.test.evil.tld:" + port + "/", "http://evilallowed.test:" + port + "/",
        "http://127.0.0.1:" + port + "/", "http://2130706433:" + port + "/",
        "http://0x7f000001:" + port + "/", "http://0177.0.0.1:" + port + "/",
        "http://127.1:" + port + "/", "http://[::ffff:127.0.0.1]:" + port + "/",
        "http://allowed.test:" + port + "@evil.test/",
        std::string("http://169.254.169.254/latest/meta-data/")}) {
    Out r = curl(*sb, url, "--noproxy ''");
    EXPECT_NE(r.out.find("\nstatus 403"), std::string::npos) << url << ": " << r.out << r.err;
    EXPECT_EQ(r.out.find("GET /"), std::string::npos) << url << " reached the origin";
  }
}

TEST_F(Network, AttackRebindingToLoopbackOrMetadataIsRefused) {
  // rebind.test is allowed by name but resolves to 127.0.0.1, which no rule allows.
  auto sb = proxied({hp("rebind.test", http_port_), "meta.test"});
  ASSERT_TRUE(sb);
  Out r = curl(*sb, "http://" + hp("rebind.test", http_port_) + "/");
  EXPECT_NE(r.out.find("\nstatus 403"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("127.0.0.1, a loopback address"), std::string::npos) << r.out;
  Out m = curl(*sb, "http://meta.test/latest/meta-data/");
  EXPECT_NE(m.out.find("\nstatus 403"), std::string::npos) << m.out;
  EXPECT_NE(m.out.find("169.254.169.254, a link-local address"), std::string::npos) << m.out;
  // CONNECT to a raw IP is refused too, whatever the port.
  Out raw = curl(*sb, "https://127.0.0.1:" + std::to_string(https_port_) + "/", "-k --noproxy ''");
  EXPECT_EQ(raw.result.exit_code, 56) << raw.err;
}

// Around the proxy: the sandbox has no route and no resolver.
TEST_F(Network, AttackConnectingAroundTheProxyFails) {
  auto sb = proxied(allowed_origins());
  ASSERT_TRUE(sb);
  const std::string script = R"(
import errno, socket
def attempt(f):
    try:
        f(); return 'ok'
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
def tcp(addr, port):
    s = socket.socket(); s.settimeout(5); s.connect((addr, port))
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b'x', ('192.0.2.1', 53))
def icmp():
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)
def raw():
    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
def tcp6():
    s = socket.socket(socket.AF_INET6); s.settimeout(5); s.connect(('2001:db8::1', 80))
def dns():
    try:
        socket.getaddrinfo('example.com', 80); return 'ok'
    except socket.gaierror as e:
        return 'gaierror %d' % e.errno
print('tcp', attempt(lambda: tcp('192.0.2.1', 80)))
print('tcp-origin', attempt(lambda: tcp('127.0.0.1', %PORT%)))
print('tcp6', attempt(tcp6))
print('udp', attempt(udp))
print('icmp', attempt(icmp))
print('raw', attempt(raw))
print('dns', dns())
)";
  std::string code = script;
  code.replace(code.find("%PORT%"), 6, std::to_string(http_port_));
  Out r = py(*sb, code);
  EXPECT_EQ(r.result.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "tcp ENETUNREACH\n"
            "tcp-origin ECONNREFUSED\n"  // 127.0.0.1 inside is the sandbox's own loopback
            "tcp6 ENETUNREACH\n"
            "udp ENETUNREACH\n"
            "icmp EACCES\n"
            "raw EPERM\n"
            "dns gaierror -2\n");  // EAI_NONAME: no resolver, no query sent
}

TEST_F(Network, AttackConnectionsPastTheCapGet429) {
  Limits limits;
  limits.egress_connections = 2;
  auto sb = proxied(allowed_origins(), limits);
  ASSERT_TRUE(sb);
  const std::string code = R"(
import socket
socks = []
for i in range(3):
    s = socket.create_connection(('127.0.0.1', 3128), timeout=10)
    s.sendall(b'CONNECT allowed.test:%PORT% HTTP/1.1\r\nHost: allowed.test\r\n\r\n')
    socks.append(s)
for s in socks:
    print(s.recv(64).split(b'\r\n')[0].decode())
)";
  std::string c = code;
  c.replace(c.find("%PORT%"), 6, std::to_string(http_port_));
  Out r = py(*sb, c);
  EXPECT_EQ(r.out,
            "HTTP/1.1 200 Connection established\nHTTP/1.1 200 Connection established\n"
            "HTTP/1.1 429 Too Many Requests\n")
      << r.err;
}

TEST_F(Network, AttackAnUploadPastTheByteCapIsCut) {
  Limits limits;
  limits.egress_bytes = 64 * 1024;
  auto sb = proxied(allowed_origins(), limits);
  ASSERT_TRUE(sb);
  Out r = sh(
      *sb,
      "head -c 1048576 /dev/zero > /tmp/big && curl -sS -X POST --data-binary @/tmp/big http://" +
          hp("allowed.test", http_port_) + "/up; echo \" exit=$?\"");
  EXPECT_EQ(r.out.find("got 1048576 bytes"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(" exit=0"), std::string::npos) << r.out;
}

TEST_F(Network, NoneHasOnlyLoopbackAndHostSharesTheHostsNetwork) {
  const std::string probe =
      "import socket\ntry:\n  socket.create_connection(('127.0.0.1', " +
      std::to_string(http_port_) +
      "), timeout=5); print('connected')\nexcept OSError as e:\n  print(e.errno)";
  auto none = make();
  ASSERT_TRUE(none);
  EXPECT_EQ(py(*none, probe).out, "111\n");  // ECONNREFUSED: its own loopback
  SandboxSpec host;
  host.network = NetworkPolicy::kHost;
  auto shared = make(host);
  ASSERT_TRUE(shared);
  EXPECT_EQ(py(*shared, probe).out, "connected\n");  // the host's origin, no proxy
  EXPECT_EQ(sh(*shared, "echo $HTTP_PROXY").out, "\n");
}

TEST_F(Network, CliExecWithAllowWorksAndOtherNamesGetTheReason) {
  const std::string port = std::to_string(http_port_);
  auto ok = run_cli({"sandbox", "exec", "--network", "proxy", "--allow", "allowed.test:" + port,
                     "--allow", "127.0.0.1/32", "--proxy-resolve", "allowed.test=127.0.0.1", "--",
                     "curl", "-sS", "http://allowed.test:" + port + "/cli"},
                    "", [] { ::setenv("RINGFENCE_TOOL_RUNNER", RF_RUNNER_PATH, 1); });
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(ok.out.substr(0, 18), "GET /cli HTTP/1.1\n");
  auto refused = run_cli({"sandbox", "exec", "--network", "proxy", "--allow", "allowed.test", "--",
                          "curl", "-sS", "http://other.test/"},
                         "", [] { ::setenv("RINGFENCE_TOOL_RUNNER", RF_RUNNER_PATH, 1); });
  EXPECT_EQ(refused.out,
            "ringfence egress proxy: refused other.test:80: no --allow rule matches other.test:80 "
            "(to allow it, "
            "add --allow other.test:80)\n");
  auto bad = run_cli({"sandbox", "exec", "--allow", "api.example.com", "--", "true"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--allow: rules apply only with network proxy"), std::string::npos)
      << bad.err;
}

// Without --proxy-resolve the CLI's proxy looks names up with getaddrinfo: in
// the static binary, through the /etc/hosts and DNS services built into glibc
// (cli/name_services.h). localhost comes from /etc/hosts; --noproxy '' sends it
// to the proxy all the same.
TEST_F(Network, CliExecResolvesAnAllowedNameFromEtcHosts) {
  const std::string port = std::to_string(http_port_);
  auto r = run_cli(
      {"sandbox", "exec", "--network", "proxy", "--allow", "localhost:" + port, "--allow",
       "127.0.0.1/32", "--", "curl", "-sS", "--noproxy", "", "http://localhost:" + port + "/hosts"},
      "", [] { ::setenv("RINGFENCE_TOOL_RUNNER", RF_RUNNER_PATH, 1); });
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.substr(0, 20), "GET /hosts HTTP/1.1\n");
}

// The worker takes the policy from its settings (flag > config > default).
TEST_F(Network, AWorkerServesCallsWithItsAllowRules) {
  char tmpl[] = "/tmp/rf-net-worker-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string state = tmpl;
  ::setenv("RINGFENCE_TOOL_RUNNER", RF_RUNNER_PATH, 1);
  auto s = worker::default_settings("/nonexistent-home");
  s.state_dir.value = state;
  s.mode.value = worker::SandboxMode::kPerTool;
  s.network.value = NetworkPolicy::kProxy;
  s.allow.value = allowed_origins();
  s.proxy_resolve.value = {"allowed.test=127.0.0.1"};
  auto placement = cli::place_worker(s);
  ASSERT_TRUE(placement.ok()) << placement.error().to_string();
  worker::WorkerOptions o;
  o.settings = s;
  o.concurrency = 2;
  auto w = worker::Worker::start(std::move(o), std::move(*placement));
  ASSERT_TRUE(w.ok()) << w.error().to_string();
  auto client = store::Store::open(worker::store_path(state));
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->ensure_project("acme", store::Environment::development).ok());
  auto call = [&](const std::string& url) {
    store::NewCall c;
    c.project = "acme";
    c.run = "r1";
    c.argv = {"curl", "-sS", url};
    auto id = (*client)->enqueue_call(c);
    EXPECT_TRUE(id.ok());
    const auto end = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < end) {
      auto v = (*client)->call(*id);
      if (v->state == store::CallState::done || v->state == store::CallState::failed) break;
      std::this_thread::sleep_for(10ms);
    }
    std::string out;
    auto chunks = (*client)->output(*id);
    for (const auto& ch : *chunks) out += ch.data;
    return out;
  };
  EXPECT_EQ(call("http://" + hp("allowed.test", http_port_) + "/w").substr(0, 16),
            "GET /w HTTP/1.1\n");
  EXPECT_EQ(call("http://other.test/"),
            "ringfence egress proxy: refused other.test:80: no --allow rule matches other.test:80 "
            "(to allow it, "
            "add --allow other.test:80)\n");
  (*w)->stop();
  std::system(("rm -rf " + state).c_str());
}

}  // namespace
}  // namespace rf::testing
