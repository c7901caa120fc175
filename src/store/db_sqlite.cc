// The SQLite engine of the store's Db (db.h): one sqlite3 connection.
#include <sqlite3.h>

#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "store/db.h"

namespace rf::store::engine {
namespace {

// SQLite's message for the last error on `db`. An I/O or open error names
// its extended code and the system's errno too: "disk I/O error" alone does
// not say which call failed, nor why.
std::string sqlite_message(sqlite3* db) {
  std::string message = sqlite3_errmsg(db);
  const int code = sqlite3_extended_errcode(db);
  if ((code & 0xff) != SQLITE_IOERR && (code & 0xff) != SQLITE_CANTOPEN) return message;
  message += " (extended code " + std::to_string(code);
  if (const int err = sqlite3_system_errno(db); err != 0) {
    message += ", errno " + std::to_string(err) + ": " + std::strerror(err);
  }
  return message + ")";
}

std::string sqlite_message(sqlite3* db, int rc) {
  return db != nullptr ? sqlite_message(db) : sqlite3_errstr(rc);
}

// Switches the file to WAL. Converting a new file takes an exclusive lock, and
// SQLite reports busy at once, without its busy handler, when another connection
// holds the file (several processes opening a new file together): retry until
// the busy timeout.
Status set_wal(sqlite3* db, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    std::string mode;
    auto read_mode = [](void* out, int, char** values, char**) {
      *static_cast<std::string*>(out) = values[0] != nullptr ? values[0] : "";
      return 0;
    };
    int rc = sqlite3_exec(db, "PRAGMA journal_mode = WAL", read_mode, &mode, nullptr);
    if (rc == SQLITE_OK && mode == "wal") return ok_status();
    if (rc == SQLITE_OK) {
      return make_error("journal_mode", "the file system refused WAL mode (got \"" + mode + "\")");
    }
    if ((rc & 0xff) != SQLITE_BUSY || std::chrono::steady_clock::now() >= deadline) {
      return make_error("PRAGMA journal_mode = WAL", sqlite_message(db));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// Statements a connection prepared once and keeps for the next use of the
// same SQL text: a store runs the same few dozen statements for every call,
// and parsing them again each time was a tenth of a worker's CPU per call.
// Used under the store's lock, as the connection is.
class StatementCache {
 public:
  ~StatementCache() {
    for (auto& [sql, idle] : idle_) {
      for (sqlite3_stmt* s : idle) sqlite3_finalize(s);
    }
  }
  sqlite3_stmt* take(std::string_view sql) {
    auto it = idle_.find(sql);
    if (it == idle_.end() || it->second.empty()) return nullptr;
    sqlite3_stmt* s = it->second.back();
    it->second.pop_back();
    return s;
  }
  // Kept (reset, bindings cleared) unless the cache is full; else finalized.
  void give_back(sqlite3_stmt* s) {
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    const char* sql = sqlite3_sql(s);
    auto it = idle_.find(std::string_view(sql));
    if (it == idle_.end()) {
      if (idle_.size() >= kMaxTexts) {
        sqlite3_finalize(s);
        return;
      }
      it = idle_.emplace(std::string(sql), std::vector<sqlite3_stmt*>{}).first;
    }
    if (it->second.size() >= kMaxPerText) {
      sqlite3_finalize(s);
      return;
    }
    it->second.push_back(s);
  }

 private:
  static constexpr size_t kMaxTexts = 256, kMaxPerText = 4;
  std::map<std::string, std::vector<sqlite3_stmt*>, std::less<>> idle_;
};

class SqliteStatement final : public StatementImpl {
 public:
  SqliteStatement(sqlite3* db, sqlite3_stmt* stmt, StatementCache* cache)
      : db_(db), stmt_(stmt), cache_(cache) {}
  ~SqliteStatement() override { cache_->give_back(stmt_); }
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;

  void bind_int64(int index, int64_t value) override {
    note_bind(sqlite3_bind_int64(stmt_, index, value), index);
  }
  void bind_text(int index, std::string_view text) override {
    note_bind(
        sqlite3_bind_text64(stmt_, index, text.data(), text.size(), SQLITE_TRANSIENT, SQLITE_UTF8),
        index);
  }
  void bind_blob(int index, std::string_view bytes) override {
    note_bind(sqlite3_bind_blob64(stmt_, index, bytes.empty() ? "" : bytes.data(), bytes.size(),
                                  SQLITE_TRANSIENT),
              index);
  }
  void bind_null(int index) override { note_bind(sqlite3_bind_null(stmt_, index), index); }

  Result<bool> step() override {
    if (bind_error_) return *bind_error_;
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    Error err = error("step");
    sqlite3_reset(stmt_);
    return err;
  }

  void reset() override {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    bind_error_.reset();
  }

  bool is_null(int column) const override {
    return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
  }
  int64_t int64(int column) const override { return sqlite3_column_int64(stmt_, column); }
  std::string text(int column) const override {
    const unsigned char* p = sqlite3_column_text(stmt_, column);
    if (p == nullptr) return {};
    return std::string(reinterpret_cast<const char*>(p), sqlite3_column_bytes(stmt_, column));
  }
  std::string blob(int column) const override {
    const void* p = sqlite3_column_blob(stmt_, column);
    if (p == nullptr) return {};
    return std::string(static_cast<const char*>(p), sqlite3_column_bytes(stmt_, column));
  }

 private:
  Error error(std::string_view what) const {
    std::string where = std::string(what) + " \"" + sql_excerpt(sqlite3_sql(stmt_)) + "\"";
    return make_error(std::move(where), sqlite_message(db_));
  }
  void note_bind(int rc, int index) {
    if (rc == SQLITE_OK || bind_error_) return;
    bind_error_ = error("bind parameter " + std::to_string(index) + " of");
  }

  sqlite3* db_;
  sqlite3_stmt* stmt_;
  StatementCache* cache_;
  std::optional<Error> bind_error_;
};

// Waits for another connection's write lock. SQLite's own handler sleeps 1, 2,
// 5, 10... ms, but writers here hold the lock for tens of microseconds: with
// many writers its long sleeps left the lock idle most of the time (64 clients:
// ~25 calls/s). Short sleeps first, then longer, up to the busy timeout.
struct BusyWait {
  std::chrono::milliseconds timeout;
  std::chrono::steady_clock::time_point since;
};

int on_busy(void* context, int count) {
  using namespace std::chrono;
  auto* wait = static_cast<BusyWait*>(context);
  const auto now = steady_clock::now();
  if (count == 0) wait->since = now;
  if (now - wait->since >= wait->timeout) return 0;
  std::this_thread::sleep_for(count < 8    ? microseconds(20)
                              : count < 64 ? microseconds(100)
                                           : microseconds(1000));
  return 1;
}

class SqliteConnection final : public ConnectionImpl {
 public:
  explicit SqliteConnection(sqlite3* db) : db_(db) {}
  // close_v2 leaves the connection open until its last statement is
  // finalized: the kept ones, by cache_'s destructor right after this one.
  ~SqliteConnection() override { sqlite3_close_v2(db_); }
  SqliteConnection(const SqliteConnection&) = delete;
  SqliteConnection& operator=(const SqliteConnection&) = delete;

  Status configure(const DbOptions& options) {
    sqlite3_extended_result_codes(db_, 1);
    busy_.timeout = options.busy_timeout;
    sqlite3_busy_handler(db_, on_busy, &busy_);
    RF_TRY(exec("PRAGMA foreign_keys = ON"));
    RF_TRY(set_wal(db_, options.busy_timeout));
    return exec("PRAGMA synchronous = NORMAL");
  }

  Result<std::unique_ptr<StatementImpl>> prepare(std::string_view sql) override {
    if (sqlite3_stmt* kept = cache_.take(sql)) {
      return std::unique_ptr<StatementImpl>(new SqliteStatement(db_, kept, &cache_));
    }
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
    if (rc != SQLITE_OK) {
      return make_error("prepare \"" + sql_excerpt(sql) + "\"", sqlite_message(db_, rc));
    }
    return std::unique_ptr<StatementImpl>(new SqliteStatement(db_, stmt, &cache_));
  }

  Status exec(std::string_view sql) override {
    std::string text(sql);  // sqlite3_exec wants a NUL-terminated string
    char* message = nullptr;
    int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &message);
    if (rc == SQLITE_OK) return ok_status();
    const bool io = (rc & 0xff) == SQLITE_IOERR || (rc & 0xff) == SQLITE_CANTOPEN;
    std::string why = io ? sqlite_message(db_) : message != nullptr ? message : sqlite3_errstr(rc);
    sqlite3_free(message);
    return make_error("exec \"" + sql_excerpt(sql) + "\"", why);
  }

  int changes() const override { return sqlite3_changes(db_); }
  bool in_transaction() const override { return sqlite3_get_autocommit(db_) == 0; }
  Status begin(TransactionKind kind) override {
    return exec(kind == TransactionKind::read ? "BEGIN" : "BEGIN IMMEDIATE");
  }

  Status commit() override {
    auto committed = exec("COMMIT");
    // A failed COMMIT can leave the transaction open; end it so the connection
    // stays usable.
    if (!committed.ok() && in_transaction()) (void)exec("ROLLBACK");
    return committed;
  }

  // SQLite may already have rolled back by itself (on some errors); then there
  // is nothing left to end.
  void rollback() override {
    if (in_transaction()) (void)exec("ROLLBACK");
  }

 private:
  sqlite3* db_;
  BusyWait busy_{};
  StatementCache cache_;
};

}  // namespace

Result<std::unique_ptr<ConnectionImpl>> open_sqlite(const std::string& path,
                                                    const DbOptions& options) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  auto conn = std::make_unique<SqliteConnection>(db);  // closes db, even a failed one
  if (rc != SQLITE_OK) return make_error("open database " + path, sqlite_message(db, rc));
  auto configured = conn->configure(options);
  if (!configured.ok()) {
    return make_error("open database " + path, configured.error().to_string());
  }
  return std::unique_ptr<ConnectionImpl>(std::move(conn));
}

}  // namespace rf::store::engine
