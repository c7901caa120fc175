#include "store/volumes.h"

#include "store/sql.h"

namespace rf::store {
namespace {

using namespace sql;

Result<Volume> read_volume(const Statement& st) {
  return Volume{st.text(0),  st.text(1), static_cast<uint64_t>(st.int64(2)),
                st.int64(3), st.text(4), st.text(5)};
}

constexpr const char* kColumns =
    "SELECT project_id, name, size_bytes, created_at, created_by, host_id FROM volumes ";

}  // namespace

Status Volumes::create(const Volume& v) {
  return store_.locked([&](Db& db) -> Status {
    auto write = [&]() -> Status {
      auto taken = first_row<std::string>(
          db, read_text0, "SELECT name FROM volumes WHERE project_id = ?1 AND name = ?2", v.project,
          v.name);
      if (!taken) return taken.take_error();
      if (*taken) {
        Error e = make_error("name", "project " + v.project + " has a volume " + v.name);
        e.code = ErrorCode::kConflict;
        return e;
      }
      return exec(db,
                  "INSERT INTO volumes (project_id, name, size_bytes, created_at, created_by, "
                  "host_id) VALUES (?1, ?2, ?3, ?4, ?5, '')",
                  v.project, v.name, static_cast<int64_t>(v.size_bytes),
                  v.created_at == 0 ? now_ms() : v.created_at, v.created_by);
    };
    return within("create volume " + v.name, write_transaction(db, write));
  });
}

Result<std::vector<Volume>> Volumes::list(const std::string& project) {
  return store_.locked([&](Db& db) -> Result<std::vector<Volume>> {
    auto found = rows<Volume>(
        db, read_volume, std::string(kColumns) + "WHERE project_id = ?1 ORDER BY name", project);
    if (!found) return make_error("list volumes", found.error().to_string());
    return std::move(*found);
  });
}

Result<std::optional<Volume>> Volumes::find(const std::string& project, const std::string& name) {
  return store_.locked([&](Db& db) -> Result<std::optional<Volume>> {
    auto found = first_row<Volume>(db, read_volume,
                                   std::string(kColumns) + "WHERE project_id = ?1 AND name = ?2",
                                   project, name);
    if (!found) return make_error("find volume " + name, found.error().to_string());
    return std::move(*found);
  });
}

Status Volumes::set_host(const std::string& project, const std::string& name,
                         const std::string& host) {
  return store_.locked([&](Db& db) {
    return within("record the host of volume " + name,
                  exec(db,
                       "UPDATE volumes SET host_id = ?3 WHERE project_id = ?1 AND name = ?2 "
                       "AND host_id = ''",
                       project, name, host));
  });
}

Result<bool> Volumes::remove(const std::string& project, const std::string& name) {
  auto had = find(project, name);
  if (!had) return had.take_error();
  if (!*had) return false;
  RF_TRY(store_.locked([&](Db& db) {
    return within(
        "remove volume " + name,
        exec(db, "DELETE FROM volumes WHERE project_id = ?1 AND name = ?2", project, name));
  }));
  return true;
}

}  // namespace rf::store
