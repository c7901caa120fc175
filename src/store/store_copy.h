// Moving a store from one engine to the other (`ringfence store migrate`,
// issue 16): every row of every table of `from` into `to`, which must be
// empty, as one transaction on `to`, so the move lands whole or not at all.
// The audit chain is verified on both sides: before the copy (a broken chain
// is not moved) and in the target before its transaction commits (the same
// events, the same head).
//
// The copy is generic over the schema both stores share (the same migration
// version): tables and columns are read from the engines' catalogs, never
// listed here, so a new migration needs nothing in this file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"
#include "store/db.h"

namespace rf::store {

struct TableCopied {
  std::string table;
  int64_t rows = 0;
};

struct StoreCopyReport {
  int schema_version = 0;
  std::vector<TableCopied> tables;  // in the order copied (referenced tables first)
  int64_t rows = 0;                 // all tables
  int64_t audit_events = 0;         // verified in both stores
  std::string audit_head;           // the chain's last hash, the same in both
};

// Copies `from` into `to`. Both are migrated to this build's schema first.
// Refused, with nothing written, when: `to` holds any row (named: table and
// count); `from` has a worker whose heartbeat is live (a store in use is not
// moved); `from`'s audit chain is broken; a table or column of one store is
// missing from the other. `live_window_ms`: how recent a heartbeat counts as
// live (0: no check).
Result<StoreCopyReport> copy_store(Db& from, Db& to, int64_t live_window_ms);

}  // namespace rf::store
