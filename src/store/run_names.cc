#include "store/run_names.h"

#include <sodium.h>

#include "store/sql.h"

namespace rf::store {
namespace {

using namespace sql;

std::string with_suffix(const std::string& name) {
  unsigned char bytes[4];
  randombytes_buf(bytes, sizeof bytes);
  static const char* hex = "0123456789abcdef";
  std::string out = name.substr(0, 118) + "~";
  for (unsigned char b : bytes) {
    out += hex[b >> 4];
    out += hex[b & 15];
  }
  return out;
}

Result<std::optional<std::string>> find_in(Db& db, const std::string& project,
                                           const std::string& name) {
  auto named = first_row<std::string>(
      db, read_text0, "SELECT run_id FROM run_names WHERE project_id = ?1 AND name = ?2", project,
      name);
  if (!named || *named) return named;
  auto own = first_row<std::string>(
      db, read_text0, "SELECT id FROM runs WHERE id = ?1 AND project_id = ?2", name, project);
  if (!own) return own.take_error();
  // A run whose id is the name, but that was given another name, is not it.
  if (*own) {
    auto other = first_row<std::string>(db, read_text0,
                                        "SELECT name FROM run_names WHERE run_id = ?1", name);
    if (!other) return other.take_error();
    if (*other && **other != name) return std::optional<std::string>();
  }
  return own;
}

}  // namespace

Result<std::optional<std::string>> RunNames::find(const std::string& project,
                                                  const std::string& name) {
  return store_.locked(
      [&](Db& db) { return within("find run " + name, find_in(db, project, name)); });
}

Result<std::string> RunNames::claim(const std::string& project, const std::string& name) {
  return store_.locked([&](Db& db) -> Result<std::string> {
    auto claim = [&]() -> Result<std::string> {
      auto known = find_in(db, project, name);
      if (!known) return known.take_error();
      if (*known) return **known;
      // Free: no run (of any project) and no other name holds it.
      auto taken = first_row<std::string>(db, read_text0,
                                          "SELECT id FROM runs WHERE id = ?1 UNION ALL "
                                          "SELECT run_id FROM run_names WHERE run_id = ?1",
                                          name);
      if (!taken) return taken.take_error();
      if (!*taken) return name;
      // Another project's: an id of this project's own, remembered.
      for (int attempt = 0; attempt < 8; ++attempt) {
        const std::string id = with_suffix(name);
        auto clash = first_row<std::string>(db, read_text0,
                                            "SELECT id FROM runs WHERE id = ?1 UNION ALL "
                                            "SELECT run_id FROM run_names WHERE run_id = ?1",
                                            id);
        if (!clash) return clash.take_error();
        if (*clash) continue;
        RF_TRY(exec(db, "INSERT INTO run_names (project_id, name, run_id) VALUES (?1, ?2, ?3)",
                    project, name, id));
        return id;
      }
      return fail("no free id for run " + name);
    };
    return within("name run " + name, write_transaction(db, claim));
  });
}

Result<std::string> RunNames::name_of(const std::string& run_id) {
  return store_.locked([&](Db& db) -> Result<std::string> {
    auto named = first_row<std::string>(db, read_text0,
                                        "SELECT name FROM run_names WHERE run_id = ?1", run_id);
    if (!named) return within("name of run " + run_id, Result<std::string>(named.take_error()));
    return *named ? **named : run_id;
  });
}

}  // namespace rf::store
