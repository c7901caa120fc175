// rf_edge_bench: credentials swapped in at the egress edge (issue 13).
//  1. Per request, on loopback, the same small HTTPS exchange with an origin
//     of the bench's own (OpenSSL, TLS 1.3, a fresh connection each time):
//       tunnel   CONNECT, then TLS to the origin and the request: the peer, a
//                plain CONNECT tunnel through the same egress proxy;
//       gateway  a plain-HTTP request to /.rf/gw/KEY/...: ringfence-egress-tls
//                swaps the header and opens verified TLS to the origin;
//       proxy    CONNECT, TLS terminated with the sandbox's CA, the
//                placeholder swapped, verified TLS on to the origin.
//     Rounds interleave the three, so they share the machine's noise. The
//     origin keeps connections alive, as an API's servers do: the tunnel's
//     clients close theirs (a fresh one each time, as separate tool calls
//     make), the helper keeps its own to the origin for the sandbox's next
//     request. The bar: gateway and proxy add at most 0.5 ms p50 over the
//     tunnel.
//  2. Revocation (with --revocation): a real worker (per_run, native,
//     network proxy) runs a call that asks the gateway in a loop, timing
//     each request with $EPOCHREALTIME; `secret revoke` is run mid-loop; the
//     latency is from its return to the start of the first request refused
//     (bar: 100 ms).
//
//   build/bench/rf_edge_bench [--iterations N] [--revocation [--repeat R]]
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.h"
#include "net/edge_credential.h"
#include "proxy/egress_proxy.h"

using namespace rf;
using Clock = std::chrono::steady_clock;

namespace {

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "rf_edge_bench: %s\n", what.c_str());
  ERR_print_errors_fp(stderr);
  std::exit(1);
}

void row(const char* what, const bench::Stats& s) {
  std::printf("  %-58s p50 %8.1f us  p99 %8.1f us  mean %8.1f us\n", what, s.p50, s.p99, s.mean);
}

int run(const std::string& cmd) { return std::system(cmd.c_str()); }

// The bench's origin: TLS 1.3, a short answer, then the connection closes.
class Origin {
 public:
  // `keep_alive`: requests on one connection until the client closes it, as
  // an API's servers do; false: every connection closes after its answer. A
  // thread per connection, as many as clients keep open.
  Origin(const std::string& cert, const std::string& key, bool keep_alive = true)
      : keep_alive_(keep_alive) {
    ctx_ = SSL_CTX_new(TLS_server_method());
    if (SSL_CTX_use_certificate_chain_file(ctx_, cert.c_str()) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx_, key.c_str(), SSL_FILETYPE_PEM) != 1) {
      die("origin certificate");
    }
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 512) != 0) {
      die("origin listen");
    }
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~Origin() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    acceptor_.join();
    {
      std::lock_guard lock(mu_);
      for (int c : open_) ::shutdown(c, SHUT_RDWR);
    }
    for (auto& t : served_) t.join();
    ::close(fd_);
    SSL_CTX_free(ctx_);
  }
  uint16_t port() const { return port_; }

 private:
  void accept_loop() {
    while (!stop_) {
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      std::lock_guard lock(mu_);
      open_.insert(c);
      served_.emplace_back([this, c] { serve(c); });
    }
  }
  void serve(int c) {
    int one = 1;
    ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    SSL* ssl = SSL_new(ctx_);
    SSL_set_fd(ssl, c);
    if (SSL_accept(ssl) == 1) {
      std::string buf;
      char chunk[4096];
      for (bool open = true; open;) {
        size_t end;
        while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
          const int n = SSL_read(ssl, chunk, sizeof chunk);
          if (n <= 0) {
            open = false;
            break;
          }
          buf.append(chunk, static_cast<size_t>(n));
        }
        if (!open) break;
        std::string head = buf.substr(0, end);
        buf.erase(0, end + 4);
        for (char& ch : head) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        open = keep_alive_ && head.find("connection: close") == std::string::npos;
        const std::string answer = std::string("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n") +
                                   (open ? "" : "Connection: close\r\n") + "\r\nok";
        SSL_write(ssl, answer.data(), static_cast<int>(answer.size()));
      }
      SSL_shutdown(ssl);
    }
    ERR_clear_error();
    SSL_free(ssl);
    std::lock_guard lock(mu_);
    open_.erase(c);
    ::close(c);
  }
  const bool keep_alive_;
  SSL_CTX* ctx_;
  int fd_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  std::mutex mu_;
  std::set<int> open_;
  std::vector<std::thread> served_;
};

int unix_connect(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  path.copy(a.sun_path, sizeof a.sun_path - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) die("connect " + path);
  return fd;
}

void send_all(int fd, const std::string& s) {
  if (::send(fd, s.data(), s.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(s.size())) die("send");
}

std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

// CONNECT through the proxy; the tunnel once "200" came back.
int connect_through(const std::string& sock, const std::string& authority) {
  const int fd = unix_connect(sock);
  send_all(fd, "CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n\r\n");
  std::string head;
  char c;
  while (head.find("\r\n\r\n") == std::string::npos && ::read(fd, &c, 1) == 1) head += c;
  if (head.rfind("HTTP/1.1 200", 0) != 0) die("CONNECT answered: " + head);
  return fd;
}

// TLS over `fd` (a full handshake), one request, the answer to its end.
std::string https_exchange(SSL_CTX* ctx, int fd, const std::string& host,
                           const std::string& request) {
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, fd);
  SSL_set_tlsext_host_name(ssl, host.c_str());
  SSL_set1_host(ssl, host.c_str());
  if (SSL_connect(ssl) != 1) {
    die("TLS to " + host + ": " + X509_verify_cert_error_string(SSL_get_verify_result(ssl)));
  }
  SSL_write(ssl, request.data(), static_cast<int>(request.size()));
  std::string out;
  char buf[4096];
  for (;;) {
    const int n = SSL_read(ssl, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ERR_clear_error();
  SSL_free(ssl);
  return out;
}

SSL_CTX* client_ctx(const std::string& ca_file) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_TICKET);
  static const unsigned char kAlpn[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  SSL_CTX_set_alpn_protos(ctx, kAlpn, sizeof kAlpn);
  if (SSL_CTX_load_verify_locations(ctx, ca_file.c_str(), nullptr) != 1) die("CA " + ca_file);
  return ctx;
}

net::EdgeCredential credential(const std::string& key, net::EdgeDelivery d,
                               const std::string& options, const std::string& value) {
  net::EdgeCredential c;
  c.key = key;
  c.secret = key;
  auto s = net::parse_edge_options(d, options);
  if (!s) die(s.error().to_string());
  c.settings = *s;
  c.value = value;
  c.placeholder = *net::make_placeholder(value.size());
  return c;
}

void make_cert(const std::string& dir) {
  const std::string cert = dir + "/cert.pem", key = dir + "/key.pem";
  if (run("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout " +
          key + " -out " + cert +
          " -days 2 -subj /CN=origin.test -addext subjectAltName=DNS:origin.test,DNS:tunnel.test "
          "2>/dev/null") != 0) {
    die("openssl req");
  }
}

int per_request(const std::string& dir, int n, bool keep_alive) {
  const std::string cert = dir + "/cert.pem", key = dir + "/key.pem";
  Origin origin(cert, key, keep_alive);
  const std::string port = std::to_string(origin.port());
  proxy::ProxyOptions o;
  o.system_dns = false;
  // tunnel.test: the same origin under a name no credential binds (the peer).
  o.resolve_override = {{"origin.test", {*net::parse_ip_literal("127.0.0.1")}},
                        {"tunnel.test", {*net::parse_ip_literal("127.0.0.1")}}};
  o.edge.helper = RF_EGRESS_TLS_PATH;
  o.edge.ca_file = cert;
  if (std::getenv("RF_EDGE_BENCH_EVENTS")) {
    o.on_event = [](const proxy::ConnectionEvent& e) {
      std::fprintf(stderr, "%s\n", proxy::to_json(e).c_str());
    };
  }
  auto px = proxy::EgressProxy::start(o);
  if (!px) die(px.error().to_string());
  const std::string sock = dir + (keep_alive ? "/sb-kept.sock" : "/sb-closed.sock");
  auto policy =
      net::EgressPolicy::parse({"origin.test:" + port, "tunnel.test:" + port, "127.0.0.1/32"});
  if (!(*px)->add_sandbox({"sb", std::move(*policy), 64, 0}, sock)) die("add sandbox");
  auto ca = (*px)->sandbox_ca("sb");
  if (!ca) die(ca.error().to_string());
  std::ofstream(dir + "/sandbox-ca.pem") << *ca;
  const std::string value = "sk-bench-0123456789abcdefghijklmnopqrstuv";
  auto gw = credential("API_KEY", net::EdgeDelivery::kGateway,
                       "upstream=https://origin.test:" + port + ",header=x-api-key", value);
  auto gh = credential("GH_TOKEN", net::EdgeDelivery::kProxy, "host=origin.test:" + port, value);
  const std::string gw_ph = gw.placeholder, gh_ph = gh.placeholder;
  if (!(*px)->bind_credentials("sb", {gw, gh}, nullptr)) die("bind");
  SSL_CTX* to_origin = client_ctx(cert);
  SSL_CTX* to_edge = client_ctx(dir + "/sandbox-ca.pem");
  const std::string authority = "origin.test:" + port;

  auto tunnel = [&] {
    const int fd = connect_through(sock, "tunnel.test:" + port);
    const std::string a =
        https_exchange(to_origin, fd, "tunnel.test",
                       "GET /x HTTP/1.1\r\nHost: tunnel.test:" + port +
                           "\r\nAuthorization: Bearer " + value + "\r\nConnection: close\r\n\r\n");
    ::close(fd);
    return a;
  };
  auto gateway = [&] {
    const int fd = unix_connect(sock);
    send_all(fd, "GET /.rf/gw/API_KEY/x HTTP/1.1\r\nHost: 127.0.0.1:3128\r\nX-Api-Key: " + gw_ph +
                     "\r\n\r\n");
    const std::string a = read_all(fd);
    ::close(fd);
    return a;
  };
  auto proxied = [&] {
    const int fd = connect_through(sock, authority);
    const std::string a =
        https_exchange(to_edge, fd, "origin.test",
                       "GET /x HTTP/1.1\r\nHost: " + authority + "\r\nAuthorization: Bearer " +
                           gh_ph + "\r\nConnection: close\r\n\r\n");
    ::close(fd);
    return a;
  };
  // Warm up (the helper starts with the first need; sessions, caches), and check.
  for (int i = 0; i < 20; ++i) {
    for (const std::string& a : {tunnel(), gateway(), proxied()}) {
      if (a.rfind("HTTP/1.1 200", 0) != 0) die("an exchange failed: " + a);
    }
  }
  std::vector<double> t_tunnel, t_gateway, t_proxy;
  auto time = [](auto& f, std::vector<double>& into) {
    const auto t0 = Clock::now();
    f();
    into.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  };
  for (int i = 0; i < n; ++i) {
    time(tunnel, t_tunnel);
    time(gateway, t_gateway);
    time(proxied, t_proxy);
  }
  const auto st = bench::summarise(t_tunnel), sg = bench::summarise(t_gateway),
             sp = bench::summarise(t_proxy);
  std::printf("Per request (%d), loopback, the client's connection fresh each time; %s\n", n,
              keep_alive ? "the origin keeps connections alive (the helper reuses its own)"
                         : "the origin closes every connection (nothing is reused upstream)");
  row("tunnel: CONNECT + TLS to the origin (the peer)", st);
  row("gateway: plain HTTP, header swapped, verified TLS upstream", sg);
  row("proxy: CONNECT, TLS with the sandbox's CA, swapped, TLS on", sp);
  std::printf("  added over the tunnel at p50: gateway %+.1f us, proxy %+.1f us (bar: +500 us)\n",
              sg.p50 - st.p50, sp.p50 - st.p50);
  SSL_CTX_free(to_origin);
  SSL_CTX_free(to_edge);
  return 0;
}

// ---- 2. Revocation through a real worker

int run_cli(const std::vector<std::string>& args, std::string* out, const std::string& in = "") {
  return bench::run_cli(RF_CLI_PATH, args, out, in);
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

int revocation(const std::string& dir, int repeat) {
  const std::string cert = dir + "/cert.pem", key = dir + "/key.pem";
  Origin origin(cert, key);
  const std::string port = std::to_string(origin.port());
  const std::string state = dir + "/state";
  std::string out;
  std::vector<std::string> wargs = {RF_CLI_PATH,
                                    "--log-level",
                                    "info",
                                    "worker",
                                    "start",
                                    "--state-dir",
                                    state,
                                    "--sandbox-mode",
                                    "per_run",
                                    "--sandbox-network",
                                    "proxy",
                                    "--sandbox-allow",
                                    "origin.test:" + port + ",127.0.0.1/32",
                                    "--proxy-resolve",
                                    "origin.test=127.0.0.1",
                                    "--egress-ca-file",
                                    cert};
  if (run_cli({"secret", "set", "bench-key", "--state-dir", state}, &out,
              "sk-bench-0123456789abcdefghij") != 0 ||
      run_cli({"identity", "profile", "set", "acme", "--level", "project", "--project", "acme",
               "API_KEY=gateway:bench-key,upstream=https://origin.test:" + port +
                   ",header=x-api-key,base_env=API_URL",
               "--state-dir", state},
              &out) != 0) {
    die("setting up the secret and profile failed");
  }
  const pid_t worker = bench::start_background(wargs, dir + "/worker.log");
  if (worker < 0) die("worker");
  std::vector<double> latencies;
  for (int r = 0; r < repeat; ++r) {
    if (run_cli({"secret", "set", "bench-key", "--state-dir", state}, &out,
                "sk-bench-0123456789abcdefghij") != 0) {
      die("secret set");
    }
    // Requests back to back, each line "START CODE", for 3 s.
    const std::string loop =
        "end=$(( ${EPOCHSECONDS} + 3 )); while [ ${EPOCHSECONDS} -lt $end ]; do "
        "s=$EPOCHREALTIME; c=$(curl -s -o /dev/null -w '%{http_code}' -H \"x-api-key: $API_KEY\" "
        "\"$API_URL/x\"); echo $s $c; done";
    std::string text;
    std::thread caller([&] {
      run_cli(
          {"call", "--state-dir", state, "--project", "acme", "--run", "rev" + std::to_string(r),
           "--identity", "--timeout", "60s", "--", "/bin/bash", "-c", loop},
          &text);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    if (run_cli({"secret", "revoke", "bench-key", "--state-dir", state}, &out) != 0) die("revoke");
    const double revoked = now_s();
    caller.join();
    std::istringstream lines(text);
    double first_refused = 0;
    int ok = 0;
    for (std::string l; std::getline(lines, l);) {
      std::istringstream f(l);
      double s = 0;
      std::string code;
      f >> s >> code;
      if (code == "200") ++ok;
      if (code == "403" && s >= revoked && first_refused == 0) first_refused = s;
      if (code == "200" && s > revoked + 0.1) {
        std::fprintf(stderr, "a request %0.1f ms after the revocation got 200\n",
                     (s - revoked) * 1e3);
      }
    }
    if (ok == 0 || first_refused == 0) {
      ::kill(worker, SIGTERM);
      ::waitpid(worker, nullptr, 0);
      std::ifstream log(dir + "/worker.log");
      std::stringstream ss;
      ss << log.rdbuf();
      die("no 200 before or no 403 after the revocation: " + text + "\nworker log:\n" + ss.str());
    }
    latencies.push_back((first_refused - revoked) * 1e6);
  }
  ::kill(worker, SIGTERM);
  ::waitpid(worker, nullptr, 0);
  std::printf("Revocation of a gateway secret, through a real worker (%d times)\n", repeat);
  row("from `secret revoke` returning to the first request refused", bench::summarise(latencies));
  std::printf("  worst %.1f ms (bar: 100 ms)\n",
              *std::max_element(latencies.begin(), latencies.end()) / 1e3);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int n = 300, repeat = 10;
  bool revoke = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--iterations" && i + 1 < argc) {
      n = std::atoi(argv[++i]);
    } else if (a == "--repeat" && i + 1 < argc) {
      repeat = std::atoi(argv[++i]);
    } else if (a == "--revocation") {
      revoke = true;
    } else {
      std::fprintf(stderr, "usage: rf_edge_bench [--iterations N] [--revocation [--repeat R]]\n");
      return 2;
    }
  }
  ::signal(SIGPIPE, SIG_IGN);
  char tmpl[] = "/tmp/rf-edge-bench-XXXXXX";
  if (!::mkdtemp(tmpl)) die("mkdtemp");
  const std::string dir = tmpl;
  make_cert(dir);
  int rc = n > 0 ? per_request(dir, n, /*keep_alive=*/true) : 0;
  if (rc == 0 && n > 0) rc = per_request(dir, n, /*keep_alive=*/false);
  if (rc == 0 && revoke) rc = revocation(dir, repeat);
  std::filesystem::remove_all(dir);
  return rc;
}
