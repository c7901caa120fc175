// The PostgreSQL engine of the store's Db (db.h): one libpq connection.
//
// - Statements are prepared once per connection (named rf1, rf2...) and kept,
//   keyed by their SQL; ?N parameters are sent as $N.
// - Parameters go as text (integers, strings) or binary (blobs, so bytes go
//   as they are); results come as text, bytea decoded from its hex form.
// - Writers take turns as on SQLite: a write transaction takes one
//   transaction-scoped advisory lock first, waiting up to the busy timeout,
//   so every read-then-write of the store runs alone, as under BEGIN IMMEDIATE.
//   Claims do not (Transaction::Kind::claim): they lock the queued rows they
//   take (FOR UPDATE SKIP LOCKED), and the writers that change a queued call
//   (cancel, end of run) do so with a row-locking UPDATE ... WHERE state =
//   'queued', which waits for the claim and then finds the call taken.
// - A lost connection is opened again (libpq's PQreset) and the statement
//   tried once more, when it was not inside a transaction; inside one, the
//   transaction fails and its caller sees the error. Statements are prepared
//   again on the new connection as they are next used.
#include <cstdlib>
#include <unordered_map>
#include <vector>

#include "store/db.h"
#include "store/doorbell.h"
#include "store/pg_connect.h"
#include "store/postgres.h"

namespace rf::store::engine {
namespace {

constexpr Oid kByteaOid = 17;
// The advisory lock every write transaction takes: "rfst".
constexpr int64_t kWriteLockKey = 0x72667374;

// libpq's messages end with a newline and may span lines ("ERROR: ...\nDETAIL:").
std::string one_line(const char* message) {
  std::string out = message != nullptr ? message : "";
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  for (char& c : out) {
    if (c == '\n') c = ' ';
  }
  return out.empty() ? "unknown error" : out;
}

// ?N -> $N, outside quoted strings and identifiers.
std::string dollar_params(std::string_view sql) {
  std::string out;
  out.reserve(sql.size());
  char quote = 0;
  for (size_t i = 0; i < sql.size(); ++i) {
    char c = sql[i];
    if (quote != 0) {
      if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '?' && i + 1 < sql.size() && sql[i + 1] >= '0' && sql[i + 1] <= '9') {
      c = '$';
    }
    out += c;
  }
  return out;
}

// The highest $N of a statement's text (dollar_params'), outside quotes: how
// many parameters it binds.
int highest_param(std::string_view text) {
  int most = 0;
  char quote = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quote != 0) {
      if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '$' && i + 1 < text.size() && text[i + 1] >= '0' && text[i + 1] <= '9') {
      int n = 0;
      while (i + 1 < text.size() && text[i + 1] >= '0' && text[i + 1] <= '9')
        n = n * 10 + (text[++i] - '0');
      most = std::max(most, n);
    }
  }
  return most;
}

struct Result_ {
  PGresult* r = nullptr;
  Result_() = default;
  explicit Result_(PGresult* p) : r(p) {}
  ~Result_() { PQclear(r); }
  Result_(Result_&& o) noexcept : r(std::exchange(o.r, nullptr)) {}
  Result_& operator=(Result_&& o) noexcept {
    if (this != &o) {
      PQclear(r);
      r = std::exchange(o.r, nullptr);
    }
    return *this;
  }
  bool ok() const {
    ExecStatusType s = PQresultStatus(r);
    return s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK;
  }
};

struct Prepared {
  std::string name;
  std::string text;  // with $N parameters
  std::string excerpt;
  int params = 0;
  // The connection's generation it was prepared in: after a reconnect the
  // server has none of them, and each is prepared again when next used.
  int generation = -1;
};

class PgConnection;

class PgStatement final : public StatementImpl {
 public:
  PgStatement(PgConnection* conn, Prepared* prepared)
      : conn_(conn),
        prepared_(prepared),
        values_(prepared->params),
        set_(prepared->params, 0),
        formats_(prepared->params, 0),
        lengths_(prepared->params, 0) {}

  void bind_int64(int index, int64_t value) override {
    if (auto* v = slot(index)) {
      *v = std::to_string(value);
      formats_[index - 1] = 0;
    }
  }
  void bind_text(int index, std::string_view text) override {
    if (text.find('\0') != std::string_view::npos) {
      note(index, "holds a NUL byte, which PostgreSQL text cannot");
      return;
    }
    if (auto* v = slot(index)) {
      *v = std::string(text);
      formats_[index - 1] = 0;
    }
  }
  void bind_blob(int index, std::string_view bytes) override {
    if (auto* v = slot(index)) {
      *v = std::string(bytes);
      formats_[index - 1] = 1;
    }
  }
  void bind_null(int index) override {
    if (slot(index) != nullptr) set_[index - 1] = 0;
  }

  Result<bool> step() override;

  void reset() override {
    result_ = Result_();
    ran_ = false;
    row_ = -1;
    bind_error_.reset();
    std::fill(set_.begin(), set_.end(), 0);
  }

  bool is_null(int column) const override { return PQgetisnull(result_.r, row_, column) != 0; }
  int64_t int64(int column) const override {
    const char* v = PQgetvalue(result_.r, row_, column);
    if (v[0] == 't' && v[1] == 0) return 1;  // a boolean
    return std::strtoll(v, nullptr, 10);
  }
  std::string text(int column) const override {
    if (PQftype(result_.r, column) == kByteaOid) return blob(column);
    return std::string(PQgetvalue(result_.r, row_, column), PQgetlength(result_.r, row_, column));
  }
  std::string blob(int column) const override {
    if (is_null(column)) return {};
    const char* v = PQgetvalue(result_.r, row_, column);
    if (PQftype(result_.r, column) != kByteaOid)
      return std::string(v, PQgetlength(result_.r, row_, column));
    size_t n = 0;
    unsigned char* bytes = PQunescapeBytea(reinterpret_cast<const unsigned char*>(v), &n);
    if (bytes == nullptr) return {};
    std::string out(reinterpret_cast<char*>(bytes), n);
    PQfreemem(bytes);
    return out;
  }

 private:
  std::string* slot(int index) {
    if (index < 1 || index > prepared_->params) {
      note(index, "is out of range (the statement has " + std::to_string(prepared_->params) + ")");
      return nullptr;
    }
    set_[index - 1] = 1;
    return &values_[index - 1];
  }
  void note(int index, const std::string& why) {
    if (bind_error_) return;
    bind_error_ =
        make_error("bind parameter " + std::to_string(index) + " of \"" + prepared_->excerpt + "\"",
                   "the value " + why);
  }

  PgConnection* conn_;
  Prepared* prepared_;
  std::vector<std::string> values_;
  std::vector<char> set_;
  std::vector<int> formats_;
  std::vector<int> lengths_;
  Result_ result_;
  bool ran_ = false;
  int row_ = -1;
  std::optional<Error> bind_error_;
  friend class PgConnection;
};

class PgConnection final : public ConnectionImpl {
 public:
  PgConnection(PGconn* conn, std::string name, const DbOptions& options)
      : conn_(conn), name_(std::move(name)), options_(options) {}
  ~PgConnection() override { PQfinish(conn_); }
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  Result<std::unique_ptr<StatementImpl>> prepare(std::string_view sql) override {
    std::string key(sql);
    auto found = prepared_.find(key);
    if (found == prepared_.end()) {
      Prepared p;
      p.name = "rf" + std::to_string(++next_name_);
      p.text = dollar_params(sql);
      p.excerpt = sql_excerpt(sql);
      found = prepared_.emplace(std::move(key), std::move(p)).first;
    }
    Prepared& p = found->second;
    if (options_.one_shot_statements) {
      // Parsed with each execution (one round trip, not three): never kept.
      p.params = highest_param(p.text);
      return std::unique_ptr<StatementImpl>(new PgStatement(this, &p));
    }
    const bool was_in_transaction = in_transaction();
    for (int attempt = 0;; ++attempt) {
      Status made = ensure_prepared(p);
      if (made.ok()) break;
      if (attempt > 0 || was_in_transaction || !lost_) return made.take_error();
      reconnect();
    }
    return std::unique_ptr<StatementImpl>(new PgStatement(this, &p));
  }

  Status exec(std::string_view sql) override {
    const std::string text(sql);
    const bool was_in_transaction = in_transaction();
    for (int attempt = 0;; ++attempt) {
      if (!was_in_transaction) reconnect_if_broken();
      Result_ r(PQexec(conn_, text.c_str()));
      if (r.ok()) return ok_status();
      if (attempt > 0 || was_in_transaction || !connection_lost(r.r)) {
        return tagged(make_error("exec \"" + sql_excerpt(sql) + "\"", failure(r.r)),
                      connection_lost(r.r));
      }
      reconnect();
    }
  }

  int changes() const override { return changes_; }

  Status listen(std::string_view channel) override {
    listening_ = std::string(channel);
    listened_generation_ = generation_;
    return exec("LISTEN " + listening_);
  }

  int notification_socket() const override { return PQsocket(conn_); }

  std::vector<std::string> notifications() override {
    std::vector<std::string> out;
    if (listening_.empty()) return out;
    if (PQstatus(conn_) != CONNECTION_OK || PQconsumeInput(conn_) == 0) {
      if (in_transaction()) return out;
      reconnect();
    }
    if (listened_generation_ != generation_) {
      // A new connection: listen again, and every waiter looks again.
      Result_ r(PQexec(conn_, ("LISTEN " + listening_).c_str()));
      if (!r.ok()) return out;
      listened_generation_ = generation_;
      out.emplace_back("*");
    }
    while (PGnotify* n = PQnotifies(conn_)) {
      out.emplace_back(n->extra);
      PQfreemem(n);
    }
    return out;
  }

  bool in_transaction() const override {
    PGTransactionStatusType s = PQtransactionStatus(conn_);
    return s == PQTRANS_INTRANS || s == PQTRANS_INERROR || s == PQTRANS_ACTIVE;
  }

  Status begin(TransactionKind kind) override {
    if (kind == TransactionKind::read) return exec("BEGIN ISOLATION LEVEL REPEATABLE READ");
    if (kind == TransactionKind::claim) return exec("BEGIN");
    return exec("BEGIN; SET LOCAL lock_timeout = " + std::to_string(options_.busy_timeout.count()) +
                "; SELECT pg_advisory_xact_lock(" + std::to_string(kWriteLockKey) + ")");
  }

  Status commit() override {
    if (PQtransactionStatus(conn_) == PQTRANS_INERROR) {
      rollback();
      return make_error("commit",
                        "an earlier statement failed, so the transaction was rolled back");
    }
    return exec("COMMIT");
  }

  void rollback() override {
    if (in_transaction()) PQclear(PQexec(conn_, "ROLLBACK"));
  }

  // Runs the statement with its parameters; outside a transaction, once more
  // on a new connection when the old one was lost (nothing was done then: a
  // lone statement either ran and answered, or did not run).
  Status execute(PgStatement& st) {
    Prepared& p = *st.prepared_;
    std::vector<const char*> values(p.params, nullptr);
    for (int i = 0; i < p.params; ++i) {
      if (st.set_[i] == 0) continue;
      values[i] = st.values_[i].c_str();
      st.lengths_[i] = static_cast<int>(st.values_[i].size());
    }
    const bool was_in_transaction = in_transaction();
    for (int attempt = 0;; ++attempt) {
      if (options_.one_shot_statements && !was_in_transaction) reconnect_if_broken();
      Status made = options_.one_shot_statements ? Status(ok_status()) : ensure_prepared(p);
      if (made.ok()) {
        Result_ r(options_.one_shot_statements
                      ? PQexecParams(conn_, p.text.c_str(), p.params, nullptr, values.data(),
                                     st.lengths_.data(), st.formats_.data(), 0)
                      : PQexecPrepared(conn_, p.name.c_str(), p.params, values.data(),
                                       st.lengths_.data(), st.formats_.data(), 0));
        if (r.ok()) {
          std::string_view verb = PQcmdStatus(r.r);
          if (verb.starts_with("INSERT") || verb.starts_with("UPDATE") ||
              verb.starts_with("DELETE")) {
            changes_ = std::atoi(PQcmdTuples(r.r));
          }
          st.result_ = std::move(r);
          return ok_status();
        }
        lost_ = connection_lost(r.r);
        made = tagged(make_error("step \"" + p.excerpt + "\"", failure(r.r)), lost_);
      }
      if (attempt > 0 || was_in_transaction || !lost_) return made;
      reconnect();
    }
  }

  Status connect_check() {
    if (PQstatus(conn_) == CONNECTION_OK) return ok_status();
    return tagged(make_error("open database " + name_, one_line(PQerrorMessage(conn_))), true);
  }

 private:
  // The server's message, or libpq's when the server never answered.
  std::string failure(PGresult* r) const {
    const char* m = r != nullptr ? PQresultErrorMessage(r) : "";
    return one_line(m != nullptr && *m != 0 ? m : PQerrorMessage(conn_));
  }

  // An error of a lost connection is ErrorCode::kUnavailable: the caller may
  // keep what it was writing and try again once the server is back.
  static Error tagged(Error e, bool lost) {
    if (lost) e.code = ErrorCode::kUnavailable;
    return e;
  }

  // The connection itself failed (not the statement): libpq raised it (no
  // SQLSTATE), or the server said it is going away (class 08, 57P).
  bool connection_lost(PGresult* r) const {
    if (PQstatus(conn_) == CONNECTION_BAD || r == nullptr) return true;
    const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    if (state == nullptr) return true;
    const std::string_view s(state);
    return s.starts_with("08") || s.starts_with("57P");
  }

  Status ensure_prepared(Prepared& p) {
    lost_ = false;
    if (p.generation == generation_) return ok_status();
    reconnect_if_broken();
    Result_ made(PQprepare(conn_, p.name.c_str(), p.text.c_str(), 0, nullptr));
    if (!made.ok()) {
      lost_ = connection_lost(made.r);
      return tagged(make_error("prepare \"" + p.excerpt + "\"", failure(made.r)), lost_);
    }
    if (p.generation < 0) {
      Result_ described(PQdescribePrepared(conn_, p.name.c_str()));
      if (!described.ok()) {
        lost_ = connection_lost(described.r);
        return tagged(make_error("prepare \"" + p.excerpt + "\"", failure(described.r)), lost_);
      }
      p.params = PQnparams(described.r);
    }
    p.generation = generation_;
    return ok_status();
  }

  void reconnect_if_broken() {
    if (PQstatus(conn_) != CONNECTION_OK) reconnect();
  }

  // A new connection to the same server (libpq keeps the options): no
  // statement is prepared on it yet.
  void reconnect() {
    PQreset(conn_);
    ++generation_;
  }

  PGconn* conn_;
  std::string name_;
  DbOptions options_;
  // By SQL text; node-based, so a Statement's pointer to its entry stays good.
  std::unordered_map<std::string, Prepared> prepared_;
  int next_name_ = 0;
  int generation_ = 0;
  std::string listening_;  // the channel LISTENed on ("": none)
  int listened_generation_ = 0;
  bool lost_ = false;  // the last prepare failed because the connection did
  int changes_ = 0;
};

Result<bool> PgStatement::step() {
  if (bind_error_) return *bind_error_;
  if (!ran_) {
    RF_TRY(conn_->execute(*this));
    ran_ = true;
    row_ = -1;
  }
  ++row_;
  return row_ < PQntuples(result_.r);
}

void ignore_notice(void*, const char*) {}

Result<std::unique_ptr<ConnectionImpl>> open_postgres(const std::string& uri,
                                                      const DbOptions& options) {
  PGconn* raw = pg_connect(uri);
  if (raw == nullptr) return make_error("open database " + redact_uri(uri), "out of memory");
  auto conn = std::make_unique<PgConnection>(raw, redact_uri(uri), options);
  RF_TRY(conn->connect_check());
  return std::unique_ptr<ConnectionImpl>(std::move(conn));
}

}  // namespace

PGconn* pg_connect(const std::string& uri) {
  // connect_timeout first: a value in the URI overrides it.
  const char* keys[] = {"connect_timeout", "dbname", nullptr};
  const char* values[] = {"10", uri.c_str(), nullptr};
  PGconn* conn = PQconnectdbParams(keys, values, /*expand_dbname=*/1);
  if (conn != nullptr) PQsetNoticeProcessor(conn, ignore_notice, nullptr);
  return conn;
}

}  // namespace rf::store::engine

namespace rf::store {
// pg_bell.cc
Result<std::unique_ptr<BellRelay>> start_pg_bell_relay(const std::string& uri, Doorbell& bell);

void enable_postgres() {
  engine::register_postgres(engine::open_postgres);
  register_bell_relay(start_pg_bell_relay);
}
}  // namespace rf::store
