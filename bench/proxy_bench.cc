// rf_proxy_bench: what the egress proxy adds, against the direct connection
// in the same run, all on loopback.
//   latency:    one small HTTP request per connection, direct vs through the
//               proxy (plain HTTP, and CONNECT then the request); p50/p99.
//   throughput: 1 GiB from a TCP source to the client (download) and from the
//               client to a TCP sink (upload), direct vs through a CONNECT
//               tunnel (splice, and read/write for comparison); median of runs.
// Usage: rf_proxy_bench [--iterations N] [--bytes N] [--runs N] [--only latency|throughput]
//                       [--pipe-size N] [--threads N]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "proxy/egress_proxy.h"

using namespace std::chrono;

namespace {

void die(const char* what) {
  std::perror(what);
  std::exit(1);
}

int tcp_listen(uint16_t* port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 512) != 0) {
    die("listen");
  }
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return fd;
}

int tcp_connect(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) die("connect tcp");
  return fd;
}

int unix_connect(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  path.copy(a.sun_path, sizeof a.sun_path - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) die("connect unix");
  return fd;
}

void send_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) die("send");
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// Reads until the blank line that ends a head; returns what was read.
std::string read_head(int fd) {
  std::string out;
  char c;
  while (out.size() < 4 || out.compare(out.size() - 4, 4, "\r\n\r\n") != 0) {
    if (::recv(fd, &c, 1, 0) != 1) die("read head");
    out += c;
  }
  return out;
}

uint64_t drain(int fd, std::vector<char>& buf) {
  uint64_t total = 0;
  for (;;) {
    const ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return total;
    total += static_cast<uint64_t>(n);
  }
}

// A TCP server on 127.0.0.1 serving connections one after another on its own thread.
class Server {
 public:
  explicit Server(std::function<void(int)> serve) : serve_(std::move(serve)) {
    fd_ = tcp_listen(&port_);
    thread_ = std::thread([this] {
      for (;;) {
        const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) return;  // shut down
        int one = 1;
        ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        serve_(c);
        ::close(c);
      }
    });
  }
  ~Server() {
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  uint16_t port() const { return port_; }

 private:
  std::function<void(int)> serve_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
};

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

double median(std::vector<double> v) { return percentile(std::move(v), 0.5); }

constexpr char kResponse[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";

}  // namespace

int main(int argc, char** argv) {
  int iterations = 2000, runs = 3;
  uint64_t bytes = uint64_t{1} << 30;
  std::string only;
  size_t pipe_size = rf::proxy::ProxyOptions{}.pipe_size;
  int threads = 1;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--iterations") && i + 1 < argc) iterations = std::atoi(argv[++i]);
    if (!std::strcmp(argv[i], "--bytes") && i + 1 < argc)
      bytes = std::strtoull(argv[++i], nullptr, 10);
    if (!std::strcmp(argv[i], "--runs") && i + 1 < argc) runs = std::atoi(argv[++i]);
    if (!std::strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
    if (!std::strcmp(argv[i], "--pipe-size") && i + 1 < argc)
      pipe_size = std::strtoull(argv[++i], nullptr, 10);
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) threads = std::atoi(argv[++i]);
  }
  ::signal(SIGPIPE, SIG_IGN);

  // The origins.
  Server http([](int fd) {
    read_head(fd);
    send_all(fd, kResponse, sizeof kResponse - 1);
  });
  std::vector<char> block(1 << 20, 'b');
  Server source([&](int fd) {
    for (uint64_t left = bytes; left > 0;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(left, block.size()));
      send_all(fd, block.data(), n);
      left -= n;
    }
  });
  std::vector<char> sink_buf(1 << 20);
  std::atomic<uint64_t> sunk{0};
  Server sink([&](int fd) { sunk = drain(fd, sink_buf); });

  // Two proxies: splice (the default) and read/write.
  char tmpl[] = "/tmp/rf-proxy-bench-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  std::vector<std::unique_ptr<rf::proxy::EgressProxy>> proxies;
  std::vector<std::string> socks;
  for (bool splice : {true, false}) {
    rf::proxy::ProxyOptions o;
    o.system_dns = false;
    o.resolve_override["bench.test"] = {*rf::net::parse_ip_literal("127.0.0.1")};
    o.splice = splice;
    o.pipe_size = pipe_size;
    o.threads = threads;
    auto p = rf::proxy::EgressProxy::start(o);
    auto policy = rf::net::EgressPolicy::parse({"bench.test:*", "127.0.0.1/32"});
    if (!p || !policy) return 1;
    const std::string sock = dir + (splice ? "/splice.sock" : "/copy.sock");
    if (auto s = (*p)->add_sandbox({"bench", *policy, 64, 0}, sock); !s) {
      std::fprintf(stderr, "%s\n", s.error().to_string().c_str());
      return 1;
    }
    proxies.push_back(std::move(*p));
    socks.push_back(sock);
  }
  const std::string& sock = socks[0];
  std::vector<char> buf(1 << 20);

  if (only.empty() || only == "latency") {
    const std::string direct_req = "GET /x HTTP/1.1\r\nHost: bench.test\r\n\r\n";
    const std::string host = "bench.test:" + std::to_string(http.port());
    const std::string plain_req =
        "GET http://" + host + "/x HTTP/1.1\r\nHost: " + host + "\r\n\r\n";
    const std::string connect_req = "CONNECT " + host + " HTTP/1.1\r\nHost: " + host + "\r\n\r\n";
    auto once = [&](int kind) {
      const auto t0 = steady_clock::now();
      const int fd = kind == 0 ? tcp_connect(http.port()) : unix_connect(sock);
      if (kind == 2) {
        send_all(fd, connect_req.data(), connect_req.size());
        read_head(fd);
      }
      const std::string& req = kind == 1 ? plain_req : direct_req;
      send_all(fd, req.data(), req.size());
      if (drain(fd, buf) != sizeof kResponse - 1) die("short response");
      ::close(fd);
      return duration<double, std::milli>(steady_clock::now() - t0).count();
    };
    std::vector<double> t[3];
    for (int i = 0; i < 100; ++i) {
      for (int k = 0; k < 3; ++k) once(k);
    }
    for (int i = 0; i < iterations; ++i) {
      for (int k = 0; k < 3; ++k) t[k].push_back(once(k));  // interleaved: same load for all
    }
    std::printf("latency: one request per connection, %d iterations each, interleaved\n",
                iterations);
    std::printf("  %-44s %9s %9s\n", "case", "p50 ms", "p99 ms");
    const char* names[3] = {"direct (TCP to the origin)", "via proxy: plain HTTP (absolute URI)",
                            "via proxy: CONNECT, then the request"};
    for (int k = 0; k < 3; ++k) {
      std::printf("  %-44s %9.3f %9.3f\n", names[k], percentile(t[k], 0.5), percentile(t[k], 0.99));
    }
    const double added50 = percentile(t[1], 0.5) - percentile(t[0], 0.5);
    const double added99 = percentile(t[1], 0.99) - percentile(t[0], 0.99);
    const double c50 = percentile(t[2], 0.5) - percentile(t[0], 0.5);
    std::printf(
        "  added by the proxy, plain HTTP: p50 %.3f ms, p99 %.3f ms; CONNECT: p50 %.3f ms\n",
        added50, added99, c50);
    std::printf("  target: p50 added <= 0.2 ms: %s\n", added50 <= 0.2 ? "met" : "NOT met");
  }

  if (only.empty() || only == "throughput") {
    const std::string src = "bench.test:" + std::to_string(source.port());
    const std::string snk = "bench.test:" + std::to_string(sink.port());
    auto tunnel = [&](const std::string& s, const std::string& target) {
      const int fd = unix_connect(s);
      const std::string req = "CONNECT " + target + " HTTP/1.1\r\n\r\n";
      send_all(fd, req.data(), req.size());
      if (read_head(fd).find(" 200 ") == std::string::npos) die("CONNECT refused");
      return fd;
    };
    auto download = [&](int mode) {  // 0 direct, 1 splice, 2 copy
      const auto t0 = steady_clock::now();
      const int fd = mode == 0 ? tcp_connect(source.port()) : tunnel(socks[mode - 1], src);
      const uint64_t got = drain(fd, buf);
      const double s = duration<double>(steady_clock::now() - t0).count();
      ::close(fd);
      if (got != bytes) die("short download");
      return static_cast<double>(bytes) / s / 1e9;
    };
    auto upload = [&](int mode) {
      sunk = 0;
      const auto t0 = steady_clock::now();
      const int fd = mode == 0 ? tcp_connect(sink.port()) : tunnel(socks[mode - 1], snk);
      for (uint64_t left = bytes; left > 0;) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(left, block.size()));
        send_all(fd, block.data(), n);
        left -= n;
      }
      ::shutdown(fd, SHUT_WR);
      drain(fd, buf);  // EOF once the sink has read everything and closed
      const double s = duration<double>(steady_clock::now() - t0).count();
      ::close(fd);
      if (sunk != bytes) die("short upload");
      return static_cast<double>(bytes) / s / 1e9;
    };
    std::vector<double> r[2][3];
    for (int i = 0; i < runs; ++i) {
      for (int m = 0; m < 3; ++m) {
        r[0][m].push_back(download(m));
        r[1][m].push_back(upload(m));
      }
    }
    std::printf("throughput: %.2f GiB per transfer, median of %d runs (GB/s = 1e9 bytes/s)\n",
                static_cast<double>(bytes) / (1 << 30), runs);
    std::printf("  %-40s %10s %10s\n", "case", "download", "upload");
    const char* names[3] = {"direct (TCP)", "via proxy CONNECT tunnel (splice)",
                            "via proxy CONNECT tunnel (read/write)"};
    for (int m = 0; m < 3; ++m) {
      std::printf("  %-40s %10.2f %10.2f\n", names[m], median(r[0][m]), median(r[1][m]));
    }
    const double worst = std::min(median(r[0][1]), median(r[1][1]));
    std::printf("  target: >= 1 GB/s through the proxy: %s (%.2f GB/s the slower way)\n",
                worst >= 1.0 ? "met" : "NOT met", worst);
  }
  proxies.clear();
  ::rmdir(dir.c_str());
  return 0;
}
