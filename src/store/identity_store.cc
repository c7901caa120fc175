#include "store/identity_store.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "store/audit_log.h"
#include "store/sql.h"

namespace rf::store {
namespace {

using namespace sql;

constexpr std::string_view kSecretStates[] = {"active", "revoked", "hard_revoked"};
constexpr std::string_view kLevels[] = {"system", "project", "workflow", "user"};

Result<SecretState> parse_secret_state(std::string_view text) {
  for (size_t i = 0; i < std::size(kSecretStates); ++i) {
    if (kSecretStates[i] == text) return static_cast<SecretState>(i);
  }
  return fail("unknown secret state \"" + std::string(text) + "\"");
}

constexpr std::string_view kSecretColumns =
    "name, backend, vault_addr, vault_mount, vault_path, state, current_version, created_at, "
    "updated_at, revoked_at";

Result<SecretRow> read_secret(const Statement& st) {
  SecretRow r;
  r.name = st.text(0);
  r.backend = st.text(1);
  if (!st.is_null(2)) r.vault = VaultLocation{st.text(2), st.text(3), st.text(4)};
  auto state = parse_secret_state(st.text(5));
  if (!state.ok()) return state.take_error();
  r.state = *state;
  r.current_version = st.int64(6);
  r.created_at = st.int64(7);
  r.updated_at = st.int64(8);
  r.revoked_at = st.opt_int64(9);
  return r;
}

Result<SealedVersion> read_sealed(const Statement& st) {
  return SealedVersion{st.text(0), st.int64(1), st.blob(2), st.text(3)};
}

Result<std::optional<SecretRow>> secret_in(Db& db, const std::string& name) {
  return first_row<SecretRow>(
      db, read_secret, "SELECT " + std::string(kSecretColumns) + " FROM secrets WHERE name = ?1",
      name);
}

Result<SealedVersion> current_in(Db& db, const SecretRow& s) {
  auto v = first_row<SealedVersion>(db, read_sealed,
                                    "SELECT name, version, sealed, key_id FROM secret_versions "
                                    "WHERE name = ?1 AND version = ?2",
                                    s.name, s.current_version);
  if (!v.ok()) return v.take_error();
  if (!*v) {
    return fail("secret " + s.name + " has no version " + std::to_string(s.current_version));
  }
  return std::move(**v);
}

// ---- profiles

std::string_view kind_name(ProfileEntry::Kind k) {
  return k == ProfileEntry::Kind::secret ? "secret" : "value";
}

// The scope a level allows: what must be set, what must be empty.
Status check_scope(const ProfileRow& p) {
  const std::string where = "profile " + p.name + " at level " + std::string(to_string(p.level));
  auto need = [&](bool ok, std::string_view what) -> Status {
    if (ok) return ok_status();
    return fail(where + " " + std::string(what));
  };
  switch (p.level) {
    case ProfileLevel::system:
      return need(p.project.empty() && p.workflow.empty() && p.user.empty(),
                  "takes no --project, --workflow or --user");
    case ProfileLevel::project:
      RF_TRY(need(!p.project.empty(), "needs --project"));
      return need(p.workflow.empty() && p.user.empty(), "takes no --workflow or --user");
    case ProfileLevel::workflow:
      RF_TRY(need(!p.workflow.empty(), "needs --workflow"));
      return need(p.user.empty(), "takes no --user");
    case ProfileLevel::user:
      RF_TRY(need(!p.user.empty(), "needs --user"));
      return need(p.workflow.empty(), "takes no --workflow");
  }
  return ok_status();
}

Status check_entries(const ProfileRow& p) {
  if (p.name.empty()) return fail("the profile name is empty");
  if (p.entries.empty()) return fail("profile " + p.name + " has no entries");
  std::set<std::string> seen;
  for (const auto& e : p.entries) {
    if (e.key.empty()) return fail("profile " + p.name + " has an entry with an empty key");
    if (!seen.insert(e.key).second)
      return fail("profile " + p.name + " defines key " + e.key + " twice");
    if (e.ref.empty()) {
      return fail("profile " + p.name + " key " + e.key + ": the " +
                  std::string(kind_name(e.kind)) + " is empty");
    }
    if (e.delivery != "env" && e.kind != ProfileEntry::Kind::secret) {
      return fail("profile " + p.name + " key " + e.key + ": only a secret has a delivery (" +
                  e.delivery + "); a plain value is in the environment");
    }
  }
  return ok_status();
}

Result<ProfileRow> read_profile_head(const Statement& st) {
  ProfileRow p;
  p.name = st.text(0);
  auto level = parse_profile_level(st.text(1));
  if (!level.ok()) return level.take_error();
  p.level = *level;
  p.project = st.text(2);
  p.workflow = st.text(3);
  p.user = st.text(4);
  p.created_at = st.int64(5);
  p.updated_at = st.int64(6);
  return p;
}

Result<ProfileEntry> read_entry(const Statement& st) {
  ProfileEntry e;
  e.key = st.text(0);
  e.kind = st.text(1) == "secret" ? ProfileEntry::Kind::secret : ProfileEntry::Kind::value;
  e.ref = st.text(2);
  e.delivery = st.text(3);
  e.delivery_json = st.text(4);
  return e;
}

Status fill_entries(Db& db, ProfileRow& p) {
  auto entries = rows<ProfileEntry>(
      db, read_entry,
      "SELECT key, kind, ref, delivery, delivery_json FROM profile_entries WHERE profile = ?1 "
      "ORDER BY key",
      p.name);
  if (!entries.ok()) return entries.take_error();
  p.entries = std::move(*entries);
  return ok_status();
}

constexpr std::string_view kProfileColumns =
    "name, level, project_id, workflow, user_id, created_at, updated_at";

template <class... Args>
Result<std::vector<ProfileRow>> profiles_where(Db& db, std::string_view where,
                                               const Args&... args) {
  auto heads = rows<ProfileRow>(
      db, read_profile_head,
      "SELECT " + std::string(kProfileColumns) + " FROM identity_profiles " + std::string(where),
      args...);
  if (!heads.ok()) return heads.take_error();
  for (auto& p : *heads) RF_TRY(fill_entries(db, p));
  return heads;
}

// How specific a profile is within the cascade (larger wins).
int specificity(const ProfileRow& p) {
  switch (p.level) {
    case ProfileLevel::system:
      return 0;
    case ProfileLevel::project:
      return 1;
    case ProfileLevel::workflow:
      return p.project.empty() ? 2 : 3;
    case ProfileLevel::user:
      return p.project.empty() ? 4 : 5;
  }
  return 0;
}

// The columns read_injection reads, in its order.
constexpr std::string_view kInjectionColumns =
    "id, call_id, sandbox_id, worker_id, project_id, run_id, key, secret, version, at, ended_at";

Result<InjectionRow> read_injection(const Statement& st) {
  InjectionRow r;
  r.id = st.int64(0);
  r.call_id = st.opt_int64(1);
  r.sandbox_id = st.text(2);
  r.worker_id = st.text(3);
  r.project_id = st.text(4);
  r.run_id = st.text(5);
  r.key = st.text(6);
  r.secret = st.text(7);
  r.version = st.int64(8);
  r.at = st.int64(9);
  r.ended_at = st.opt_int64(10);
  return r;
}

}  // namespace

std::string_view to_string(SecretState s) { return kSecretStates[static_cast<size_t>(s)]; }
std::string_view to_string(ProfileLevel l) { return kLevels[static_cast<size_t>(l)]; }

Result<ProfileLevel> parse_profile_level(std::string_view text) {
  for (size_t i = 0; i < std::size(kLevels); ++i) {
    if (kLevels[i] == text) return static_cast<ProfileLevel>(i);
  }
  return fail("unknown level \"" + std::string(text) +
              "\" (expected system, project, workflow or user)");
}

namespace {

// The events `audit` makes of `outcome`, appended in the open transaction.
Status audit_along(Db& db, const AuditAlong& audit, int64_t outcome, int64_t now) {
  return audit ? write_audit_in(db, audit(outcome), now) : ok_status();
}

}  // namespace

// ---- secrets

Result<int64_t> IdentityStore::put_secret_version(const std::string& name,
                                                  const std::string& backend,
                                                  const std::optional<VaultLocation>& vault,
                                                  const Sealer& seal, const AuditAlong& audit) {
  return store_.locked([&](Db& db) -> Result<int64_t> {
    const int64_t at = store_.clock_now();
    auto put = [&]() -> Result<int64_t> {
      if (name.empty()) return fail("the secret name is empty");
      if (backend != "builtin" && backend != "vault")
        return fail("unknown secret backend \"" + backend + "\" (expected builtin or vault)");
      if ((backend == "vault") != vault.has_value())
        return fail("a vault secret needs its vault address and path, and only it");
      if ((backend == "builtin") != static_cast<bool>(seal))
        return fail("a builtin secret is sealed, and only it");
      auto existing = secret_in(db, name);
      if (!existing.ok()) return existing.take_error();
      int64_t version = 1;
      if (*existing) {
        if ((*existing)->backend != backend) {
          return fail("secret " + name + " lives in backend " + (*existing)->backend + ", not " +
                      backend);
        }
        version = (*existing)->current_version + 1;
        RF_TRY(exec(db,
                    "UPDATE secrets SET current_version = ?2, state = 'active', updated_at = ?3, "
                    "revoked_at = NULL, vault_addr = ?4, vault_mount = ?5, vault_path = ?6 "
                    "WHERE name = ?1",
                    name, version, at, vault ? std::optional(vault->addr) : std::nullopt,
                    vault ? std::optional(vault->mount) : std::nullopt,
                    vault ? std::optional(vault->path) : std::nullopt));
      } else {
        RF_TRY(exec(db,
                    "INSERT INTO secrets (name, backend, vault_addr, vault_mount, vault_path, "
                    "state, current_version, created_at, updated_at) "
                    "VALUES (?1, ?2, ?3, ?4, ?5, 'active', 1, ?6, ?6)",
                    name, backend, vault ? std::optional(vault->addr) : std::nullopt,
                    vault ? std::optional(vault->mount) : std::nullopt,
                    vault ? std::optional(vault->path) : std::nullopt, at));
      }
      // Sealed here, in the transaction that assigns the version: writers
      // take turns (store.h), so no other set can take this version meanwhile.
      const auto [sealed, key_id] = seal ? seal(version) : std::pair<std::string, std::string>();
      auto insert = query(db,
                          "INSERT INTO secret_versions (name, version, sealed, key_id, "
                          "created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                          name, version, Blob{sealed}, key_id, at);
      if (!insert.ok()) return insert.take_error();
      if (!seal) insert->bind_null(3).bind_null(4);
      RF_TRY(insert->run());
      RF_TRY(audit_along(db, audit, version, at));
      return version;
    };
    return within("set secret " + name, write_transaction(db, put));
  });
}

Result<std::optional<SecretRow>> IdentityStore::secret(const std::string& name) {
  return store_.locked([&](Db& db) { return within("read secret " + name, secret_in(db, name)); });
}

Result<std::vector<SecretRow>> IdentityStore::secrets() {
  return store_.locked([&](Db& db) {
    return within("list secrets", rows<SecretRow>(db, read_secret,
                                                  "SELECT " + std::string(kSecretColumns) +
                                                      " FROM secrets ORDER BY name"));
  });
}

Result<SealedVersion> IdentityStore::current_version(const std::string& name) {
  return store_.locked([&](Db& db) -> Result<SealedVersion> {
    auto read = [&]() -> Result<SealedVersion> {
      auto s = secret_in(db, name);
      if (!s.ok()) return s.take_error();
      if (!*s) return fail("there is no secret " + name);
      return current_in(db, **s);
    };
    return within("read secret " + name, read_transaction(db, read));
  });
}

Result<std::map<std::string, std::pair<SecretRow, SealedVersion>>> IdentityStore::current_versions(
    const std::vector<std::string>& names) {
  using Out = std::map<std::string, std::pair<SecretRow, SealedVersion>>;
  // One query for all of them (a cascade names ~20): the names as a JSON array.
  std::string list = "[";
  for (size_t i = 0; i < names.size(); ++i) {
    list += (i ? "," : "") + nlohmann::json(names[i]).dump();
  }
  list += "]";
  auto read = [](const Statement& st) -> Result<std::pair<SecretRow, SealedVersion>> {
    auto row = read_secret(st);
    if (!row.ok()) return row.take_error();
    SealedVersion v{st.text(0), st.int64(6), st.blob(10), st.text(11)};
    return std::make_pair(std::move(*row), std::move(v));
  };
  return store_.locked([&](Db& db) -> Result<Out> {
    auto found = rows<std::pair<SecretRow, SealedVersion>>(
        db, read,
        "SELECT s.name, s.backend, s.vault_addr, s.vault_mount, s.vault_path, s.state, "
        "s.current_version, s.created_at, s.updated_at, s.revoked_at, v.sealed, v.key_id "
        "FROM secrets s JOIN secret_versions v ON v.name = s.name "
        "AND v.version = s.current_version WHERE s.name IN (" +
            json_values(db, 1) + ")",
        list);
    if (!found.ok()) return within("read secrets", std::move(found)).take_error();
    Out out;
    for (auto& f : *found) out.emplace(f.first.name, std::move(f));
    for (const auto& name : names) {
      if (!out.count(name)) return make_error("read secrets", "there is no secret " + name);
    }
    return out;
  });
}

Status IdentityStore::revoke_secret(const std::string& name, bool hard, const RevokeAudit& audit) {
  return store_.locked([&](Db& db) -> Status {
    auto revoke = [&]() -> Status {
      auto s = secret_in(db, name);
      if (!s.ok()) return s.take_error();
      if (!*s) return fail("there is no secret " + name);
      // Hard stays hard: a later soft revoke does not undo it.
      const bool now_hard = hard || (*s)->state == SecretState::hard_revoked;
      const int64_t at = store_.clock_now();
      RF_TRY(exec(db,
                  "UPDATE secrets SET state = ?2, revoked_at = coalesce(revoked_at, ?3), "
                  "updated_at = ?3 WHERE name = ?1",
                  name, std::string(now_hard ? "hard_revoked" : "revoked"), at));
      if (!audit) return ok_status();
      auto live = rows<InjectionRow>(db, read_injection,
                                     "SELECT " + std::string(kInjectionColumns) +
                                         " FROM injections WHERE secret = ?1 AND ended_at IS NULL "
                                         "ORDER BY id",
                                     name);
      if (!live.ok()) return live.take_error();
      return write_audit_in(db, audit(*live), at);
    };
    return within("revoke secret " + name, write_transaction(db, revoke));
  });
}

Result<std::vector<SealedVersion>> IdentityStore::sealed_versions() {
  return store_.locked([&](Db& db) {
    return within("read sealed secrets",
                  rows<SealedVersion>(db, read_sealed,
                                      "SELECT name, version, sealed, key_id FROM secret_versions "
                                      "WHERE sealed IS NOT NULL ORDER BY name, version"));
  });
}

Status IdentityStore::reseal_all(
    const std::function<Result<std::pair<std::string, std::string>>(const SealedVersion&)>& reseal,
    const AuditAlong& audit) {
  return store_.locked([&](Db& db) -> Status {
    auto all = [&]() -> Status {
      auto versions = rows<SealedVersion>(db, read_sealed,
                                          "SELECT name, version, sealed, key_id FROM "
                                          "secret_versions WHERE sealed IS NOT NULL");
      if (!versions.ok()) return versions.take_error();
      for (const auto& v : *versions) {
        auto next = reseal(v);
        if (!next.ok()) return next.take_error();
        RF_TRY(exec(db,
                    "UPDATE secret_versions SET sealed = ?3, key_id = ?4 "
                    "WHERE name = ?1 AND version = ?2",
                    v.name, v.version, Blob{next->first}, next->second));
      }
      return audit_along(db, audit, static_cast<int64_t>(versions->size()), store_.clock_now());
    };
    return within("re-seal secrets", write_transaction(db, all));
  });
}

// ---- profiles

Status IdentityStore::put_profile(const ProfileRow& p, const AuditAlong& audit) {
  return store_.locked([&](Db& db) -> Status {
    auto put = [&]() -> Status {
      RF_TRY(check_entries(p));
      RF_TRY(check_scope(p));
      for (const auto& e : p.entries) {
        if (e.kind != ProfileEntry::Kind::secret) continue;
        auto s = secret_in(db, e.ref);
        if (!s.ok()) return s.take_error();
        if (!*s) {
          return fail("key " + e.key + " names secret " + e.ref +
                      ", which does not exist (set it first: ringfence secret set " + e.ref + ")");
        }
      }
      // Another profile at the same level and scope defining the same key.
      for (const auto& e : p.entries) {
        auto other = first_row<std::string>(
            db, read_text0,
            "SELECT p.name FROM identity_profiles p JOIN profile_entries e ON e.profile = p.name "
            "WHERE p.level = ?1 AND p.project_id = ?2 AND p.workflow = ?3 AND p.user_id = ?4 "
            "AND e.key = ?5 AND p.name <> ?6",
            std::string(to_string(p.level)), p.project, p.workflow, p.user, e.key, p.name);
        if (!other.ok()) return other.take_error();
        if (*other) {
          return fail("key " + e.key + " is already defined at level " +
                      std::string(to_string(p.level)) + " for this scope by profile " + **other +
                      " (a key is defined once per level and scope)");
        }
      }
      const int64_t at = store_.clock_now();
      RF_TRY(exec(db, "DELETE FROM profile_entries WHERE profile = ?1", p.name));
      RF_TRY(exec(db,
                  "INSERT INTO identity_profiles (name, level, project_id, workflow, user_id, "
                  "created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6) "
                  "ON CONFLICT (name) DO UPDATE SET level = ?2, project_id = ?3, workflow = ?4, "
                  "user_id = ?5, updated_at = ?6",
                  p.name, std::string(to_string(p.level)), p.project, p.workflow, p.user, at));
      for (const auto& e : p.entries) {
        RF_TRY(exec(db,
                    "INSERT INTO profile_entries (profile, key, kind, ref, delivery, "
                    "delivery_json) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    p.name, e.key, std::string(kind_name(e.kind)), e.ref, e.delivery,
                    e.delivery_json));
      }
      return audit_along(db, audit, 0, at);
    };
    return within("set profile " + p.name, write_transaction(db, put));
  });
}

Result<std::optional<ProfileRow>> IdentityStore::profile(const std::string& name) {
  return store_.locked([&](Db& db) -> Result<std::optional<ProfileRow>> {
    auto read = [&]() -> Result<std::optional<ProfileRow>> {
      auto all = profiles_where(db, "WHERE name = ?1", name);
      if (!all.ok()) return all.take_error();
      if (all->empty()) return std::optional<ProfileRow>();
      return std::optional<ProfileRow>(std::move(all->front()));
    };
    return within("read profile " + name, read_transaction(db, read));
  });
}

Result<std::vector<ProfileRow>> IdentityStore::profiles() {
  return store_.locked([&](Db& db) {
    return within("list profiles",
                  read_transaction(db, [&] { return profiles_where(db, "ORDER BY name"); }));
  });
}

Result<std::vector<ProfileRow>> IdentityStore::profiles_for(const std::string& project,
                                                            const std::string& workflow,
                                                            const std::string& user) {
  struct Joined {
    ProfileRow head;
    ProfileEntry entry;
  };
  auto read = [](const Statement& st) -> Result<Joined> {
    auto head = read_profile_head(st);
    if (!head.ok()) return head.take_error();
    ProfileEntry e;
    e.key = st.text(7);
    e.kind = st.text(8) == "secret" ? ProfileEntry::Kind::secret : ProfileEntry::Kind::value;
    e.ref = st.text(9);
    e.delivery = st.text(10);
    e.delivery_json = st.text(11);
    return Joined{std::move(*head), std::move(e)};
  };
  return store_.locked([&](Db& db) -> Result<std::vector<ProfileRow>> {
    // Heads and entries in one query: the cascade is on every identity call's path.
    auto joined =
        rows<Joined>(db, read,
                     "SELECT p.name, p.level, p.project_id, p.workflow, p.user_id, p.created_at, "
                     "p.updated_at, e.key, e.kind, e.ref, e.delivery, e.delivery_json "
                     "FROM identity_profiles p JOIN profile_entries e ON e.profile = p.name "
                     "WHERE p.level = 'system' "
                     "OR (p.level = 'project' AND p.project_id = ?1) "
                     "OR (p.level = 'workflow' AND ?2 <> '' AND p.workflow = ?2 "
                     "    AND (p.project_id = '' OR p.project_id = ?1)) "
                     "OR (p.level = 'user' AND ?3 <> '' AND p.user_id = ?3 "
                     "    AND (p.project_id = '' OR p.project_id = ?1)) "
                     "ORDER BY p.name, e.key",
                     project, workflow, user);
    if (!joined.ok()) {
      return within("read the profiles of project " + project, std::move(joined)).take_error();
    }
    std::vector<ProfileRow> found;
    for (auto& j : *joined) {
      if (found.empty() || found.back().name != j.head.name) found.push_back(std::move(j.head));
      found.back().entries.push_back(std::move(j.entry));
    }
    std::stable_sort(found.begin(), found.end(),
                     [](const auto& a, const auto& b) { return specificity(a) < specificity(b); });
    return found;
  });
}

// ---- injections

Status IdentityStore::record_injections(const std::vector<InjectionRow>& list,
                                        const AuditAlong& audit) {
  return store_.locked([&](Db& db) -> Status {
    auto put = [&]() -> Status {
      const int64_t at = store_.clock_now();
      for (const auto& r : list) {
        RF_TRY(exec(db,
                    "INSERT INTO injections (call_id, sandbox_id, worker_id, project_id, run_id, "
                    "key, secret, version, at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                    r.call_id, r.sandbox_id, r.worker_id, r.project_id, r.run_id, r.key, r.secret,
                    r.version, r.at ? r.at : at));
      }
      return audit_along(db, audit, 0, at);
    };
    return within("record injections", write_transaction(db, put));
  });
}

Result<bool> IdentityStore::record_jit_grant(const JitGrantRow& g, int max_uses) {
  return store_.locked([&](Db& db) -> Result<bool> {
    auto put = [&]() -> Result<bool> {
      if (max_uses > 0) {
        auto n = first_row<int64_t>(
            db, [](const Statement& st) -> Result<int64_t> { return st.int64(0); },
            "SELECT count(*) FROM jit_grants WHERE project_id = ?1 AND run_id = ?2 AND rule = ?3",
            g.project_id, g.run_id, g.rule);
        if (!n.ok()) return n.take_error();
        if (n->value_or(0) >= max_uses) return false;
      }
      RF_TRY(exec(db,
                  "INSERT INTO jit_grants (project_id, run_id, rule, key, secret, version, "
                  "sandbox_id, approval_id, at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, "
                  "?8, ?9, ?10)",
                  g.project_id, g.run_id, g.rule, g.key, g.secret, g.version, g.sandbox_id,
                  g.approval_id, store_.clock_now(), g.expires_at));
      return true;
    };
    return within("record the JIT grant of " + g.key, write_transaction(db, put));
  });
}

Status IdentityStore::end_injections_of_call(int64_t call_id) {
  return store_.locked([&](Db& db) {
    return within("end injections of call " + std::to_string(call_id),
                  exec(db,
                       "UPDATE injections SET ended_at = ?2 WHERE call_id = ?1 AND ended_at IS "
                       "NULL",
                       call_id, store_.clock_now()));
  });
}

Status IdentityStore::end_injections_of_sandbox(const std::string& sandbox_id) {
  return store_.locked([&](Db& db) {
    return within("end injections of sandbox " + sandbox_id,
                  exec(db,
                       "UPDATE injections SET ended_at = ?2 WHERE sandbox_id = ?1 AND ended_at "
                       "IS NULL",
                       sandbox_id, store_.clock_now()));
  });
}

Result<std::vector<InjectionRow>> IdentityStore::injections_of_secret(const std::string& secret) {
  return store_.locked([&](Db& db) {
    return within("read injections of secret " + secret,
                  rows<InjectionRow>(db, read_injection,
                                     "SELECT " + std::string(kInjectionColumns) +
                                         " FROM injections WHERE secret = ?1 ORDER BY id",
                                     secret));
  });
}

Result<std::vector<RevokedInjection>> IdentityStore::revoked_live_injections(
    const std::string& worker_id) {
  auto read = [](const Statement& st) -> Result<RevokedInjection> {
    return RevokedInjection{st.opt_int64(0), st.text(1), st.text(2)};
  };
  return store_.locked([&](Db& db) {
    return within("read revoked injections",
                  rows<RevokedInjection>(
                      db, read,
                      "SELECT DISTINCT i.call_id, i.sandbox_id, i.secret FROM injections i "
                      "JOIN secrets s ON s.name = i.secret "
                      "WHERE i.worker_id = ?1 AND i.ended_at IS NULL "
                      "AND s.state = 'hard_revoked'",
                      worker_id));
  });
}

}  // namespace rf::store
