#include "tls_stream/tls_stream.h"

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace rf::tls {

std::string openssl_errors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    out += (out.empty() ? "" : "; ") + std::string(buf);
  }
  return out.empty() ? "unknown TLS error" : out;
}

void set_timeouts(int fd, std::chrono::milliseconds t) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(t.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((t.count() % 1000) * 1000);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

std::string failure(SSL* ssl, int rc, const char* what) {
  const int e = SSL_get_error(ssl, rc);
  if (e == SSL_ERROR_SYSCALL) {
    ERR_clear_error();
    if (errno == EAGAIN || errno == EWOULDBLOCK) return std::string(what) + ": timed out";
    if (errno == 0) return std::string(what) + ": the peer closed the connection";
    return std::string(what) + ": " + std::strerror(errno);
  }
  if (e == SSL_ERROR_ZERO_RETURN) return std::string(what) + ": the peer closed the connection";
  const long verify = SSL_get_verify_result(ssl);
  if (verify != X509_V_OK) {
    ERR_clear_error();
    return std::string(what) +
           ": certificate verify failed: " + X509_verify_cert_error_string(verify);
  }
  return std::string(what) + ": " + openssl_errors();
}

int select_http11(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
                  unsigned int inlen, void*) {
  for (unsigned int i = 0; i < inlen;) {
    const unsigned int n = in[i];
    if (i + 1 + n > inlen) break;
    if (n == 8 && std::memcmp(in + i + 1, "http/1.1", 8) == 0) {
      *out = in + i + 1;
      *outlen = static_cast<unsigned char>(n);
      return SSL_TLSEXT_ERR_OK;
    }
    i += 1 + n;
  }
  return SSL_TLSEXT_ERR_ALERT_FATAL;
}

Side::~Side() {
  if (ssl_ != nullptr) SSL_free(ssl_);
  if (owns_fd_) ::close(fd_);
}

bool Side::keep() {
  if (owns_fd_) return true;
  const int fd = ::fcntl(fd_, F_DUPFD_CLOEXEC, 3);
  if (fd < 0) return false;
  // The TLS state stays; only the socket it reads and writes is the copy.
  if (ssl_ != nullptr && SSL_set_fd(ssl_, fd) != 1) {
    ::close(fd);
    return false;
  }
  fd_ = fd;
  owns_fd_ = true;
  return true;
}

ssize_t Side::read(char* buf, size_t n, std::string* error) {
  if (ssl_ == nullptr) {
    for (;;) {
      const ssize_t r = ::read(fd_, buf, n);
      if (r >= 0) return r;
      if (errno == EINTR) continue;
      *error = std::string("read: ") + std::strerror(errno);
      return -1;
    }
  }
  ERR_clear_error();
  const int r = SSL_read(ssl_, buf, static_cast<int>(std::min<size_t>(n, 1 << 30)));
  if (r > 0) return r;
  const int e = SSL_get_error(ssl_, r);
  if (e == SSL_ERROR_ZERO_RETURN) return 0;
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
    ERR_clear_error();
    return kAgain;
  }
  if (e == SSL_ERROR_SYSCALL && errno == 0) {
    ERR_clear_error();
    return 0;  // closed without close_notify: the end, as HTTP/1.x with framing allows
  }
  *error = failure(ssl_, r, "TLS read");
  return -1;
}

ssize_t Side::read_some(char* buf, size_t n, std::string* error) {
  for (;;) {
    const ssize_t r = read(buf, n, error);
    if (r != kAgain) return r;
  }
}

bool Side::write_all(std::string_view data, std::string* error) {
  while (!data.empty()) {
    if (ssl_ == nullptr) {
      const ssize_t w = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (w < 0) {
        if (errno == EINTR) continue;
        *error = std::string("write: ") + std::strerror(errno);
        return false;
      }
      data.remove_prefix(static_cast<size_t>(w));
      continue;
    }
    ERR_clear_error();
    const int w =
        SSL_write(ssl_, data.data(), static_cast<int>(std::min<size_t>(data.size(), 1 << 20)));
    if (w <= 0) {
      *error = failure(ssl_, w, "TLS write");
      return false;
    }
    data.remove_prefix(static_cast<size_t>(w));
  }
  return true;
}

void Side::close_write() {
  if (write_closed_) return;
  write_closed_ = true;
  if (ssl_ != nullptr) {
    ERR_clear_error();
    SSL_shutdown(ssl_);
    ERR_clear_error();
  }
  ::shutdown(fd_, SHUT_WR);
}

}  // namespace rf::tls
