// The store's identity tables (issue 11): secrets and their sealed versions,
// identity profiles and their entries, and injections (which keys of which
// secret versions went into which sandbox). Values are never here in
// plaintext: a builtin version holds what identity/secret_box.h sealed, a
// vault version holds nothing (the value lives in Vault).
//
// Every write is one transaction and all-or-nothing, as in store.h.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"
#include "store/audit_log.h"
#include "store/store.h"

namespace rf::store {

enum class SecretState { active, revoked, hard_revoked };
enum class ProfileLevel { system, project, workflow, user };

std::string_view to_string(SecretState s);
std::string_view to_string(ProfileLevel l);
Result<ProfileLevel> parse_profile_level(std::string_view text);

struct VaultLocation {
  std::string addr;   // http://127.0.0.1:8200
  std::string mount;  // the KV v2 mount, "secret"
  std::string path;   // the secret's path under the mount
};

struct SecretRow {
  std::string name;
  std::string backend;  // builtin, vault
  std::optional<VaultLocation> vault;
  SecretState state = SecretState::active;
  int64_t current_version = 0;
  int64_t created_at = 0;
  int64_t updated_at = 0;
  std::optional<int64_t> revoked_at;
};

struct SealedVersion {
  std::string name;
  int64_t version = 0;
  std::string sealed;  // empty for vault
  std::string key_id;  // empty for vault
};

struct ProfileEntry {
  std::string key;
  enum class Kind { secret, value } kind = Kind::value;
  std::string ref;  // the secret's name, or the plain value
  // How a secret reaches the sandbox: env (at start), jit (asked for with
  // rf-cred, under the JIT policy), gateway, proxy. Plain values: env.
  std::string delivery = "env";
  std::string delivery_json = "{}";  // the delivery's settings
  bool operator==(const ProfileEntry&) const = default;
};

struct ProfileRow {
  std::string name;
  ProfileLevel level = ProfileLevel::system;
  std::string project;  // "" = any (or not used at this level)
  std::string workflow;
  std::string user;
  std::vector<ProfileEntry> entries;  // by key
  int64_t created_at = 0;
  int64_t updated_at = 0;
};

struct InjectionRow {
  int64_t id = 0;
  std::optional<int64_t> call_id;
  std::string sandbox_id;
  std::string worker_id;
  std::string project_id;
  std::string run_id;
  std::string key;
  std::string secret;
  int64_t version = 0;
  int64_t at = 0;
  std::optional<int64_t> ended_at;
};

// A credential a JIT request was granted (issue 13); never the value.
struct JitGrantRow {
  std::string project_id;
  std::string run_id;
  std::string rule;  // "rule 2 (jit.yaml:7)", or "" for none
  std::string key;
  std::string secret;
  int64_t version = 0;
  std::string sandbox_id;
  std::optional<int64_t> approval_id;
  std::optional<int64_t> expires_at;
};

// A live injection whose secret was hard-revoked: the call and sandbox to end.
struct RevokedInjection {
  std::optional<int64_t> call_id;
  std::string sandbox_id;
  std::string secret;
};

class IdentityStore {
 public:
  explicit IdentityStore(Store& store) : store_(store) {}

  // ---- secrets
  // Seals a builtin value as the version given: its sealed bytes and key id.
  using Sealer = std::function<std::pair<std::string, std::string>(int64_t version)>;
  // Adds a version: the secret is created (version 1, active) when missing;
  // else it must have the same backend, and a revoked secret becomes active
  // again with the new version. A builtin value is sealed by `seal` inside the
  // transaction, with the version that transaction assigns (it is bound into
  // the sealed value, so it must be the one stored); vault passes none.
  // Returns the version. `audit` is given it, and its events are written in
  // the same transaction (store/audit_log.h: AuditAlong), as in every method
  // below that takes one.
  Result<int64_t> put_secret_version(const std::string& name, const std::string& backend,
                                     const std::optional<VaultLocation>& vault, const Sealer& seal,
                                     const AuditAlong& audit = {});
  Result<std::optional<SecretRow>> secret(const std::string& name);
  Result<std::vector<SecretRow>> secrets();
  // The current version of a secret, sealed.
  Result<SealedVersion> current_version(const std::string& name);
  // Several at once (one read transaction): the cascade's secrets.
  Result<std::map<std::string, std::pair<SecretRow, SealedVersion>>> current_versions(
      const std::vector<std::string>& names);
  // revoked or hard_revoked (hard is final until a new version is set).
  // `audit` is given the secret's live injections, read in the transaction.
  using RevokeAudit = std::function<std::vector<AuditEvent>(const std::vector<InjectionRow>&)>;
  Status revoke_secret(const std::string& name, bool hard, const RevokeAudit& audit = {});
  // Every builtin version; rotate-key re-seals them all in one transaction:
  // `reseal` maps a version to its new sealed bytes and key id; `audit` is
  // given how many were re-sealed.
  Result<std::vector<SealedVersion>> sealed_versions();
  Status reseal_all(const std::function<
                        Result<std::pair<std::string, std::string>>(const SealedVersion&)>& reseal,
                    const AuditAlong& audit = {});

  // ---- profiles
  // Creates or replaces the profile. Refused, writing nothing: an empty name
  // or key, a bad scope for the level, an entry naming an unknown secret, a
  // key twice in `entries`, a key another profile defines at the same level
  // and scope.
  Status put_profile(const ProfileRow& profile, const AuditAlong& audit = {});
  Result<std::optional<ProfileRow>> profile(const std::string& name);
  Result<std::vector<ProfileRow>> profiles();
  // Those that apply to (project, workflow, user), with their entries, least
  // specific first: system, project, workflow (any project), workflow (this
  // project), user (any project), user (this project).
  Result<std::vector<ProfileRow>> profiles_for(const std::string& project,
                                               const std::string& workflow,
                                               const std::string& user);

  // ---- injections
  Status record_injections(const std::vector<InjectionRow>& rows, const AuditAlong& audit = {});
  // Records a JIT grant, unless `max_uses` (> 0) grants of the same rule in
  // the same run and project exist already: then nothing is written and the
  // answer is false. One transaction, so two workers cannot both take the last.
  Result<bool> record_jit_grant(const JitGrantRow& row, int max_uses);
  // The injections of a call (or, call_id unset, of a sandbox) end now.
  Status end_injections_of_call(int64_t call_id);
  Status end_injections_of_sandbox(const std::string& sandbox_id);
  Result<std::vector<InjectionRow>> injections_of_secret(const std::string& secret);
  // The worker's live injections whose secret is hard-revoked.
  Result<std::vector<RevokedInjection>> revoked_live_injections(const std::string& worker_id);

 private:
  Store& store_;
};

}  // namespace rf::store
