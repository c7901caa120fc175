#include "serve_tls/front.h"

#include <openssl/err.h>
#include <openssl/x509.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

#include "tls_stream/tls_stream.h"

namespace rf::serve_tls {
namespace {

std::atomic<int> g_open{0};

Result<UniqueFd> connect_unix(const std::string& path) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return sys_error("socket");
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (path.size() >= sizeof sa.sun_path) return make_error(path, "path too long");
  std::memcpy(sa.sun_path, path.c_str(), path.size());
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0)
    return sys_error("connect " + path);
  return fd;
}

}  // namespace

Result<Front> Front::make(FrontOptions options) {
  Front f(std::move(options));
  f.ctx_ = SSL_CTX_new(TLS_server_method());
  if (f.ctx_ == nullptr) return make_error("TLS", tls::openssl_errors());
  SSL_CTX_set_min_proto_version(f.ctx_, TLS1_2_VERSION);
  SSL_CTX_set_alpn_select_cb(f.ctx_, &tls::select_http11, nullptr);
  if (SSL_CTX_use_certificate_chain_file(f.ctx_, f.options_.cert_file.c_str()) != 1)
    return make_error("--tls-cert " + f.options_.cert_file, tls::openssl_errors());
  if (SSL_CTX_use_PrivateKey_file(f.ctx_, f.options_.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    const bool mismatch = ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH;
    const std::string why = tls::openssl_errors();
    if (mismatch) {
      return make_error("--tls-key " + f.options_.key_file,
                        "is not the key of --tls-cert " + f.options_.cert_file + " (" + why + ")");
    }
    return make_error("--tls-key " + f.options_.key_file, why);
  }
  if (SSL_CTX_check_private_key(f.ctx_) != 1) {
    return make_error("--tls-key " + f.options_.key_file, "is not the key of --tls-cert " +
                                                              f.options_.cert_file + " (" +
                                                              tls::openssl_errors() + ")");
  }
  return f;
}

Front::Front(Front&& o) noexcept : options_(std::move(o.options_)), ctx_(o.ctx_) {
  o.ctx_ = nullptr;
}

Front::~Front() {
  if (ctx_ != nullptr) SSL_CTX_free(ctx_);
}

void Front::serve(int listener, int stop_fd) {
  for (;;) {
    pollfd fds[2] = {{listener, POLLIN, 0}, {stop_fd, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      std::perror("ringfence-serve-tls: poll");
      return;
    }
    if (fds[1].revents != 0) return;  // serve is gone
    if (fds[0].revents == 0) continue;
    UniqueFd c(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
    if (!c) {
      if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED || errno == EMFILE ||
          errno == ENFILE)
        continue;
      std::perror("ringfence-serve-tls: accept");
      return;
    }
    if (g_open.load() >= options_.max_connections) continue;  // closed at once
    ++g_open;
    std::thread([this, c = std::move(c)]() mutable {
      relay(std::move(c));
      --g_open;
    }).detach();
  }
}

void Front::relay(UniqueFd client_fd) {
  SSL* ssl = SSL_new(ctx_);
  if (ssl == nullptr) return;
  tls::Side client(client_fd.get(), ssl);  // frees ssl
  SSL_set_fd(ssl, client_fd.get());
  tls::set_timeouts(client_fd.get(), options_.handshake_timeout);
  ERR_clear_error();
  if (SSL_accept(ssl) != 1) {
    ERR_clear_error();
    return;  // not TLS, a bad hello, or too slow: nothing to tell serve
  }
  tls::set_timeouts(client_fd.get(), std::chrono::milliseconds(0));
  auto up_fd = connect_unix(options_.upstream);
  if (!up_fd) {
    std::fprintf(stderr, "ringfence-serve-tls: %s\n", up_fd.error().to_string().c_str());
    const std::string_view unavailable =
        "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    std::string ignored;
    client.write_all(unavailable, &ignored);
    client.close_write();
    return;
  }
  tls::Side up(up_fd->get());
  char buf[64 * 1024];
  bool client_done = false;
  std::string error;
  for (;;) {
    pollfd fds[2] = {{client_done ? -1 : client.fd(), POLLIN, 0}, {up.fd(), POLLIN, 0}};
    // Decrypted bytes already buffered are not seen by poll.
    const bool buffered = !client_done && client.pending();
    if (!buffered && ::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (buffered || (fds[0].revents != 0)) {
      const ssize_t n = client.read(buf, sizeof buf, &error);
      if (n == tls::Side::kAgain) continue;
      if (n <= 0) {
        client_done = true;  // the request side is over; the answer may still come
        up.close_write();
      } else if (!up.write_all(std::string_view(buf, static_cast<size_t>(n)), &error)) {
        return;
      }
    }
    if (fds[1].revents != 0) {
      const ssize_t n = up.read(buf, sizeof buf, &error);
      if (n <= 0) {
        client.close_write();  // serve ended the connection: so do we
        return;
      }
      if (!client.write_all(std::string_view(buf, static_cast<size_t>(n)), &error)) return;
    }
  }
}

}  // namespace rf::serve_tls
