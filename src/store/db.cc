#include "store/db.h"

#include <sqlite3.h>

#include <thread>

namespace rf::store {
namespace {

// The start of a statement's text, enough to tell which one failed.
std::string sql_excerpt(std::string_view sql) {
  constexpr size_t kMax = 60;
  std::string out(sql.substr(0, kMax));
  for (char& c : out) {
    if (c == '\n') c = ' ';
  }
  if (sql.size() > kMax) out += "...";
  return out;
}

std::string sqlite_message(sqlite3* db, int rc) {
  return db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
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
      return make_error("PRAGMA journal_mode = WAL", sqlite3_errmsg(db));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

// ---- Statement ----

Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement::Statement(Statement&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)),
      stmt_(std::exchange(other.stmt_, nullptr)),
      bind_error_(std::move(other.bind_error_)) {}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    sqlite3_finalize(stmt_);
    db_ = std::exchange(other.db_, nullptr);
    stmt_ = std::exchange(other.stmt_, nullptr);
    bind_error_ = std::move(other.bind_error_);
  }
  return *this;
}

Error Statement::error(std::string_view what) const {
  std::string where = std::string(what) + " \"" + sql_excerpt(sqlite3_sql(stmt_)) + "\"";
  return make_error(std::move(where), sqlite3_errmsg(db_));
}

void Statement::note_bind(int rc, int index) {
  if (rc == SQLITE_OK || bind_error_) return;
  bind_error_ = error("bind parameter " + std::to_string(index) + " of");
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  bind_error_.reset();
}

Statement& Statement::bind(int index, int64_t value) {
  note_bind(sqlite3_bind_int64(stmt_, index, value), index);
  return *this;
}

Statement& Statement::bind(int index, std::string_view text) {
  note_bind(
      sqlite3_bind_text64(stmt_, index, text.data(), text.size(), SQLITE_TRANSIENT, SQLITE_UTF8),
      index);
  return *this;
}

Statement& Statement::bind(int index, const std::optional<std::string>& text) {
  return text ? bind(index, std::string_view(*text)) : bind_null(index);
}

Statement& Statement::bind(int index, std::optional<int64_t> value) {
  return value ? bind(index, *value) : bind_null(index);
}

Statement& Statement::bind_blob(int index, std::string_view bytes) {
  // A zero-length blob, not NULL, when bytes is empty.
  note_bind(sqlite3_bind_blob64(stmt_, index, bytes.empty() ? "" : bytes.data(), bytes.size(),
                                SQLITE_TRANSIENT),
            index);
  return *this;
}

Statement& Statement::bind_null(int index) {
  note_bind(sqlite3_bind_null(stmt_, index), index);
  return *this;
}

Result<bool> Statement::step() {
  if (bind_error_) return *bind_error_;
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  Error err = error("step");
  sqlite3_reset(stmt_);
  return err;
}

Status Statement::run() {
  while (true) {
    auto row = step();
    if (!row.ok()) return row.take_error();
    if (!*row) return ok_status();
  }
}

bool Statement::is_null(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

int64_t Statement::int64(int column) const { return sqlite3_column_int64(stmt_, column); }

std::string Statement::text(int column) const {
  const unsigned char* p = sqlite3_column_text(stmt_, column);
  if (p == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(p), sqlite3_column_bytes(stmt_, column));
}

std::string Statement::blob(int column) const {
  const void* p = sqlite3_column_blob(stmt_, column);
  if (p == nullptr) return {};
  return std::string(static_cast<const char*>(p), sqlite3_column_bytes(stmt_, column));
}

std::optional<int64_t> Statement::opt_int64(int column) const {
  if (is_null(column)) return std::nullopt;
  return int64(column);
}

std::optional<std::string> Statement::opt_text(int column) const {
  if (is_null(column)) return std::nullopt;
  return text(column);
}

// ---- Db ----

Result<Db> Db::open(const std::string& path, DbOptions options) {
  Db db;
  db.path_ = path;
  int rc =
      sqlite3_open_v2(path.c_str(), &db.db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  if (rc != SQLITE_OK) return make_error("open database " + path, sqlite_message(db.db_, rc));
  auto configured = db.configure(options);
  if (!configured.ok()) {
    return make_error("open database " + path, configured.error().to_string());
  }
  return db;
}

// Waits for another connection's write lock. SQLite's own handler sleeps 1, 2,
// 5, 10... ms, but writers here hold the lock for tens of microseconds: with
// many writers its long sleeps left the lock idle most of the time (64 clients:
// ~25 calls/s). Short sleeps first, then longer, up to the busy timeout.
struct Db::BusyWait {
  std::chrono::milliseconds timeout;
  std::chrono::steady_clock::time_point since;
};

namespace {
int on_busy(void* context, int count) {
  using namespace std::chrono;
  auto* wait = static_cast<Db::BusyWait*>(context);
  const auto now = steady_clock::now();
  if (count == 0) wait->since = now;
  if (now - wait->since >= wait->timeout) return 0;
  std::this_thread::sleep_for(count < 8    ? microseconds(20)
                              : count < 64 ? microseconds(100)
                                           : microseconds(1000));
  return 1;
}
}  // namespace

Status Db::configure(const DbOptions& options) {
  sqlite3_extended_result_codes(db_, 1);
  busy_ = std::make_unique<BusyWait>(BusyWait{options.busy_timeout, {}});
  sqlite3_busy_handler(db_, on_busy, busy_.get());
  RF_TRY(exec("PRAGMA foreign_keys = ON"));
  RF_TRY(set_wal(db_, options.busy_timeout));
  return exec("PRAGMA synchronous = NORMAL");
}

void Db::close() {
  // All statements are finalized by their owners first; close_v2 defers if not.
  sqlite3_close_v2(db_);
  db_ = nullptr;
}

Db::~Db() { close(); }

Db::Db(Db&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)),
      path_(std::move(other.path_)),
      busy_(std::move(other.busy_)) {}

Db& Db::operator=(Db&& other) noexcept {
  if (this != &other) {
    close();
    db_ = std::exchange(other.db_, nullptr);
    path_ = std::move(other.path_);
    busy_ = std::move(other.busy_);
  }
  return *this;
}

Result<Statement> Db::prepare(std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) {
    return make_error("prepare \"" + sql_excerpt(sql) + "\"", sqlite_message(db_, rc));
  }
  return Statement(db_, stmt);
}

Status Db::exec(std::string_view sql) {
  std::string text(sql);  // sqlite3_exec wants a NUL-terminated string
  char* message = nullptr;
  int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &message);
  if (rc == SQLITE_OK) return ok_status();
  std::string why = message != nullptr ? message : sqlite3_errstr(rc);
  sqlite3_free(message);
  return make_error("exec \"" + sql_excerpt(sql) + "\"", why);
}

int64_t Db::last_insert_rowid() const { return sqlite3_last_insert_rowid(db_); }

int Db::changes() const { return sqlite3_changes(db_); }

bool Db::in_transaction() const { return sqlite3_get_autocommit(db_) == 0; }

// ---- Transaction ----

Result<Transaction> Transaction::begin(Db& db, Kind kind) {
  RF_TRY(db.exec(kind == Kind::write ? "BEGIN IMMEDIATE" : "BEGIN"));
  return Transaction(&db);
}

Transaction::Transaction(Transaction&& other) noexcept : db_(std::exchange(other.db_, nullptr)) {}

Status Transaction::commit() {
  Db* db = std::exchange(db_, nullptr);
  auto committed = db->exec("COMMIT");
  // A failed COMMIT can leave the transaction open; end it so the connection
  // stays usable.
  if (!committed.ok() && db->in_transaction()) (void)db->exec("ROLLBACK");
  return committed;
}

Transaction::~Transaction() {
  // SQLite may already have rolled back by itself (on some errors); then there is
  // nothing left to end.
  if (db_ != nullptr && db_->in_transaction()) (void)db_->exec("ROLLBACK");
}

}  // namespace rf::store
