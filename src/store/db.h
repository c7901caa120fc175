// A thin RAII layer over SQLite: a connection (Db), prepared statements
// (Statement) and transactions. Errors are values naming the statement and
// SQLite's own text. No ORM: callers write SQL.
//
// A Db is one connection and is not shared between threads without a lock (the
// Store holds one). Never carry an open Db across fork(): the child opens its own.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "core/result.h"

struct sqlite3;
struct sqlite3_stmt;

namespace rf::store {

class Statement {
 public:
  Statement() = default;
  Statement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  ~Statement();
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Parameters are 1-based, as in SQLite. A failed bind is reported by step().
  Statement& bind(int index, int64_t value);
  Statement& bind(int index, std::string_view text);  // TEXT
  Statement& bind(int index, const std::string& text) {
    return bind(index, std::string_view(text));
  }
  Statement& bind(int index, const char* text) { return bind(index, std::string_view(text)); }
  Statement& bind(int index, const std::optional<std::string>& text);
  Statement& bind(int index, std::optional<int64_t> value);
  Statement& bind_blob(int index, std::string_view bytes);
  Statement& bind_null(int index);

  // true: a row is ready to read; false: the statement is done.
  Result<bool> step();
  // Steps to the end; for statements that return no rows.
  Status run();
  // Ready to bind and run again (bindings cleared).
  void reset();

  // Columns are 0-based, as in SQLite.
  bool is_null(int column) const;
  int64_t int64(int column) const;
  std::string text(int column) const;  // "" for NULL
  std::string blob(int column) const;  // "" for NULL
  std::optional<int64_t> opt_int64(int column) const;
  std::optional<std::string> opt_text(int column) const;

 private:
  void note_bind(int rc, int index);
  Error error(std::string_view what) const;

  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
  std::optional<Error> bind_error_;
};

struct DbOptions {
  std::chrono::milliseconds busy_timeout{5000};
};

class Db {
 public:
  // Opens (creating) the file, then: extended result codes, busy timeout, foreign
  // keys on, WAL journal, synchronous=NORMAL (in WAL mode a crash of the process
  // loses nothing; a power cut may lose the last commits, never consistency).
  static Result<Db> open(const std::string& path, DbOptions options = {});

  Db() = default;
  ~Db();
  Db(Db&& other) noexcept;
  Db& operator=(Db&& other) noexcept;
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  Result<Statement> prepare(std::string_view sql);
  // Runs one or more statements without parameters or rows (DDL, pragmas).
  Status exec(std::string_view sql);
  int64_t last_insert_rowid() const;
  // Rows changed by the last INSERT, UPDATE or DELETE.
  int changes() const;
  bool in_transaction() const;
  const std::string& path() const { return path_; }

  struct BusyWait;  // the busy handler's state (db.cc)

 private:
  Status configure(const DbOptions& options);
  void close();

  sqlite3* db_ = nullptr;
  std::string path_;
  std::unique_ptr<BusyWait> busy_;  // stable address for SQLite's callback
};

// A transaction that rolls back when destroyed without commit().
class Transaction {
 public:
  enum class Kind {
    read,   // BEGIN (deferred): one consistent snapshot for several reads
    write,  // BEGIN IMMEDIATE: takes the write lock now (waiting up to the busy
            // timeout), so reads inside see what the writes will be applied to
  };
  static Result<Transaction> begin(Db& db, Kind kind);

  Transaction(Transaction&& other) noexcept;
  Transaction& operator=(Transaction&&) = delete;
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();

  Status commit();

 private:
  explicit Transaction(Db* db) : db_(db) {}
  Db* db_;
};

// Runs fn() (returning a Status or Result<T>) in a transaction of `kind`:
// commits when it succeeds, rolls everything back when it returns an error.
template <class F>
auto in_transaction(Db& db, Transaction::Kind kind, F&& fn) -> decltype(fn()) {
  auto tx = Transaction::begin(db, kind);
  if (!tx.ok()) return tx.take_error();
  auto result = fn();
  if (!result.ok()) return result;
  RF_TRY(tx->commit());
  return result;
}

template <class F>
auto write_transaction(Db& db, F&& fn) -> decltype(fn()) {
  return in_transaction(db, Transaction::Kind::write, std::forward<F>(fn));
}

template <class F>
auto read_transaction(Db& db, F&& fn) -> decltype(fn()) {
  return in_transaction(db, Transaction::Kind::read, std::forward<F>(fn));
}

}  // namespace rf::store
