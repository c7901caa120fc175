// HTTPS for `ringfence serve` (--tls-cert, --tls-key): serve binds --listen,
// hands that socket to ringfence-serve-tls (src/serve_tls), which terminates
// TLS and relays each connection to serve's own unix socket. OpenSSL stays in
// that helper, never in ringfence.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "core/result.h"
#include "core/unique_fd.h"

namespace rf::cli {

class TlsFront {
 public:
  // Starts the helper on `listener` and waits until it has loaded the
  // certificate and key; the error says what it could not (the file, why).
  static Result<std::unique_ptr<TlsFront>> start(UniqueFd listener, const std::string& upstream,
                                                 const std::string& cert_file,
                                                 const std::string& key_file);
  ~TlsFront();  // the helper sees EOF on its stdin and ends; then it is reaped

 private:
  TlsFront(pid_t pid, UniqueFd stdin_w) : pid_(pid), stdin_w_(std::move(stdin_w)) {}
  pid_t pid_;
  UniqueFd stdin_w_;
};

}  // namespace rf::cli
