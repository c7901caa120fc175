#include "store/sandbox_lifetimes.h"

#include <nlohmann/json.hpp>

#include "store/sql.h"

namespace rf::store {
namespace {

using namespace sql;

struct Row {
  std::string id, project;
  std::optional<std::string> name;
  std::string metadata_json;
  std::optional<int64_t> expires_at;
  int64_t idle_timeout_ms;
  std::optional<std::string> ended_reason;
};

Result<Row> read_row(const Statement& st) {
  return Row{st.text(0),
             st.text(1),
             st.is_null(2) ? std::nullopt : std::optional(st.text(2)),
             st.text(3),
             st.is_null(4) ? std::nullopt : std::optional(st.int64(4)),
             st.int64(5),
             st.is_null(6) ? std::nullopt : std::optional(st.text(6))};
}

SandboxLifetime lifetime_of(Row r) {
  SandboxLifetime l;
  l.sandbox_id = std::move(r.id);
  l.project = std::move(r.project);
  l.name = r.name.value_or("");
  const auto meta = nlohmann::json::parse(r.metadata_json, nullptr, /*allow_exceptions=*/false);
  if (meta.is_object()) {
    for (auto it = meta.begin(); it != meta.end(); ++it) {
      if (it.value().is_string()) l.metadata[it.key()] = it.value().get<std::string>();
    }
  }
  l.expires_at = r.expires_at;
  l.idle_timeout_ms = r.idle_timeout_ms;
  l.ended_reason = std::move(r.ended_reason);
  return l;
}

}  // namespace

Status SandboxLifetimes::record(const SandboxLifetime& l) {
  return store_.locked([&](Db& db) -> Status {
    auto write = [&]() -> Status {
      if (!l.name.empty()) {
        // The project's row, locked (PostgreSQL): two creates of one name
        // take turns, so the second sees the first.
        if (db.engine() == Engine::postgres) {
          RF_TRY(exec(db, "SELECT id FROM projects WHERE id = ?1 FOR UPDATE", l.project));
        }
        auto taken = first_row<std::string>(
            db, read_text0,
            "SELECT l.sandbox_id FROM sandbox_lifetimes l JOIN sandboxes s ON s.id = l.sandbox_id "
            "WHERE l.project_id = ?1 AND l.name = ?2 AND s.state <> 'destroyed' "
            "AND l.sandbox_id <> ?3",
            l.project, l.name, l.sandbox_id);
        if (!taken) return taken.take_error();
        if (*taken) {
          Error e = make_error("name", "project " + l.project + " has a live sandbox named " +
                                           l.name + " (" + **taken + ")");
          e.code = ErrorCode::kConflict;
          return e;
        }
      }
      const std::string meta = nlohmann::json(l.metadata).dump();
      return exec(db,
                  "INSERT INTO sandbox_lifetimes (sandbox_id, project_id, name, metadata_json, "
                  "expires_at, idle_timeout_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                  l.sandbox_id, l.project,
                  l.name.empty() ? std::optional<std::string>() : std::optional(l.name), meta,
                  l.expires_at, l.idle_timeout_ms);
    };
    return within("record the lifetime of sandbox " + l.sandbox_id, write_transaction(db, write));
  });
}

Status SandboxLifetimes::set_expiry(const std::string& id, std::optional<int64_t> expires_at) {
  return store_.locked([&](Db& db) {
    return within("set the expiry of sandbox " + id,
                  exec(db, "UPDATE sandbox_lifetimes SET expires_at = ?2 WHERE sandbox_id = ?1", id,
                       expires_at));
  });
}

Status SandboxLifetimes::ended(const std::string& id, const std::string& reason) {
  return store_.locked([&](Db& db) {
    return within("end the lifetime of sandbox " + id,
                  exec(db,
                       "UPDATE sandbox_lifetimes SET ended_reason = ?2 WHERE sandbox_id = ?1 "
                       "AND ended_reason IS NULL",
                       id, reason));
  });
}

Result<std::map<std::string, SandboxLifetime>> SandboxLifetimes::of_live(
    const std::string& project) {
  return store_.locked([&](Db& db) -> Result<std::map<std::string, SandboxLifetime>> {
    auto found =
        rows<Row>(db, read_row,
                  "SELECT l.sandbox_id, l.project_id, l.name, l.metadata_json, l.expires_at, "
                  "l.idle_timeout_ms, l.ended_reason FROM sandbox_lifetimes l "
                  "JOIN sandboxes s ON s.id = l.sandbox_id "
                  "WHERE s.state <> 'destroyed' AND (?1 = '' OR l.project_id = ?1)",
                  project);
    if (!found) return make_error("read sandbox lifetimes", found.error().to_string());
    std::map<std::string, SandboxLifetime> out;
    for (auto& r : *found) {
      SandboxLifetime l = lifetime_of(std::move(r));
      out.emplace(l.sandbox_id, std::move(l));
    }
    return out;
  });
}

}  // namespace rf::store
