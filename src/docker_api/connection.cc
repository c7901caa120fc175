#include "docker_api/connection.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "core/unique_fd.h"

extern char** environ;

namespace rf::docker {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// Waits for `events` on fd; 0 ms means forever. ETIMEDOUT when the time ran out
// (EINTR does not restart the clock).
Status wait_fd(int fd, short events, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    int wait_ms = -1;
    if (timeout.count() > 0) {
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
      wait_ms = static_cast<int>(std::clamp<int64_t>(left.count(), 0, 1 << 30));
    }
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, wait_ms);
    if (r > 0) return ok_status();
    if (r == 0) return sys_error("docker connection: wait", ETIMEDOUT);
    if (errno != EINTR) return sys_error("docker connection: poll");
  }
}

Status set_nonblocking(int fd, bool on) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0) return sys_error("fcntl");
  if (::fcntl(fd, F_SETFL, on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK) != 0) {
    return sys_error("fcntl");
  }
  return ok_status();
}

// A non-blocking connect bounded by `timeout`; the socket is blocking again after.
Status connect_with_timeout(int fd, const sockaddr* addr, socklen_t len, milliseconds timeout,
                            const std::string& what) {
  RF_TRY(set_nonblocking(fd, true));
  if (::connect(fd, addr, len) != 0) {
    if (errno != EINPROGRESS) return sys_error("connect " + what);
    if (auto s = wait_fd(fd, POLLOUT, timeout); !s) return sys_error("connect " + what, ETIMEDOUT);
    int err = 0;
    socklen_t elen = sizeof err;
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0) return sys_error("getsockopt");
    if (err != 0) return sys_error("connect " + what, err);
  }
  return set_nonblocking(fd, false);
}

// A unix socket's connect waits (when the listener's backlog is full) for at
// most SO_SNDTIMEO; a non-blocking one would fail with EAGAIN at once instead.
Status connect_unix_with_timeout(int fd, const sockaddr_un& addr, milliseconds timeout,
                                 const std::string& what) {
  timeval tv{};
  if (timeout.count() > 0) {
    tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
    tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  }
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  int rc;
  do {
    rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) return sys_error("connect " + what, errno == EAGAIN ? ETIMEDOUT : errno);
  const timeval none{};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof none);
  return ok_status();
}

// Blocks SIGPIPE in this thread while OpenSSL writes to a socket (it uses
// write(2), not send(MSG_NOSIGNAL)); a SIGPIPE raised meanwhile is consumed.
class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigemptyset(&pending);
    ::sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    ::pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeGuard() {
    if (!was_pending_) {
      sigset_t pending;
      sigemptyset(&pending);
      ::sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        const timespec zero{0, 0};
        while (::sigtimedwait(&pipe_, nullptr, &zero) < 0 && errno == EINTR) {
        }
      }
    }
    ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t pipe_{};
  sigset_t old_{};
  bool was_pending_ = false;
};

// A plain socket (unix or TCP), or our end of the socketpair to ssh. One
// reader and one writer may use it at the same time (attach streams do).
class FdConnection : public Connection {
 public:
  explicit FdConnection(UniqueFd fd) : fd_(std::move(fd)) {}
  Result<size_t> read_some(char* buf, size_t n, milliseconds timeout) override {
    for (;;) {
      RF_TRY(wait_fd(fd_.get(), POLLIN, timeout));
      const ssize_t r = ::recv(fd_.get(), buf, n, MSG_DONTWAIT);
      if (r >= 0) return static_cast<size_t>(r);
      if (errno == EINTR || errno == EAGAIN) continue;
      return sys_error("docker connection: read");
    }
  }
  Status write_all(std::string_view data) override {
    while (!data.empty()) {
      const ssize_t r = ::send(fd_.get(), data.data(), data.size(), MSG_NOSIGNAL);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return sys_error("docker connection: write");
      data.remove_prefix(static_cast<size_t>(r));
    }
    return ok_status();
  }
  Status shutdown_write() override {
    if (::shutdown(fd_.get(), SHUT_WR) != 0 && errno != ENOTCONN) {
      return sys_error("docker connection: shutdown");
    }
    return ok_status();
  }
  bool has_buffered() const override { return false; }
  int fd() const override { return fd_.get(); }

 protected:
  UniqueFd fd_;
};

// ssh: the socket is our end of a socketpair whose other end is ssh's stdin
// and stdout. What ssh says on stderr (a pipe, drained as we go so ssh never
// blocks on it) becomes the error when the stream ends before the daemon
// said anything, or when a write fails: "Permission denied (publickey)".
class SshConnection : public FdConnection {
 public:
  SshConnection(UniqueFd fd, pid_t pid, UniqueFd err, std::string host)
      : FdConnection(std::move(fd)), pid_(pid), err_(std::move(err)), host_(std::move(host)) {}
  ~SshConnection() override {
    fd_.reset();  // dial-stdio and ssh see EOF
    ::kill(pid_, SIGTERM);
    // Reaped here, always: SIGKILL if it has not gone within 2 s.
    for (int i = 0; i < 200; ++i) {
      const pid_t r = ::waitpid(pid_, nullptr, WNOHANG);
      if (r == pid_ || (r < 0 && errno != EINTR)) return;
      std::this_thread::sleep_for(milliseconds(10));
    }
    ::kill(pid_, SIGKILL);
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  Result<size_t> read_some(char* buf, size_t n, milliseconds timeout) override {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      int err_fd = -1;
      {
        std::lock_guard lock(err_mu_);
        if (!err_eof_) err_fd = err_.get();
      }
      pollfd p[2] = {{fd_.get(), POLLIN, 0}, {err_fd, POLLIN, 0}};
      int wait_ms = -1;
      if (timeout.count() > 0) {
        const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
        wait_ms = static_cast<int>(std::clamp<int64_t>(left.count(), 0, 1 << 30));
      }
      const int r = ::poll(p, err_fd >= 0 ? 2 : 1, wait_ms);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return sys_error("docker connection: poll");
      if (r == 0) return with_ssh_words(sys_error("docker connection: wait", ETIMEDOUT));
      if (p[1].revents != 0) drain_stderr();
      if (p[0].revents == 0) continue;
      const ssize_t got = ::recv(fd_.get(), buf, n, MSG_DONTWAIT);
      if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (got < 0) return with_ssh_words(sys_error("docker connection: read"));
      if (got > 0) {
        got_any_ = true;
        return static_cast<size_t>(got);
      }
      // EOF. Before any byte came from the daemon, it is ssh failing.
      if (!got_any_) {
        drain_stderr(/*wait_for_eof=*/true);
        const std::string why = ssh_said();
        if (!why.empty()) return make_error("ssh " + host_, why);
      }
      return size_t{0};
    }
  }
  Status write_all(std::string_view data) override {
    auto s = FdConnection::write_all(data);
    if (!s) {
      drain_stderr(/*wait_for_eof=*/true);
      return with_ssh_words(s.take_error());
    }
    return s;
  }

 private:
  // The error as ssh explains it, when it said something ("ssh h: Permission
  // denied (publickey).: Broken pipe"); the errno stays for the caller.
  Error with_ssh_words(Error e) {
    const std::string why = ssh_said();
    if (why.empty()) return e;
    Error out = make_error("ssh " + host_, why);
    out.sys_errno = e.sys_errno;
    return out;
  }
  // Reads what ssh wrote on stderr so far (at most 200 ms more when it is
  // going away anyway); keeps the last 4 KiB.
  void drain_stderr(bool wait_for_eof = false) {
    std::lock_guard lock(err_mu_);
    if (err_eof_) return;
    const auto until = Clock::now() + milliseconds(wait_for_eof ? 200 : 0);
    char buf[4096];
    for (;;) {
      const ssize_t n = ::read(err_.get(), buf, sizeof buf);
      if (n > 0) {
        err_text_.append(buf, static_cast<size_t>(n));
        if (err_text_.size() > 4096) err_text_.erase(0, err_text_.size() - 4096);
        continue;
      }
      if (n == 0) {
        err_eof_ = true;  // ssh is gone: its stderr is complete
        return;
      }
      if (errno == EINTR) continue;
      if (errno != EAGAIN || Clock::now() >= until) return;
      pollfd p{err_.get(), POLLIN, 0};
      ::poll(&p, 1, 20);
    }
  }
  // The last non-empty line ssh wrote on stderr.
  std::string ssh_said() {
    std::lock_guard lock(err_mu_);
    std::string text = err_text_;
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    const auto nl = text.rfind('\n');
    std::string line = nl == std::string::npos ? text : text.substr(nl + 1);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return line;
  }

  pid_t pid_;
  std::mutex err_mu_;
  UniqueFd err_;  // non-blocking read end of ssh's stderr, open until we go
  bool err_eof_ = false;
  std::string err_text_;
  std::string host_;
  bool got_any_ = false;
};

std::string ssl_error_text() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "failed";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

// TLS over a non-blocking TCP socket. OpenSSL calls on one SSL object must
// not overlap, so they run under a mutex, and the waits happen outside it:
// a reader blocked for data does not stop a writer (attach streams need both).
class TlsConnection : public Connection {
 public:
  TlsConnection(UniqueFd fd, SSL_CTX* ctx, SSL* ssl) : fd_(std::move(fd)), ctx_(ctx), ssl_(ssl) {}
  ~TlsConnection() override {
    SSL_free(ssl_);
    SSL_CTX_free(ctx_);
  }
  Result<size_t> read_some(char* buf, size_t n, milliseconds timeout) override {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      int r = 0, e = 0, err = 0;
      std::string text;
      {
        std::lock_guard lock(mu_);
        SigpipeGuard no_sigpipe;
        ERR_clear_error();
        r = SSL_read(ssl_, buf, static_cast<int>(std::min<size_t>(n, 1 << 30)));
        err = errno;
        if (r <= 0) {
          e = SSL_get_error(ssl_, r);
          if (e == SSL_ERROR_SSL) text = ssl_error_text();
          if (e == SSL_ERROR_SYSCALL && ERR_peek_error() != 0) {
            text = ssl_error_text();
            e = SSL_ERROR_SSL;
          }
        }
      }
      if (r > 0) return static_cast<size_t>(r);
      if (e == SSL_ERROR_ZERO_RETURN) return size_t{0};
      if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        milliseconds left{0};
        if (timeout.count() > 0) {
          left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
          if (left.count() <= 0) return sys_error("docker TLS: read", ETIMEDOUT);
        }
        RF_TRY(wait_fd(fd_.get(), e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, left));
        continue;
      }
      if (e == SSL_ERROR_SYSCALL) {
        // An EOF without close_notify (daemons do that) is still the end.
        if (r == 0 || err == 0) return size_t{0};
        return sys_error("docker TLS: read", err);
      }
      return make_error("docker TLS: read", text);
    }
  }
  Status write_all(std::string_view data) override {
    while (!data.empty()) {
      int r = 0, e = 0, err = 0;
      std::string text;
      {
        std::lock_guard lock(mu_);
        SigpipeGuard no_sigpipe;
        ERR_clear_error();
        r = SSL_write(ssl_, data.data(), static_cast<int>(std::min<size_t>(data.size(), 1 << 30)));
        err = errno;
        if (r <= 0) {
          e = SSL_get_error(ssl_, r);
          if (e == SSL_ERROR_SSL || ERR_peek_error() != 0) text = ssl_error_text();
        }
      }
      if (r > 0) {
        data.remove_prefix(static_cast<size_t>(r));
        continue;
      }
      if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) {
        RF_TRY(wait_fd(fd_.get(), e == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN, milliseconds{0}));
        continue;
      }
      if (e == SSL_ERROR_SYSCALL && text.empty()) {
        return sys_error("docker TLS: write", err != 0 ? err : EPIPE);
      }
      return make_error("docker TLS: write", text.empty() ? "failed" : text);
    }
    return ok_status();
  }
  // TLS has no half-close: SSL_shutdown would send close_notify, after which
  // the daemon may not answer. Everything written is already on the socket
  // (write_all returns when OpenSSL handed the last record to the kernel), so
  // the TCP write side is shut, which the daemon reads as the end of stdin.
  // The limitation: the daemon sees a TLS stream without close_notify.
  Status shutdown_write() override {
    if (::shutdown(fd_.get(), SHUT_WR) != 0 && errno != ENOTCONN) {
      return sys_error("docker TLS: shutdown");
    }
    return ok_status();
  }
  bool has_buffered() const override {
    std::lock_guard lock(mu_);
    return SSL_pending(ssl_) > 0;
  }
  int fd() const override { return fd_.get(); }

 private:
  UniqueFd fd_;
  SSL_CTX* ctx_;
  SSL* ssl_;
  mutable std::mutex mu_;
};

class PrefixConnection : public Connection {
 public:
  PrefixConnection(std::unique_ptr<Connection> inner, std::string prefix)
      : inner_(std::move(inner)), prefix_(std::move(prefix)) {}
  Result<size_t> read_some(char* buf, size_t n, milliseconds timeout) override {
    if (off_ < prefix_.size()) {
      const size_t k = std::min(n, prefix_.size() - off_);
      std::memcpy(buf, prefix_.data() + off_, k);
      off_ += k;
      if (off_ == prefix_.size()) {
        std::string().swap(prefix_);
        off_ = 0;
      }
      return k;
    }
    return inner_->read_some(buf, n, timeout);
  }
  Status write_all(std::string_view data) override { return inner_->write_all(data); }
  Status shutdown_write() override { return inner_->shutdown_write(); }
  bool has_buffered() const override { return off_ < prefix_.size() || inner_->has_buffered(); }
  int fd() const override { return inner_->fd(); }

 private:
  std::unique_ptr<Connection> inner_;
  std::string prefix_;
  size_t off_ = 0;
};

Result<UniqueFd> connect_unix(const DockerHost& h, milliseconds timeout) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return sys_error("socket");
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (h.path.size() >= sizeof addr.sun_path) return make_error(h.url, "socket path too long");
  std::memcpy(addr.sun_path, h.path.c_str(), h.path.size() + 1);
  RF_TRY(connect_unix_with_timeout(fd.get(), addr, timeout, h.path));
  return fd;
}

std::string host_port_text(const DockerHost& h) {
  const bool v6 = h.host.find(':') != std::string::npos;
  return (v6 ? "[" + h.host + "]" : h.host) + ":" + std::to_string(h.port);
}

Result<UniqueFd> connect_tcp(const DockerHost& h, milliseconds timeout) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | AI_ADDRCONFIG;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(h.port);
  int rc = ::getaddrinfo(h.host.c_str(), port.c_str(), &hints, &res);
  if (rc == EAI_NONAME || rc == EAI_ADDRFAMILY) {  // AI_ADDRCONFIG hides ::1 without a v6 route
    hints.ai_flags = AI_NUMERICSERV;
    rc = ::getaddrinfo(h.host.c_str(), port.c_str(), &hints, &res);
  }
  if (rc != 0) {
    return make_error("resolve " + h.host,
                      rc == EAI_SYSTEM ? std::string(std::strerror(errno)) : ::gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> guard(res, ::freeaddrinfo);
  const std::string what = host_port_text(h);
  Error last = make_error("connect " + what, "no address");
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    UniqueFd fd(::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) {
      last = sys_error("socket");
      continue;
    }
    auto s = connect_with_timeout(fd.get(), a->ai_addr, a->ai_addrlen, timeout, what);
    if (!s) {
      last = s.take_error();
      continue;
    }
    const int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ::setsockopt(fd.get(), SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    return fd;
  }
  return last;
}

bool is_ip_literal(const std::string& host) {
  unsigned char buf[sizeof(in6_addr)];
  return ::inet_pton(AF_INET, host.c_str(), buf) == 1 ||
         ::inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

Result<std::unique_ptr<Connection>> wrap_tls(UniqueFd fd, const DockerHost& h,
                                             milliseconds timeout) {
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) return make_error("docker TLS " + h.url, "SSL_CTX_new: " + ssl_error_text());
  std::unique_ptr<SSL_CTX, void (*)(SSL_CTX*)> ctx_guard(ctx, SSL_CTX_free);
  auto fail = [&](const std::string& what) -> Error {
    return make_error("docker TLS " + h.url, what + ": " + ssl_error_text());
  };
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
#ifdef SSL_OP_IGNORE_UNEXPECTED_EOF
  // A daemon that closes without close_notify has still ended the stream (an
  // EOF, not an error, as with OpenSSL 1.1). Truncation is still caught one
  // layer up: HTTP bodies have a length or chunks, attach frames a length.
  SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
#endif
  const std::string dir = h.cert_dir.empty() ? "." : h.cert_dir;
  if (h.tls_verify) {
    if (SSL_CTX_load_verify_locations(ctx, (dir + "/ca.pem").c_str(), nullptr) != 1) {
      return fail("load " + dir + "/ca.pem");
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  } else {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
  }
  // The client certificate: optional, as with the docker CLI (a daemon with
  // --tlsverify refuses us without one, and says so in the handshake).
  if (::access((dir + "/cert.pem").c_str(), R_OK) == 0) {
    if (SSL_CTX_use_certificate_chain_file(ctx, (dir + "/cert.pem").c_str()) != 1) {
      return fail("load " + dir + "/cert.pem");
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, (dir + "/key.pem").c_str(), SSL_FILETYPE_PEM) != 1) {
      return fail("load " + dir + "/key.pem");
    }
    if (SSL_CTX_check_private_key(ctx) != 1) return fail(dir + "/key.pem does not match cert.pem");
  }
  SSL* ssl = SSL_new(ctx);
  if (ssl == nullptr) return fail("SSL_new");
  std::unique_ptr<SSL, void (*)(SSL*)> ssl_guard(ssl, SSL_free);
  SSL_set_fd(ssl, fd.get());
  const bool ip = is_ip_literal(h.host);
  if (!ip) SSL_set_tlsext_host_name(ssl, h.host.c_str());  // SNI takes names only
  if (h.tls_verify) {
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    const int ok = ip ? X509_VERIFY_PARAM_set1_ip_asc(param, h.host.c_str())
                      : X509_VERIFY_PARAM_set1_host(param, h.host.c_str(), 0);
    if (ok != 1) return fail("set the name to verify");
  }
  RF_TRY(set_nonblocking(fd.get(), true));
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    SigpipeGuard no_sigpipe;
    ERR_clear_error();
    const int r = SSL_connect(ssl);
    if (r == 1) break;
    const int e = SSL_get_error(ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
      auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
      if (timeout.count() > 0 && left.count() <= 0) {
        return make_error("docker TLS " + h.url, "handshake: timed out");
      }
      if (timeout.count() <= 0) left = milliseconds{0};
      auto w = wait_fd(fd.get(), e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, left);
      if (!w) return make_error("docker TLS " + h.url, "handshake: timed out");
      continue;
    }
    const long verify = SSL_get_verify_result(ssl);
    if (verify != X509_V_OK) {
      return make_error("docker TLS " + h.url, std::string("the daemon's certificate: ") +
                                                   X509_verify_cert_error_string(verify));
    }
    if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) {
      return make_error("docker TLS " + h.url, "handshake: the daemon closed the connection");
    }
    return fail("handshake");
  }
  ctx_guard.release();
  ssl_guard.release();
  return std::unique_ptr<Connection>(std::make_unique<TlsConnection>(std::move(fd), ctx, ssl));
}

std::vector<std::string> split_words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

Result<std::unique_ptr<Connection>> spawn_ssh(const DockerHost& h, milliseconds timeout) {
  const int64_t connect_s = timeout.count() > 0 ? (timeout.count() + 999) / 1000 : 30;
  std::vector<std::string> args = {"ssh", "-o", "BatchMode=yes", "-o",
                                   "ConnectTimeout=" + std::to_string(connect_s)};
  if (h.port != 0) {
    args.push_back("-p");
    args.push_back(std::to_string(h.port));
  }
  if (!h.user.empty()) {
    args.push_back("-l");
    args.push_back(h.user);
  }
  if (const char* extra = std::getenv("RINGFENCE_SSH_OPTIONS")) {
    for (auto& w : split_words(extra)) args.push_back(std::move(w));
  }
  args.push_back("--");  // the host is never taken for an option
  args.push_back(h.host);
  args.push_back("docker");
  args.push_back("system");
  args.push_back("dial-stdio");

  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return sys_error("socketpair");
  UniqueFd ours(sv[0]), theirs(sv[1]);
  int ep[2];
  if (::pipe2(ep, O_CLOEXEC | O_NONBLOCK) != 0) return sys_error("pipe2");
  UniqueFd err_read(ep[0]), err_write(ep[1]);
  // ssh's stderr blocks like any stderr; only our read end is non-blocking.
  RF_TRY(set_nonblocking(err_write.get(), false));

  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  // posix_spawn (vfork-like, safe in a threaded process): stdin and stdout are
  // the socket, stderr the pipe; every other fd of ours is CLOEXEC. A new
  // session (no controlling terminal to prompt on), default signals, empty mask.
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_adddup2(&fa, theirs.get(), 0);
  posix_spawn_file_actions_adddup2(&fa, theirs.get(), 1);
  posix_spawn_file_actions_adddup2(&fa, err_write.get(), 2);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGCHLD}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSID);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, "ssh", &fa, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return sys_error("docker " + h.url + ": run ssh", rc);
  return std::unique_ptr<Connection>(
      std::make_unique<SshConnection>(std::move(ours), pid, std::move(err_read), h.host));
}

}  // namespace

Result<std::unique_ptr<Connection>> open_connection(const DockerHost& host, milliseconds timeout) {
  switch (host.kind) {
    case DockerHost::Kind::kUnix: {
      auto fd = connect_unix(host, timeout);
      if (!fd) return fd.take_error();
      return std::unique_ptr<Connection>(std::make_unique<FdConnection>(std::move(*fd)));
    }
    case DockerHost::Kind::kTcp: {
      auto fd = connect_tcp(host, timeout);
      if (!fd) return fd.take_error();
      if (host.tls) return wrap_tls(std::move(*fd), host, timeout);
      return std::unique_ptr<Connection>(std::make_unique<FdConnection>(std::move(*fd)));
    }
    case DockerHost::Kind::kSsh:
      return spawn_ssh(host, timeout);
  }
  return make_error(host.url, "unknown kind");
}

std::unique_ptr<Connection> with_prefix(std::unique_ptr<Connection> inner, std::string prefix) {
  if (prefix.empty()) return inner;
  return std::make_unique<PrefixConnection>(std::move(inner), std::move(prefix));
}

}  // namespace rf::docker
