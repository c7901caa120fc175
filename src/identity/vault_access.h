// What the identity layer needs of a Vault server (host side): write and read
// one secret's value at a KV v2 location. The composition root hands in a
// client (vault_api/); tests may hand in their own.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "identity/secret_value.h"
#include "store/identity_store.h"

namespace rf::identity {

class VaultAccess {
 public:
  virtual ~VaultAccess() = default;
  // Writes a new version; returns Vault's version number.
  virtual Result<int64_t> write(const store::VaultLocation& at, std::string_view value) = 0;
  // The latest version's value. Fails closed: an unreachable server, a refused
  // token, a deleted version are errors, never a stale value.
  virtual Result<SecretValue> read(const store::VaultLocation& at) = 0;
  // Several at once (a cascade's Vault secrets), each as read() would give
  // it, in the order asked. A backend may fetch them concurrently.
  virtual std::vector<Result<SecretValue>> read_all(const std::vector<store::VaultLocation>& at) {
    std::vector<Result<SecretValue>> out;
    out.reserve(at.size());
    for (const auto& a : at) out.push_back(read(a));
    return out;
  }
};

}  // namespace rf::identity
