// Real clients and servers on loopback for the egress proxy tests: child
// processes (curl, python3, the proxy helper), a TCP front that relays to the
// proxy's unix socket the way the sandbox's relay does, small TCP servers
// (echo, sink, source), and raw socket clients. 127.0.0.1 only.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/unique_fd.h"
#include "proxy/connection_event.h"

extern char** environ;

namespace rf::testing {

using namespace std::chrono_literals;

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/rf-proxy-test-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline UniqueFd tcp_listen(uint16_t* port, int backlog = 64) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return {};
  if (::listen(fd.get(), backlog) != 0) return {};
  socklen_t len = sizeof a;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return fd;
}

inline UniqueFd tcp_connect(uint16_t port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return {};
  return fd;
}

// Connects to a unix socket; errno is kept on failure.
inline UniqueFd unix_connect(const std::string& path) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  path.copy(a.sun_path, sizeof a.sun_path - 1);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    const int err = errno;
    fd.reset();
    errno = err;
  }
  return fd;
}

inline bool send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Reads until EOF, an error, or `timeout` without a byte.
inline std::string read_to_eof(int fd, std::chrono::milliseconds timeout = 5000ms) {
  std::string out;
  char buf[65536];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) break;
    const ssize_t n = ::read(fd, buf, sizeof buf);  // sockets and pipes
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// Reads exactly up to and including the first blank line (a response head).
inline std::string read_head(int fd, std::chrono::milliseconds timeout = 5000ms) {
  std::string out;
  while (out.find("\r\n\r\n") == std::string::npos) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) break;
    char c;
    if (::recv(fd, &c, 1, 0) != 1) break;
    out += c;
  }
  return out;
}

inline size_t read_exactly(int fd, std::string& out, size_t n,
                           std::chrono::milliseconds timeout = 5000ms) {
  char buf[65536];
  size_t got = 0;
  while (got < n) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) break;
    const ssize_t r = ::recv(fd, buf, std::min(sizeof buf, n - got), 0);
    if (r <= 0) break;
    out.append(buf, static_cast<size_t>(r));
    got += static_cast<size_t>(r);
  }
  return got;
}

// Sends `request` on a new connection to the proxy's socket, reads the answer to EOF.
inline std::string roundtrip(const std::string& socket_path, std::string_view request) {
  UniqueFd fd = unix_connect(socket_path);
  if (!fd) return "connect failed: " + std::string(std::strerror(errno));
  send_all(fd.get(), request);
  return read_to_eof(fd.get());
}

struct HttpAnswer {
  int status = 0;
  std::string head, body;
};
inline HttpAnswer parse_answer(const std::string& raw) {
  HttpAnswer a;
  const size_t end = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.", 0) != 0 || end == std::string::npos || raw.size() < 12) return a;
  a.status = std::atoi(raw.c_str() + 9);
  a.head = raw.substr(0, end + 4);
  a.body = raw.substr(end + 4);
  return a;
}

// Opens a CONNECT tunnel; returns the socket once "200 Connection established" was read.
inline UniqueFd open_tunnel(const std::string& socket_path, const std::string& authority,
                            std::string* answer = nullptr) {
  UniqueFd fd = unix_connect(socket_path);
  if (!fd) return fd;
  send_all(fd.get(), "CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n\r\n");
  const std::string head = read_head(fd.get());
  if (answer) *answer = head;
  if (head != "HTTP/1.1 200 Connection established\r\n\r\n") return {};
  return fd;
}

// A child process with its stdout (and, with `merge_stderr`, its stderr) on a pipe.
class Child {
 public:
  Child(const std::vector<std::string>& argv, const std::vector<std::string>& env = {},
        bool merge_stderr = false) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) return;
    out_.reset(p[0]);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    if (merge_stderr) posix_spawn_file_actions_adddup2(&fa, p[1], 2);
    std::vector<char*> args, envp;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    if (::posix_spawnp(&pid_, argv[0].c_str(), &fa, nullptr, args.data(),
                       env.empty() ? environ : envp.data()) != 0) {
      pid_ = -1;
    }
    posix_spawn_file_actions_destroy(&fa);
    ::close(p[1]);
  }
  ~Child() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  // One line of stdout, without its newline; "" on EOF or timeout.
  std::string read_line(std::chrono::milliseconds timeout = 10000ms) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (size_t nl = buf_.find('\n'); nl != std::string::npos) {
        std::string line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return line;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd p{out_.get(), POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return "";
      char b[4096];
      const ssize_t n = ::read(out_.get(), b, sizeof b);
      if (n <= 0) return "";
      buf_.append(b, static_cast<size_t>(n));
    }
  }
  // Waits for the exit; the exit code, 128+N for signal N, -1 on timeout (then killed).
  int wait(std::chrono::milliseconds timeout = 30000ms) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    int status = 0;
    for (;;) {
      const pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) break;
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        pid_ = -1;
        return -1;
      }
      std::this_thread::sleep_for(5ms);
    }
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  // The rest of stdout, to EOF.
  std::string read_rest() { return buf_ + read_to_eof(out_.get(), 30000ms); }

 private:
  pid_t pid_ = -1;
  UniqueFd out_;
  std::string buf_;
};

struct RunResult {
  int exit_code = -1;
  std::string out;
};
// Runs a command to its end with a clean environment (PATH only): no
// http_proxy or friends from the test's own environment. `out` has stdout and stderr.
inline RunResult run(const std::vector<std::string>& argv) {
  Child c(argv, {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8"}, true);
  RunResult r;
  r.out = c.read_rest();
  r.exit_code = c.wait();
  return r;
}

// Listens on 127.0.0.1 and relays each connection to the proxy's unix
// socket, as the sandbox's relay does: for clients (curl, Python) that speak
// to an HTTP or SOCKS proxy over TCP only.
class TcpFront {
 public:
  explicit TcpFront(std::string socket_path) : path_(std::move(socket_path)) {
    listen_ = tcp_listen(&port_);
    int p[2];
    (void)::pipe2(p, O_CLOEXEC);
    stop_r_.reset(p[0]);
    stop_w_.reset(p[1]);
    thread_ = std::thread([this] { accept_loop(); });
  }
  ~TcpFront() {
    (void)::write(stop_w_.get(), "x", 1);
    thread_.join();
    for (auto& t : relays_) t.join();
  }
  uint16_t port() const { return port_; }
  std::string url(const std::string& scheme = "http") const {
    return scheme + "://127.0.0.1:" + std::to_string(port_);
  }

 private:
  void accept_loop() {
    for (;;) {
      pollfd p[2] = {{listen_.get(), POLLIN, 0}, {stop_r_.get(), POLLIN, 0}};
      if (::poll(p, 2, -1) < 0) continue;
      if (p[1].revents) return;
      UniqueFd c(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!c) continue;
      relays_.emplace_back([this, c = std::move(c)]() mutable { relay(std::move(c)); });
    }
  }
  void relay(UniqueFd client) {
    UniqueFd up = unix_connect(path_);
    if (!up) return;              // proxy gone: the client sees its connection close
    bool open[2] = {true, true};  // client->up, up->client
    char buf[65536];
    while (open[0] || open[1]) {
      pollfd p[3] = {{client.get(), static_cast<short>(open[0] ? POLLIN : 0), 0},
                     {up.get(), static_cast<short>(open[1] ? POLLIN : 0), 0},
                     {stop_r_.get(), POLLIN, 0}};
      if (::poll(p, 3, -1) < 0) continue;
      if (p[2].revents) return;
      for (int i = 0; i < 2; ++i) {
        if (!open[i] || !(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        const int from = i == 0 ? client.get() : up.get();
        const int to = i == 0 ? up.get() : client.get();
        const ssize_t n = ::recv(from, buf, sizeof buf, 0);
        if (n <= 0 || !send_all(to, std::string_view(buf, static_cast<size_t>(n)))) {
          if (n < 0 || n > 0) return;  // error either way: close both
          open[i] = false;
          ::shutdown(to, SHUT_WR);
        }
      }
    }
  }

  std::string path_;
  uint16_t port_ = 0;
  UniqueFd listen_, stop_r_, stop_w_;
  std::thread thread_;
  std::vector<std::thread> relays_;
};

// A TCP server on 127.0.0.1 that runs `serve` for each connection, one thread each.
class TcpServer {
 public:
  explicit TcpServer(std::function<void(int fd)> serve, int backlog = 64)
      : serve_(std::move(serve)) {
    listen_ = tcp_listen(&port_, backlog);
    int p[2];
    (void)::pipe2(p, O_CLOEXEC);
    stop_r_.reset(p[0]);
    stop_w_.reset(p[1]);
    thread_ = std::thread([this] {
      for (;;) {
        pollfd p[2] = {{listen_.get(), POLLIN, 0}, {stop_r_.get(), POLLIN, 0}};
        if (::poll(p, 2, -1) < 0) continue;
        if (p[1].revents) return;
        int c = ::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) continue;
        ++accepted;
        workers_.emplace_back([this, c] {
          serve_(c);
          ::close(c);
        });
      }
    });
  }
  ~TcpServer() { stop(); }
  void stop() {
    if (!thread_.joinable()) return;
    (void)::write(stop_w_.get(), "x", 1);
    thread_.join();
    for (auto& t : workers_) t.join();
  }
  uint16_t port() const { return port_; }
  std::atomic<int> accepted{0};

 private:
  std::function<void(int)> serve_;
  uint16_t port_ = 0;
  UniqueFd listen_, stop_r_, stop_w_;
  std::thread thread_;
  std::vector<std::thread> workers_;
};

// Echoes what it reads until EOF.
inline void echo(int fd) {
  char buf[65536];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10000) <= 0) return;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0 || !send_all(fd, std::string_view(buf, static_cast<size_t>(n)))) return;
  }
}

// The events of a proxy, as they come.
class EventLog {
 public:
  void add(const proxy::ConnectionEvent& e) {
    std::lock_guard l(mu_);
    events_.push_back(e);
    cv_.notify_all();
  }
  bool wait_for(size_t n, std::chrono::milliseconds timeout = 5000ms) {
    std::unique_lock l(mu_);
    return cv_.wait_for(l, timeout, [&] { return events_.size() >= n; });
  }
  std::vector<proxy::ConnectionEvent> all() {
    std::lock_guard l(mu_);
    return events_;
  }
  proxy::ConnectionEvent last() {
    std::lock_guard l(mu_);
    return events_.empty() ? proxy::ConnectionEvent{} : events_.back();
  }
  size_t size() {
    std::lock_guard l(mu_);
    return events_.size();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<proxy::ConnectionEvent> events_;
};

// The names the proxy looked up.
class LookupLog {
 public:
  void add(const std::string& name) {
    std::lock_guard l(mu_);
    names_.push_back(name);
  }
  std::vector<std::string> all() {
    std::lock_guard l(mu_);
    return names_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> names_;
};

}  // namespace rf::testing
