// The two ends of a connection ringfence-egress-tls relays, blocking: a plain
// socket, or TLS over one. Toward upstreams TLS is verified (the CA file or
// the system's, the host name checked, ALPN http/1.1, sessions resumed per
// host); toward a sandbox it is terminated with the sandbox's CA, offering
// ALPN http/1.1 only, so a client that insists on HTTP/2 fails the handshake.
#pragma once

#include <openssl/ssl.h>
#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "core/result.h"
#include "egress_tls/sandbox_ca.h"
#include "net/egress_policy.h"

namespace rf::egress_tls {

class Side {
 public:
  explicit Side(int fd, SSL* ssl = nullptr) : fd_(fd), ssl_(ssl) {}
  ~Side();  // frees the TLS state; closes the socket only if it owns it (keep())
  Side(const Side&) = delete;
  Side& operator=(const Side&) = delete;

  int fd() const { return fd_; }
  bool tls() const { return ssl_ != nullptr; }
  // Decrypted bytes already buffered (poll() does not see them).
  bool pending() const { return ssl_ != nullptr && SSL_pending(ssl_) > 0; }
  // > 0: bytes; 0: the end of the stream; kAgain: a TLS record with no data
  // came (a session ticket, a key update): poll again; < 0 otherwise: an
  // error, said in *error. One call never waits for a second record, so a
  // relay polling both ends never blocks on one while the other has data.
  static constexpr ssize_t kAgain = -2;
  ssize_t read(char* buf, size_t n, std::string* error);
  // read() until data, the end or an error (never kAgain).
  ssize_t read_some(char* buf, size_t n, std::string* error);
  bool write_all(std::string_view data, std::string* error);
  // No more from this side: TLS close_notify, then the socket's write half.
  void close_write();
  // The side outlives the connection that brought its socket (an upstream
  // kept for the next request): it takes a duplicate of the socket, which it
  // owns from now on. False when the socket cannot be duplicated.
  bool keep();

 private:
  int fd_;
  SSL* ssl_;
  bool write_closed_ = false;
  bool owns_fd_ = false;
};

class TlsContexts {
 public:
  // `ca_file` empty: the system's CAs.
  static Result<std::unique_ptr<TlsContexts>> make(const std::string& ca_file);
  ~TlsContexts();

  // TLS to `target` over the connected `fd`: SNI and the certificate checked
  // against its name (or address), ALPN http/1.1. The error says why
  // (verification failed, the handshake timed out, ...).
  Result<std::unique_ptr<Side>> connect(int fd, const net::Authority& target,
                                        std::chrono::milliseconds timeout);
  // TLS from a sandbox on `fd`, presenting `leaf`; `prefix` is what the proxy
  // already read of it (a ClientHello sent right after the CONNECT). The
  // server name the client sent goes to *sni ("" when none).
  Result<std::unique_ptr<Side>> accept(int fd, std::string_view prefix, const Leaf& leaf,
                                       std::chrono::milliseconds timeout, std::string* sni);

 private:
  TlsContexts() = default;
  static int on_new_session(SSL* ssl, SSL_SESSION* session);

  SSL_CTX* client_ = nullptr;
  SSL_CTX* server_ = nullptr;
  std::mutex mu_;
  std::map<std::string, SSL_SESSION*> sessions_;  // by "host:port"
};

}  // namespace rf::egress_tls
