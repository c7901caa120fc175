// A thin RAII layer over the store's database: a connection (Db), prepared
// statements (Statement) and transactions, on one of two engines:
//   - SQLite (a file path): embedded, the default;
//   - PostgreSQL (a postgres:// or postgresql:// URI, libpq): shared by the
//     workers of many hosts.
// Callers write one SQL for both: parameters ?1, ?2... (the PostgreSQL engine
// sends them as $1, $2...), and the common subset of the two dialects (sql.h
// has the few helpers where they differ). Errors are values naming the
// statement and the engine's own text. No ORM.
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
#include <vector>

#include "core/result.h"

namespace rf::store {

enum class Engine { sqlite, postgres };

// What a transaction is for (Transaction::begin).
enum class TransactionKind {
  read,   // one consistent snapshot for several reads (SQLite: BEGIN;
          // PostgreSQL: REPEATABLE READ)
  write,  // takes the database's write lock now, so writers take turns and
          // reads inside see what the writes will be applied to (SQLite:
          // BEGIN IMMEDIATE, waiting up to the busy timeout; PostgreSQL: a
          // transaction-scoped advisory lock, db_postgres.cc)
  claim,  // a write that touches only rows it has locked (SELECT ... FOR
          // UPDATE SKIP LOCKED, then UPDATE those rows), so it need not
          // wait for the write lock: PostgreSQL takes none; on SQLite, as write
};

// true for a postgres:// or postgresql:// URI, or a libpq keyword string
// ("host=/run/pg dbname=rf": it starts with a keyword and '='); anything
// else is a SQLite file (Db::open refuses another scheme's URI).
bool is_postgres_uri(std::string_view target);
// Whether a store's target holds a password (a URI's user:PW@, or password=
// in a URI's query or a keyword string): what argv and the environment must
// never carry (docs/store.md: PGPASSFILE).
bool holds_password(std::string_view target);
// The SQLite file a target names: "sqlite:PATH" or PATH itself.
std::string sqlite_path(std::string_view target);

namespace engine {
// What each engine implements (db_sqlite.cc, db_postgres.cc).
class StatementImpl {
 public:
  virtual ~StatementImpl() = default;
  // A failed bind is kept and reported by step().
  virtual void bind_int64(int index, int64_t value) = 0;
  virtual void bind_text(int index, std::string_view text) = 0;
  virtual void bind_blob(int index, std::string_view bytes) = 0;
  virtual void bind_null(int index) = 0;
  virtual Result<bool> step() = 0;
  virtual void reset() = 0;
  virtual bool is_null(int column) const = 0;
  virtual int64_t int64(int column) const = 0;
  virtual std::string text(int column) const = 0;
  virtual std::string blob(int column) const = 0;
};

class ConnectionImpl {
 public:
  virtual ~ConnectionImpl() = default;
  virtual Result<std::unique_ptr<StatementImpl>> prepare(std::string_view sql) = 0;
  virtual Status exec(std::string_view sql) = 0;
  virtual int changes() const = 0;
  virtual bool in_transaction() const = 0;
  virtual Status begin(TransactionKind kind) = 0;
  virtual Status commit() = 0;
  virtual void rollback() = 0;
  // LISTEN/NOTIFY on this connection (PostgreSQL; SQLite has none): a
  // process that holds one connection hears other processes' rings on it.
  // After listen(), the connection is listened on again whenever it is
  // opened again.
  virtual Status listen(std::string_view /*channel*/) { return ok_status(); }
  // The socket to poll for notifications; -1: none.
  virtual int notification_socket() const { return -1; }
  // The payloads of the notifications that arrived, read without blocking;
  // "*" when the connection was opened again since the last look (what was
  // sent meanwhile is lost: look at everything again).
  virtual std::vector<std::string> notifications() { return {}; }
};
}  // namespace engine

class Statement {
 public:
  Statement() = default;
  explicit Statement(std::unique_ptr<engine::StatementImpl> impl) : impl_(std::move(impl)) {}
  Statement(Statement&& other) noexcept = default;
  Statement& operator=(Statement&& other) noexcept = default;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Parameters are 1-based (?1, ?2...). A failed bind is reported by step().
  Statement& bind(int index, int64_t value) {
    impl_->bind_int64(index, value);
    return *this;
  }
  Statement& bind(int index, std::string_view text) {  // TEXT
    impl_->bind_text(index, text);
    return *this;
  }
  Statement& bind(int index, const std::string& text) {
    return bind(index, std::string_view(text));
  }
  Statement& bind(int index, const char* text) { return bind(index, std::string_view(text)); }
  Statement& bind(int index, const std::optional<std::string>& text) {
    return text ? bind(index, std::string_view(*text)) : bind_null(index);
  }
  Statement& bind(int index, std::optional<int64_t> value) {
    return value ? bind(index, *value) : bind_null(index);
  }
  // A zero-length blob, not NULL, when bytes is empty.
  Statement& bind_blob(int index, std::string_view bytes) {
    impl_->bind_blob(index, bytes);
    return *this;
  }
  Statement& bind_null(int index) {
    impl_->bind_null(index);
    return *this;
  }

  // true: a row is ready to read; false: the statement is done.
  Result<bool> step() { return impl_->step(); }
  // Steps to the end; for statements that return no rows.
  Status run();
  // Ready to bind and run again (bindings cleared).
  void reset() { impl_->reset(); }

  // Columns are 0-based.
  bool is_null(int column) const { return impl_->is_null(column); }
  int64_t int64(int column) const { return impl_->int64(column); }
  std::string text(int column) const { return impl_->text(column); }  // "" for NULL
  std::string blob(int column) const { return impl_->blob(column); }  // "" for NULL
  std::optional<int64_t> opt_int64(int column) const;
  std::optional<std::string> opt_text(int column) const;

 private:
  std::unique_ptr<engine::StatementImpl> impl_;
};

struct DbOptions {
  std::chrono::milliseconds busy_timeout{5000};
  // PostgreSQL: each statement is parsed with its execution, in one round
  // trip, and never kept (a prepared one costs three the first time): for a
  // client process, which runs most statements once.
  bool one_shot_statements = false;
};

class Db {
 public:
  // `target` is a SQLite file (created if missing) or a postgres:// URI.
  // SQLite: extended result codes, busy timeout, foreign keys on, WAL journal,
  // synchronous=NORMAL (in WAL mode a crash of the process loses nothing; a
  // power cut may lose the last commits, never consistency).
  // PostgreSQL: one libpq connection; statements are prepared once per
  // connection and kept.
  static Result<Db> open(const std::string& target, DbOptions options = {});

  Db() = default;
  ~Db() = default;
  Db(Db&& other) noexcept = default;
  Db& operator=(Db&& other) noexcept = default;
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  Result<Statement> prepare(std::string_view sql);
  // Runs one or more statements without parameters or rows (DDL, pragmas).
  Status exec(std::string_view sql);
  // Rows changed by the last INSERT, UPDATE or DELETE.
  int changes() const { return conn_->changes(); }
  bool in_transaction() const { return conn_->in_transaction(); }
  Engine engine() const { return engine_; }
  // The file, or the URI without its password: fit for errors and logs.
  const std::string& path() const { return path_; }

  engine::ConnectionImpl& connection() { return *conn_; }
  // See engine::ConnectionImpl.
  Status listen(std::string_view channel) { return conn_->listen(channel); }
  int notification_socket() const { return conn_->notification_socket(); }
  std::vector<std::string> notifications() { return conn_->notifications(); }

 private:
  Db(Engine engine, std::string path, std::unique_ptr<engine::ConnectionImpl> conn)
      : engine_(engine), path_(std::move(path)), conn_(std::move(conn)) {}

  Engine engine_ = Engine::sqlite;
  std::string path_;
  std::unique_ptr<engine::ConnectionImpl> conn_;
};

// The engines' openers. SQLite is always there (db_sqlite.cc); PostgreSQL
// (db_postgres.cc, library rf_store_postgres) is registered by the programs
// that link it (store/postgres.h): libpq cannot be linked statically, and the
// static `ringfence` (cmake/static_cli.cmake) does without it.
namespace engine {
using Opener = Result<std::unique_ptr<ConnectionImpl>> (*)(const std::string& target,
                                                           const DbOptions& options);
Result<std::unique_ptr<ConnectionImpl>> open_sqlite(const std::string& path,
                                                    const DbOptions& options);
void register_postgres(Opener opener);
// The URI with any password replaced by "***".
std::string redact_uri(std::string_view uri);
// The start of a statement's text on one line: enough to tell which failed.
std::string sql_excerpt(std::string_view sql);
}  // namespace engine

// A transaction that rolls back when destroyed without commit().
class Transaction {
 public:
  using Kind = TransactionKind;
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
auto claim_transaction(Db& db, F&& fn) -> decltype(fn()) {
  return in_transaction(db, Transaction::Kind::claim, std::forward<F>(fn));
}

template <class F>
auto read_transaction(Db& db, F&& fn) -> decltype(fn()) {
  return in_transaction(db, Transaction::Kind::read, std::forward<F>(fn));
}

}  // namespace rf::store
