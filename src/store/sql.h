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

// Puts the operation in front of an error: "enqueue call in run R: run R has ended".
template <class T>
Result<T> within(const std::string& operation, Result<T> result) {
  if (result.ok()) return result;
  return make_error(operation, result.error().to_string());
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

}  // namespace rf::store::sql
