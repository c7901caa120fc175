#include "docker_tls/tls_connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "docker_api/socket_connection.h"

namespace rf::docker {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

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

bool is_ip_literal(const std::string& host) {
  unsigned char buf[sizeof(in6_addr)];
  return ::inet_pton(AF_INET, host.c_str(), buf) == 1 ||
         ::inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

}  // namespace

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
    if (!h.ca_file.empty()) {
      if (SSL_CTX_load_verify_locations(ctx, h.ca_file.c_str(), nullptr) != 1) {
        return fail("load " + h.ca_file);
      }
    } else if (h.cert_dir.empty()) {
      if (SSL_CTX_set_default_verify_paths(ctx) != 1) return fail("load the system's CAs");
    } else if (SSL_CTX_load_verify_locations(ctx, (dir + "/ca.pem").c_str(), nullptr) != 1) {
      return fail("load " + dir + "/ca.pem");
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  } else {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
  }
  // The client certificate: optional, as with the docker CLI (a daemon with
  // --tlsverify refuses us without one, and says so in the handshake).
  if (!h.cert_dir.empty() && ::access((dir + "/cert.pem").c_str(), R_OK) == 0) {
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
      return make_error("docker TLS " + h.url, std::string("the server's certificate: ") +
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

}  // namespace rf::docker
