// A client of Vault's KV v2 secrets engine (host side): read the latest
// version of a secret, write a new one. HTTP/1.1 through Boost.Beast over
// docker_api's transports, kept-alive connections reused (up to kMaxIdle; a
// stale one is retried once), token auth with X-Vault-Token. Thread-safe:
// concurrent exchanges each take a connection of their own.
//
// Fails closed: an unreachable server, a refused token (403), a missing path,
// a deleted or destroyed latest version are errors, never an old value. Error
// texts name the method and URL and carry Vault's own "errors"; they never
// hold the token or a value (the token is cut out of anything the server says).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "docker_api/connection.h"
#include "vault_api/vault_address.h"

namespace rf::vault {

// What went wrong, for callers that react differently (a refused token drops
// every cached value).
enum class Kv2Failure { kNone, kUnreachable, kForbidden, kNotFound, kDeleted, kBadAnswer };

// One version of a secret: its fields (KV v2 stores a JSON object of strings;
// ringfence keeps each value under "value"). The strings are wiped when the
// Kv2Data goes.
struct Kv2Data {
  Kv2Data() = default;
  Kv2Data(const Kv2Data&) = delete;
  Kv2Data& operator=(const Kv2Data&) = delete;
  Kv2Data(Kv2Data&&) = default;
  Kv2Data& operator=(Kv2Data&&) = default;
  ~Kv2Data();
  int64_t version = 0;
  std::map<std::string, std::string> fields;
};

struct Kv2Options {
  std::chrono::milliseconds timeout{5'000};  // connect and each whole exchange
};

class Kv2Client {
 public:
  // `token` is Vault's token (from VAULT_TOKEN; never argv). It is kept in
  // memory only and wiped when the client goes.
  Kv2Client(VaultAddress address, std::string token, Kv2Options options = {});
  ~Kv2Client();
  Kv2Client(const Kv2Client&) = delete;
  Kv2Client& operator=(const Kv2Client&) = delete;

  const VaultAddress& address() const { return address_; }

  // GET /v1/MOUNT/data/PATH: the latest version. On failure, `why` (when
  // given) says which kind.
  Result<Kv2Data> read(std::string_view mount, std::string_view path, Kv2Failure* why = nullptr);
  // POST /v1/MOUNT/data/PATH {"data": fields}: returns the new version.
  Result<int64_t> write(std::string_view mount, std::string_view path,
                        const std::map<std::string, std::string>& fields,
                        Kv2Failure* why = nullptr);

 private:
  struct Reply {
    unsigned status = 0;
    std::string body;  // wiped by the caller
  };
  Status check_token(const std::string& what) const;
  Result<Reply> exchange(std::string_view method, const std::string& target, std::string_view body);
  Result<Reply> exchange_once(docker::Connection& conn, const std::string& request,
                              const std::string& what, bool* stale, bool* keep);
  std::string url(const std::string& target) const { return address_.url + target; }

  VaultAddress address_;
  std::string token_;
  Kv2Options options_;
  static constexpr size_t kMaxIdle = 8;
  std::mutex mu_;  // guards idle_
  std::vector<std::unique_ptr<docker::Connection>> idle_;
};

// What a GET /v1/MOUNT/data/PATH answer says (status and body as received;
// `what` names the request in errors): the version's fields, or the failure.
// Pure, for the client and for the fuzzer (fuzz/kv2_answer_fuzz.cc): the body
// is a remote server's bytes.
Result<Kv2Data> parse_kv2_read_answer(unsigned status, const std::string& body,
                                      const std::string& what, std::string_view mount,
                                      Kv2Failure* why = nullptr);

// KV v2 mount and path components: non-empty, no "..", no control bytes, no
// '?' or '#'; path segments separated by '/'. Errors name the part.
Status check_kv2_location(std::string_view mount, std::string_view path);

}  // namespace rf::vault
