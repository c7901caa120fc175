#include "store/token_store.h"

#include "store/audit_log.h"
#include "store/sql.h"

namespace rf::store {
namespace {

using namespace sql;

constexpr std::string_view kColumns =
    "id, project_id, name, created_at, expires_at, revoked_at, last_used_at, user_id, role";

Result<TokenRow> read_token(const Statement& st) {
  TokenRow r;
  r.id = st.text(0);
  r.project = st.text(1);
  r.name = st.text(2);
  r.created_at = st.int64(3);
  r.expires_at = st.opt_int64(4);
  r.revoked_at = st.opt_int64(5);
  r.last_used_at = st.opt_int64(6);
  r.user = st.opt_text(7);
  r.role = st.text(8);
  return r;
}

}  // namespace

Status TokenStore::add(const TokenRow& row, const std::string& hash, const TokenAudit& audit) {
  if (row.id.empty()) return make_error("add token", "the token has no id");
  if (row.project.empty()) return make_error("add token " + row.id, "the token has no project");
  if (row.role != "agent" && row.role != "operator") {
    return make_error("add token " + row.id,
                      "role \"" + row.role + "\" is neither agent nor operator");
  }
  if (row.user && row.user->empty()) {
    return make_error("add token " + row.id, "the bound user is empty");
  }
  if (hash.size() != 32) {
    return make_error("add token " + row.id, "the hash is not 32 bytes (SHA-256)");
  }
  if (auto made = store_.ensure_project(row.project, Environment::development); !made) {
    return made;
  }
  return store_.locked([&](Db& db) -> Status {
    auto insert = [&]() -> Status {
      auto same = first_row<std::string>(db, read_text0,
                                         "SELECT id FROM api_tokens WHERE id = ?1 OR hash = ?2",
                                         row.id, Blob{hash});
      if (!same.ok()) return same.take_error();
      if (*same) return fail("a token with this id or hash exists already");
      RF_TRY(exec(db,
                  "INSERT INTO api_tokens (id, project_id, name, hash, created_at, expires_at, "
                  "user_id, role) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                  row.id, row.project, row.name, Blob{hash}, row.created_at, row.expires_at,
                  row.user, row.role));
      return audit ? write_audit_in(db, audit(row), store_.clock_now()) : ok_status();
    };
    return within("add token " + row.id, write_transaction(db, insert));
  });
}

Result<std::optional<TokenRow>> TokenStore::find_by_hash(const std::string& hash) {
  return store_.locked([&](Db& db) {
    return within("find token", first_row<TokenRow>(db, read_token,
                                                    "SELECT " + std::string(kColumns) +
                                                        " FROM api_tokens WHERE hash = ?1",
                                                    Blob{hash}));
  });
}

Result<std::vector<TokenRow>> TokenStore::list(const std::string& project) {
  return store_.locked([&](Db& db) {
    const std::string select = "SELECT " + std::string(kColumns) + " FROM api_tokens ";
    if (project.empty()) {
      return within("list tokens",
                    rows<TokenRow>(db, read_token, select + "ORDER BY created_at DESC, id"));
    }
    return within(
        "list tokens of project " + project,
        rows<TokenRow>(db, read_token,
                       select + "WHERE project_id = ?1 ORDER BY created_at DESC, id", project));
  });
}

Result<bool> TokenStore::revoke(const std::string& id, const TokenAudit& audit) {
  return store_.locked([&](Db& db) -> Result<bool> {
    auto revoke = [&]() -> Result<bool> {
      auto known = first_row<TokenRow>(
          db, read_token, "SELECT " + std::string(kColumns) + " FROM api_tokens WHERE id = ?1", id);
      if (!known.ok()) return known.take_error();
      if (!*known) return false;
      const int64_t now = store_.clock_now();
      RF_TRY(exec(db, "UPDATE api_tokens SET revoked_at = coalesce(revoked_at, ?2) WHERE id = ?1",
                  id, now));
      if (audit) RF_TRY(write_audit_in(db, audit(**known), now));
      return true;
    };
    return within("revoke token " + id, write_transaction(db, revoke));
  });
}

Status TokenStore::touch(const std::string& id, int64_t at) {
  return store_.locked([&](Db& db) {
    return exec(db, "UPDATE api_tokens SET last_used_at = ?2 WHERE id = ?1", id, at);
  });
}

}  // namespace rf::store
