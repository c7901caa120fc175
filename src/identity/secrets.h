// Secrets (host side): set, list, revoke, rotate the sealing key, and open the
// current versions of named secrets. Builtin values are sealed in the store
// (secret_box.h); vault values live in Vault (vault_access.h). Values never
// appear in errors, logs or the audit log; each change is audited.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "identity/key_file.h"
#include "identity/secret_value.h"
#include "identity/vault_access.h"
#include "store/identity_store.h"
#include "store/store.h"

namespace rf::identity {

constexpr size_t kMaxSecretBytes = 64 * 1024;

struct SecretsOptions {
  std::string state_dir;         // where secrets.key lives
  VaultAccess* vault = nullptr;  // null: vault secrets cannot be set or read
  std::string actor = "cli";     // who, in the audit log
};

struct NewSecret {
  std::string name;
  SecretValue value;
  std::string backend = "builtin";            // builtin, vault
  std::optional<store::VaultLocation> vault;  // for vault: where
};

struct OpenedSecret {
  store::SecretRow row;
  int64_t version = 0;
  SecretValue value;
};

class Secrets {
 public:
  Secrets(store::Store& store, SecretsOptions options);

  // Adds a version (creating the secret). Refused, writing nothing: an empty
  // name or value, a value over 64 KiB, an unknown backend, a key file that is
  // missing while sealed secrets exist, or Vault's error. Returns the version.
  Result<int64_t> set(const NewSecret& secret);
  Result<std::vector<store::SecretRow>> list();
  // Soft: refused from now on. Hard: also ends every running call and sandbox
  // that received it (the workers watch for it). Audited with the calls and
  // sandboxes that received it.
  Status revoke(const std::string& name, bool hard);
  // Re-seals every builtin secret with a new key, then replaces the key file.
  // A crash in between is finished on the next open. Returns how many versions.
  // Rotations take turns with each other and with set (KeyLock, key_file.h).
  Result<size_t> rotate_key();
  // The current versions of `names`, opened. Fails closed on the first one
  // that cannot be had, naming it (never its value). Revoked ones are refused.
  Result<std::map<std::string, OpenedSecret>> open_current(const std::vector<std::string>& names);
  // The same for rows already read (the cascade's plan read them); the same
  // versions, read again, where a rotation has re-sealed them since.
  using OpenRows = std::map<std::string, std::pair<store::SecretRow, store::SealedVersion>>;
  Result<std::map<std::string, OpenedSecret>> open_rows(const OpenRows& rows);

  const std::string& key_path() const { return key_path_; }

 private:
  // Under the exclusive KeyLock: a rotation that crashed, finished (it
  // committed its re-sealed values but not its key file) or undone.
  Status finish_rotation();
  // The shared KeyLock, with no crashed rotation left to finish.
  Result<KeyLock> lock_for_opening();
  // Under it: the key, when a row is builtin (its error is the row's error).
  std::optional<Result<SealingKey>> key_for_opening(const OpenRows& rows);
  // Under it: the builtin rows of `rows` sealed by a key other than `key_id`
  // (read before a rotation), as the store holds the same versions now.
  Result<OpenRows> rows_sealed_by_another_key(const OpenRows& rows, const std::string& key_id);
  // Under the exclusive KeyLock: the key file, made with the first secret.
  Result<SealingKey> key_for_sealing();
  Result<std::map<std::string, OpenedSecret>> open_with(
      const OpenRows& rows, const std::optional<Result<SealingKey>>& key);

  store::Store& store_;
  store::IdentityStore rows_;
  SecretsOptions options_;
  std::string key_path_;
};

}  // namespace rf::identity
