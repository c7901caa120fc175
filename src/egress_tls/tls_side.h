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
#include "tls_stream/tls_stream.h"

namespace rf::egress_tls {

using tls::Side;

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
