#include "store/policy_store.h"

#include "store/sql.h"

namespace rf::store {
namespace {

using namespace sql;

constexpr std::string_view kSelect =
    "SELECT project_id, policy_json, updated_at, updated_by FROM operator_policies ";

Result<PolicyRow> read_policy(const Statement& st) {
  PolicyRow r;
  r.project = st.text(0);
  r.policy_json = st.text(1);
  r.updated_at = st.int64(2);
  r.updated_by = st.text(3);
  return r;
}

}  // namespace

Result<std::optional<PolicyRow>> PolicyStore::get(const std::string& project) {
  return store_.locked([&](Db& db) {
    return within("read the policy of " + project,
                  first_row<PolicyRow>(db, read_policy,
                                       std::string(kSelect) + "WHERE project_id = ?1", project));
  });
}

Result<PolicyStore::Pair> PolicyStore::get_with_default(const std::string& project) {
  return store_.locked([&](Db& db) -> Result<Pair> {
    auto found =
        rows<PolicyRow>(db, read_policy, std::string(kSelect) + "WHERE project_id IN (?1, ?2)",
                        project, std::string(kDefaultPolicy));
    if (!found) return within("read the policy of " + project, Result<Pair>(found.take_error()));
    Pair p;
    for (auto& r : *found) (r.project == kDefaultPolicy ? p.fallback : p.project) = std::move(r);
    return p;
  });
}

Status PolicyStore::set(const PolicyRow& row, const std::vector<AuditEvent>& audit) {
  if (row.project.empty()) return make_error("set policy", "the project is empty");
  return store_.locked([&](Db& db) -> Status {
    auto write = [&]() -> Status {
      RF_TRY(exec(db, "DELETE FROM operator_policies WHERE project_id = ?1", row.project));
      RF_TRY(exec(db,
                  "INSERT INTO operator_policies (project_id, policy_json, updated_at, updated_by) "
                  "VALUES (?1, ?2, ?3, ?4)",
                  row.project, row.policy_json, store_.clock_now(), row.updated_by));
      return write_audit_in(db, audit, store_.clock_now());
    };
    return within("set the policy of " + row.project, write_transaction(db, write));
  });
}

Result<bool> PolicyStore::clear(const std::string& project, const std::vector<AuditEvent>& audit) {
  return store_.locked([&](Db& db) -> Result<bool> {
    auto write = [&]() -> Result<bool> {
      auto known = first_row<PolicyRow>(db, read_policy,
                                        std::string(kSelect) + "WHERE project_id = ?1", project);
      if (!known) return known.take_error();
      if (!*known) return false;
      RF_TRY(exec(db, "DELETE FROM operator_policies WHERE project_id = ?1", project));
      RF_TRY(write_audit_in(db, audit, store_.clock_now()));
      return true;
    };
    return within("clear the policy of " + project, write_transaction(db, write));
  });
}

Result<std::vector<PolicyRow>> PolicyStore::list() {
  return store_.locked([&](Db& db) {
    return within("list policies",
                  rows<PolicyRow>(db, read_policy, std::string(kSelect) + "ORDER BY project_id"));
  });
}

}  // namespace rf::store
