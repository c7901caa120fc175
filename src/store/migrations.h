// The store's schema as an ordered list of versioned migrations, one list for
// both engines. Each one is
// applied in its own write transaction and recorded in schema_version, so a
// half-applied migration never exists and applying twice is a no-op. Several
// processes may open (and so migrate) the same file at once: the version is read
// again under the write lock before each step.
#pragma once

#include <span>
#include <string_view>

#include "core/result.h"
#include "store/db.h"

namespace rf::store {

// Each version is written for both engines; the two say the same in their
// own dialects.
struct Migration {
  int version;                // 1, 2, 3...: strictly increasing
  std::string_view sql;       // SQLite: one or more statements
  std::string_view postgres;  // the same on PostgreSQL
  // On SQLite, the migration rebuilds a table others refer to (create new,
  // copy, drop, rename): it runs with foreign keys off, which are checked
  // before commit. (PostgreSQL changes constraints in place.)
  bool rebuilds_tables = false;
  // Builds that know only the versions before it keep working on a store it
  // was applied to (it adds nullable or defaulted columns, tables or indexes,
  // and no older build's statement changes meaning): a fleet upgrades one
  // worker at a time (docs/fleet.md). Recorded from version 14 on; versions
  // before 14 count as breaking.
  bool keeps_older_builds = false;
};

// The migrations this build knows, in order.
std::span<const Migration> migrations();

// The version recorded in `db` (0 for a file that has none yet).
Result<int> schema_version(Db& db);

// Applies the migrations newer than the file's version. A file whose version is
// newer than the last of `list` is used as it is when every newer version
// keeps older builds; otherwise it is refused, naming both versions.
Status migrate(Db& db, std::span<const Migration> list = migrations());

}  // namespace rf::store
