// The store's SQL helpers (store-side only, for store.cc and the store's other
// tables: identity_store.cc, audit_log.cc): statements with their parameters
// bound in order (?1, ?2, ...), rows read into values, errors that read as
// sentences. Not part of the store's interface.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"
#include "store/db.h"

namespace rf::store::sql {

// An error whose message is the whole sentence ("run R has ended").
inline Error fail(std::string message) { return make_error("", std::move(message)); }

// A writer whose worker id was registered again since it registered it
// (store.h: fencing tokens).
inline Error fenced(const std::string& worker, int64_t mine, int64_t current) {
  return make_error(ErrorCode::kFenced, "",
                    "worker " + worker + " was registered again (epoch " + std::to_string(current) +
                        ") since this process registered it (epoch " + std::to_string(mine) +
                        "): fenced, another process serves as " + worker + " now");
}

// A write to a call or run the worker no longer holds ("... (lease lost): it
// is interrupted").
inline Error lease_lost(std::string message) {
  return make_error(ErrorCode::kLeaseLost, "", std::move(message));
}

// The worker must be registered and running, and, when this process
// registered it (`fence`), still under that registration. Its row is
// share-locked on PostgreSQL until the transaction ends, so a claim (which
// takes no write lock) and stop_worker or a new registration come one after
// the other. Returns its epoch: the fencing token its claims carry.
inline Result<int64_t> require_running_worker(Db& db, const std::string& id,
                                              std::optional<int64_t> fence);

// Puts the operation in front of an error: "enqueue call in run R: run R has
// ended". Its code stays (kUnavailable: the store could not be reached).
template <class T>
Result<T> within(const std::string& operation, Result<T> result) {
  if (result.ok()) return result;
  return make_error(result.error().code, operation, result.error().to_string());
}

struct Blob {
  std::string_view bytes;
};

template <class T>
void bind_one(Statement& st, int index, const T& value) {
  st.bind(index, value);
}
inline void bind_one(Statement& st, int index, Blob blob) { st.bind_blob(index, blob.bytes); }
inline void bind_one(Statement& st, int index, int value) { st.bind(index, int64_t{value}); }

template <class... Args>
Result<Statement> query(Db& db, std::string_view sql, const Args&... args) {
  auto st = db.prepare(sql);
  if (!st.ok()) return st;
  int index = 0;
  (bind_one(*st, ++index, args), ...);
  return st;
}

template <class... Args>
Status exec(Db& db, std::string_view sql, const Args&... args) {
  auto st = query(db, sql, args...);
  if (!st.ok()) return st.take_error();
  return st->run();
}

// Steps through the rows of a bound statement, reading each with `read`
// (Statement -> Result<T>).
template <class T, class Read>
Result<std::vector<T>> read_rows(Statement& st, Read read) {
  std::vector<T> out;
  while (true) {
    auto row = st.step();
    if (!row.ok()) return row.take_error();
    if (!*row) return out;
    auto item = read(st);
    if (!item.ok()) return item.take_error();
    out.push_back(std::move(*item));
  }
}

template <class T, class Read, class... Args>
Result<std::vector<T>> rows(Db& db, Read read, std::string_view sql, const Args&... args) {
  auto st = query(db, sql, args...);
  if (!st.ok()) return st.take_error();
  return read_rows<T>(*st, read);
}

// The first row read with `read`, or nullopt.
template <class T, class Read, class... Args>
Result<std::optional<T>> first_row(Db& db, Read read, std::string_view sql, const Args&... args) {
  auto all = rows<T>(db, read, sql, args...);
  if (!all.ok()) return all.take_error();
  if (all->empty()) return std::optional<T>();
  return std::optional<T>(std::move(all->front()));
}

inline Result<std::string> read_text0(const Statement& st) { return st.text(0); }
inline Result<int64_t> read_int0(const Statement& st) { return st.int64(0); }

// The id an INSERT ... RETURNING id gave the new row.
template <class... Args>
Result<int64_t> inserted_id(Db& db, std::string_view sql, const Args&... args) {
  auto id = first_row<int64_t>(db, read_int0, sql, args...);
  if (!id.ok()) return id.take_error();
  if (!*id) return fail("the insert returned no id");
  return **id;
}

// Where the two engines' SQL differs.
// The elements of the JSON array (of strings) bound to ?N, as rows of one
// column: `x IN (json_values(db, 1))`.
inline std::string json_values(const Db& db, int param) {
  const std::string p = "?" + std::to_string(param);
  return db.engine() == Engine::sqlite
             ? "SELECT value FROM json_each(" + p + ")"
             : "SELECT value FROM json_array_elements_text(" + p + "::json)";
}
// Locks the rows a SELECT reads, skipping those another transaction holds:
// PostgreSQL's queue idiom (claim_transaction). "" on SQLite, whose writers
// take turns anyway.
inline std::string skip_locked(const Db& db) {
  return db.engine() == Engine::sqlite ? "" : " FOR UPDATE SKIP LOCKED";
}
// Locks the rows a SELECT reads for update until the transaction ends (the
// writes of a claim transaction, which takes no write lock: others writing
// those rows wait). "" on SQLite. `of`: only that table's rows (a join).
inline std::string for_update(const Db& db, std::string_view of = {}) {
  if (db.engine() == Engine::sqlite) return "";
  return of.empty() ? " FOR UPDATE" : " FOR UPDATE OF " + std::string(of);
}
// Share-locks the rows a SELECT reads until the transaction ends (a writer of
// them waits). "" on SQLite.
inline std::string share_locked(const Db& db) {
  return db.engine() == Engine::sqlite ? "" : " FOR SHARE";
}
// True when the labels a row requires (`column`, a JSON object of strings)
// are all among those bound to ?N, with the same values: which calls a worker
// with those labels may take. "{}" (nothing required) matches at once.
inline std::string labels_held(const Db& db, std::string_view column, int param) {
  const std::string c(column), p = "?" + std::to_string(param);
  if (db.engine() == Engine::sqlite) {
    return "(" + c + " = '{}' OR NOT EXISTS (SELECT 1 FROM json_each(" + c +
           ") r WHERE NOT EXISTS (SELECT 1 FROM json_each(" + p +
           ") w WHERE w.key = r.key AND w.value = r.value)))";
  }
  return "(" + c + " = '{}' OR " + c + "::jsonb <@ " + p + "::jsonb)";
}
// A column that orders a table's rows as inserted: SQLite's rowid, and on
// PostgreSQL the identity column `ord` that its migrations give such tables.
inline std::string insertion_order(const Db& db) {
  return db.engine() == Engine::sqlite ? "rowid" : "ord";
}

// A worker registered running under `fence`: its epoch, and whether the
// operator cordoned it or drains it (then it takes no new work).
struct RunningWorker {
  int64_t epoch = 0;
  std::string admin;  // "", "cordoned" or "draining"
  bool takes_work() const { return admin.empty(); }
};

inline Result<RunningWorker> running_worker(Db& db, const std::string& id,
                                            std::optional<int64_t> fence) {
  struct Row {
    std::string state;
    int64_t epoch;
    std::string admin;
  };
  auto read = [](const Statement& st) -> Result<Row> {
    return Row{st.text(0), st.int64(1), st.text(2)};
  };
  auto row = first_row<Row>(
      db, read, "SELECT state, epoch, admin FROM workers WHERE id = ?1" + share_locked(db), id);
  if (!row.ok()) return row.take_error();
  if (!*row) return fail("worker " + id + " is not registered");
  const Row& r = **row;
  if (fence && *fence != r.epoch) return fenced(id, *fence, r.epoch);
  if (r.state != "running") return fail("worker " + id + " is " + r.state);
  return RunningWorker{r.epoch, r.admin};
}

inline Result<int64_t> require_running_worker(Db& db, const std::string& id,
                                              std::optional<int64_t> fence) {
  auto w = running_worker(db, id, fence);
  if (!w.ok()) return w.take_error();
  return w->epoch;
}

}  // namespace rf::store::sql
