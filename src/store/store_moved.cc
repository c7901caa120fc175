#include "store/store_moved.h"

#include "core/utc_time.h"
#include "store/sql.h"

namespace rf::store {
using namespace sql;
Status mark_moved(Db& from, const std::string& to_name, int64_t at_ms) {
  return within(
      "mark " + engine::redact_uri(from.path()) + " as moved",
      exec(from, "INSERT INTO store_moved (to_store, moved_at) VALUES (?1, ?2)", to_name, at_ms));
}

Status refuse_moved(Db& db, const std::string& name) {
  struct Moved {
    std::string to;
    int64_t at = 0;
  };
  auto read = [](const Statement& st) -> Result<Moved> { return Moved{st.text(0), st.int64(1)}; };
  auto moved = first_row<Moved>(
      db, read, "SELECT to_store, moved_at FROM store_moved ORDER BY moved_at LIMIT 1");
  if (!moved.ok()) return moved.take_error();
  if (!*moved) return ok_status();
  return make_error(name, "this store was moved to " + (*moved)->to +
                              " by `ringfence store "
                              "migrate` at " +
                              iso_utc((*moved)->at) + " and takes no more work; name " +
                              (*moved)->to +
                              " to every worker and command (--store, or RINGFENCE_STORE)");
}

}  // namespace rf::store
