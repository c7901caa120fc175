#include "store/db.h"

#include <algorithm>
#include <atomic>

namespace rf::store {

bool is_postgres_uri(std::string_view target) {
  if (target.starts_with("postgres://") || target.starts_with("postgresql://")) return true;
  // A keyword string: "keyword = value ...", keywords being lower-case
  // letters and '_' (libpq's). No SQLite path of ours starts so: those are
  // absolute or "sqlite:PATH".
  const size_t start = target.find_first_not_of(" \t");
  if (start == std::string_view::npos) return false;
  const size_t end = target.find_first_not_of("abcdefghijklmnopqrstuvwxyz_", start);
  if (end == start || end == std::string_view::npos) return false;
  const size_t eq = target.find_first_not_of(" \t", end);
  return eq != std::string_view::npos && target[eq] == '=';
}

bool holds_password(std::string_view target) {
  return is_postgres_uri(target) && engine::redact_uri(target) != target;
}

std::string sqlite_path(std::string_view target) {
  if (target.starts_with("sqlite:")) target.remove_prefix(7);
  return std::string(target);
}

// ---- Statement

Status Statement::run() {
  while (true) {
    auto row = step();
    if (!row.ok()) return row.take_error();
    if (!*row) return ok_status();
  }
}

std::optional<int64_t> Statement::opt_int64(int column) const {
  if (is_null(column)) return std::nullopt;
  return int64(column);
}

std::optional<std::string> Statement::opt_text(int column) const {
  if (is_null(column)) return std::nullopt;
  return text(column);
}

// ---- Db

namespace {
std::atomic<engine::Opener> postgres_opener{nullptr};
}  // namespace

void engine::register_postgres(Opener opener) { postgres_opener.store(opener); }

std::string engine::redact_uri(std::string_view uri) {
  std::string out(uri);
  const size_t scheme = out.find("://");
  if (scheme != std::string::npos) {
    const size_t start = scheme + 3;
    const size_t end = out.find_first_of("/?", start);
    const size_t at = out.rfind('@', end == std::string::npos ? out.size() : end);
    if (at != std::string::npos && at >= start) {
      const size_t colon = out.find(':', start);
      if (colon != std::string::npos && colon < at) out.replace(colon + 1, at - colon - 1, "***");
    }
  }
  // password=VALUE in a URI's query (up to '&') or a keyword string (up to a
  // blank; 'quoted', with \' and \\ inside), spaces around '=' allowed.
  for (size_t pos = out.find("password"); pos != std::string::npos;
       pos = out.find("password", pos + 1)) {
    size_t value = out.find_first_not_of(" \t", pos + 8);
    if (value == std::string::npos || out[value] != '=') continue;
    value = out.find_first_not_of(" \t", value + 1);
    if (value == std::string::npos) break;
    size_t end = value;
    if (out[value] == '\'') {
      for (end = value + 1; end < out.size() && out[end] != '\''; ++end) {
        if (out[end] == '\\') ++end;
      }
      end = std::min(end + 1, out.size());
    } else {
      end = out.find_first_of(scheme != std::string::npos ? "&" : " \t", value);
      if (end == std::string::npos) end = out.size();
    }
    out.replace(value, end - value, "***");
  }
  return out;
}

std::string engine::sql_excerpt(std::string_view sql) {
  constexpr size_t kMax = 60;
  std::string out(sql.substr(0, kMax));
  for (char& c : out) {
    if (c == '\n') c = ' ';
  }
  if (sql.size() > kMax) out += "...";
  return out;
}

Result<Db> Db::open(const std::string& target, DbOptions options) {
  if (is_postgres_uri(target)) {
    engine::Opener opener = postgres_opener.load();
    if (opener == nullptr) {
      return make_error("open database " + engine::redact_uri(target),
                        "this program is built without PostgreSQL (libpq)");
    }
    auto conn = opener(target, options);
    if (!conn.ok()) return conn.take_error();
    return Db(Engine::postgres, engine::redact_uri(target), std::move(*conn));
  }
  const std::string file = sqlite_path(target);
  auto conn = engine::open_sqlite(file, options);
  if (!conn.ok()) return conn.take_error();
  return Db(Engine::sqlite, file, std::move(*conn));
}

Result<Statement> Db::prepare(std::string_view sql) {
  auto impl = conn_->prepare(sql);
  if (!impl.ok()) return impl.take_error();
  return Statement(std::move(*impl));
}

Status Db::exec(std::string_view sql) { return conn_->exec(sql); }

// ---- Transaction

Result<Transaction> Transaction::begin(Db& db, Kind kind) {
  RF_TRY(db.connection().begin(kind));
  return Transaction(&db);
}

Transaction::Transaction(Transaction&& other) noexcept : db_(std::exchange(other.db_, nullptr)) {}

Status Transaction::commit() { return std::exchange(db_, nullptr)->connection().commit(); }

Transaction::~Transaction() {
  if (db_ != nullptr) db_->connection().rollback();
}

}  // namespace rf::store
