// The store's API tokens (issue 14): bearer tokens of one project each, kept
// only as their SHA-256. The token itself is shown once, by whoever made it
// (api/tokens.h), and is never stored.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "store/audit_log.h"
#include "store/store.h"

namespace rf::store {

struct TokenRow {
  std::string id;  // public handle: "tok_" + 12 hex digits
  std::string project;
  std::string name;
  int64_t created_at = 0;
  std::optional<int64_t> expires_at;
  std::optional<int64_t> revoked_at;
  std::optional<int64_t> last_used_at;
  // The one user the token acts as (nullopt: none, so no user-level identity).
  std::optional<std::string> user;
  // "agent" (its project's routes) or "operator" (server-wide ones too).
  std::string role = "agent";
  // Usable at `now`: neither revoked nor expired.
  bool live(int64_t now) const { return !revoked_at && (!expires_at || *expires_at > now); }
};

class TokenStore {
 public:
  explicit TokenStore(Store& store) : store_(store) {}

  // The events that record a token's creation or revocation, made from its
  // row and written in the same transaction (store/audit_log.h).
  using TokenAudit = std::function<std::vector<AuditEvent>(const TokenRow&)>;

  // Adds a token of `project` (made if missing, as development) under `hash`
  // (32 bytes). Refused, writing nothing: an empty project or id, a hash that
  // is not 32 bytes, a hash or id already known.
  Status add(const TokenRow& row, const std::string& hash, const TokenAudit& audit = {});
  // The token with this hash, whatever its state; nullopt when none.
  Result<std::optional<TokenRow>> find_by_hash(const std::string& hash);
  // Every token, or a project's (project non-empty), newest first.
  Result<std::vector<TokenRow>> list(const std::string& project = {});
  // Revokes a token by id; false when there is no such token. Revoking twice
  // keeps the first time.
  Result<bool> revoke(const std::string& id, const TokenAudit& audit = {});
  // Notes that a token was used (at most once a second is enough for `list`).
  Status touch(const std::string& id, int64_t at);

 private:
  Store& store_;
};

}  // namespace rf::store
