// The identity layer's Vault backend (host side): identity::VaultAccess over
// Kv2Client, one client per Vault address, with a cache of what was read.
//
// The cache holds a value for `ttl` after it was read (0: no cache). It
// never outlives a failure: a read that fails drops the entry and fails
// closed, a 403 drops every entry (a refused token refuses them all), and a
// write drops the entry it replaces. A secret revoked in ringfence is refused
// before Vault or this cache is asked (identity/secrets.cc checks the store
// on every resolution), so a revocation is never answered from the cache.
// What the TTL does bound is how long a change made in Vault itself, behind
// ringfence's back, can go unseen.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "identity/vault_access.h"
#include "vault_api/kv2_client.h"

namespace rf::vault {

struct VaultBackendOptions {
  std::string token;  // VAULT_TOKEN's value; wiped with the backend
  std::chrono::milliseconds ttl{30'000};
  Kv2Options client;
};

class VaultBackend : public identity::VaultAccess {
 public:
  explicit VaultBackend(VaultBackendOptions options);
  ~VaultBackend() override;

  Result<int64_t> write(const store::VaultLocation& at, std::string_view value) override;
  Result<identity::SecretValue> read(const store::VaultLocation& at) override;
  // Up to kParallel reads at once, each on a connection of its own: a
  // cascade of 20 Vault secrets costs a few round trips, not 20.
  std::vector<Result<identity::SecretValue>> read_all(
      const std::vector<store::VaultLocation>& at) override;
  static constexpr size_t kParallel = 8;

  // For tests and benches: how many reads went to Vault / came from the cache.
  struct Counts {
    uint64_t fetched = 0;
    uint64_t cached = 0;
  };
  Counts counts() const;
  void clear_cache();

 private:
  struct Entry {
    identity::SecretValue value;
    std::chrono::steady_clock::time_point fetched;
  };
  Result<Kv2Client*> client_for(const std::string& addr);
  // A live cache entry's value (counted), dropping an expired one.
  std::optional<identity::SecretValue> cached(const std::string& key,
                                              std::chrono::steady_clock::time_point now);

  VaultBackendOptions options_;
  mutable std::mutex mu_;  // guards clients_, cache_, counts_
  std::map<std::string, std::unique_ptr<Kv2Client>> clients_;
  std::map<std::string, Entry> cache_;
  Counts counts_;
};

// The field of a KV v2 secret that holds ringfence's value.
inline constexpr const char* kValueField = "value";

// VAULT_TOKEN and RINGFENCE_VAULT_CACHE_TTL_MS (default 30000; 0 turns the
// cache off) from the environment. The CLI and the worker use this.
Result<VaultBackendOptions> vault_options_from_env();

}  // namespace rf::vault
