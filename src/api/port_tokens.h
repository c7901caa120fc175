// Access tokens for one port of one sandbox (issue 41 item 5), to hand to a
// browser: a page a sandbox serves opens without the project's API token,
// and the token opens nothing else (no other port, no other sandbox, no API
// route). Stateless and short-lived: the project, the sandbox, the port and
// when it expires, with a MAC (libsodium crypto_auth, HMAC-SHA-512-256) under
// a key derived from the state dir's sealing key (identity/key_file.h), so
// every serve of a fleet that reads the same secrets checks the same tokens.
//   rfp1.<base64url of {"p","s","o","e"}>.<base64url of the MAC>
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "core/result.h"

namespace rf::api {

class PortTokens {
 public:
  // From `state_dir`'s secrets.key (made when there is none).
  static Result<std::unique_ptr<PortTokens>> open(const std::string& state_dir);
  ~PortTokens();

  std::string make(const std::string& project, const std::string& sandbox, int port,
                   int64_t expires_ms) const;
  // The token's project when it is whole, unexpired and for this sandbox
  // and port; otherwise an error saying which (never what the MAC is).
  Result<std::string> check(const std::string& token, const std::string& sandbox, int port,
                            int64_t now_ms) const;

  // Where a browser's request carries one: ?rf_port_token= or this cookie.
  static constexpr const char* kQueryName = "rf_port_token";
  static std::string cookie_name(const std::string& sandbox, int port);

 private:
  PortTokens() = default;
  unsigned char key_[32] = {};
};

}  // namespace rf::api
