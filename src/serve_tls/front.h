// The TLS front of `ringfence serve`: accepts TLS on a TCP listener, and
// relays each connection, decrypted, to serve's own unix socket. A thread per
// connection; a handshake that does not finish in time is dropped (slowloris
// on the handshake); past the connection cap new ones are closed at once.
#pragma once

#include <openssl/ssl.h>

#include <chrono>
#include <string>

#include "core/result.h"
#include "core/unique_fd.h"

namespace rf::serve_tls {

struct FrontOptions {
  std::string cert_file, key_file;  // PEM: the chain, leaf first; its key
  std::string upstream;             // serve's unix socket
  std::chrono::milliseconds handshake_timeout{10'000};
  int max_connections = 4096;
};

class Front {
 public:
  // Loads the certificate and key (the error names the file and why).
  static Result<Front> make(FrontOptions options);
  Front(Front&&) noexcept;
  ~Front();
  // Accepts on `listener` until it fails or `stop_fd` is readable (serve's
  // end of our stdin closed: serve is gone). Each connection is relayed on a
  // detached thread that uses this Front: the caller ends the process
  // (_Exit) rather than destroy it after serve() returns.
  void serve(int listener, int stop_fd);

 private:
  explicit Front(FrontOptions options) : options_(std::move(options)) {}
  void relay(UniqueFd client);

  FrontOptions options_;
  SSL_CTX* ctx_ = nullptr;
};

}  // namespace rf::serve_tls
