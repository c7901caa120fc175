#include "store/audit_log.h"

#include <sodium.h>

#include <nlohmann/json.hpp>

#include "store/sql.h"

namespace rf::store {
namespace {

using namespace sql;

const std::string kGenesis(64, '0');

std::string opt(const std::optional<std::string>& s) { return s.value_or(""); }
std::string opt(const std::optional<int64_t>& v) { return v ? std::to_string(*v) : ""; }

}  // namespace

// The hash of an event: its predecessor's hash and every field, one per line.
// A field holding a newline cannot fake another field's boundary: lengths go first.
std::string audit_event_hash(const AuditEvent& e) {
  const std::string fields[] = {
      e.prev_hash,       std::to_string(e.seq), std::to_string(e.at), e.kind,
      e.actor,           opt(e.project_id),     opt(e.run_id),        opt(e.call_id),
      opt(e.sandbox_id), e.detail_json};
  crypto_hash_sha256_state st;
  crypto_hash_sha256_init(&st);
  for (const auto& f : fields) {
    const std::string len = std::to_string(f.size()) + ":";
    crypto_hash_sha256_update(&st, reinterpret_cast<const unsigned char*>(len.data()), len.size());
    crypto_hash_sha256_update(&st, reinterpret_cast<const unsigned char*>(f.data()), f.size());
    crypto_hash_sha256_update(&st, reinterpret_cast<const unsigned char*>("\n"), 1);
  }
  unsigned char md[crypto_hash_sha256_BYTES];
  crypto_hash_sha256_final(&st, md);
  char hex[2 * sizeof md + 1];
  sodium_bin2hex(hex, sizeof hex, md, sizeof md);
  return hex;
}

namespace {

constexpr std::string_view kColumns =
    "seq, at, kind, actor, project_id, run_id, call_id, sandbox_id, detail_json, prev_hash, hash";

Result<AuditEvent> read_event(const Statement& st) {
  AuditEvent e;
  e.seq = st.int64(0);
  e.at = st.int64(1);
  e.kind = st.text(2);
  e.actor = st.text(3);
  e.project_id = st.opt_text(4);
  e.run_id = st.opt_text(5);
  e.call_id = st.opt_int64(6);
  e.sandbox_id = st.opt_text(7);
  e.detail_json = st.text(8);
  e.prev_hash = st.text(9);
  e.hash = st.text(10);
  return e;
}

Status check_event(const AuditEvent& e) {
  if (e.kind.empty()) return fail("an audit event needs a kind");
  auto j = nlohmann::json::parse(e.detail_json, nullptr, false);
  if (!j.is_object()) return fail("audit event " + e.kind + ": its detail is not a JSON object");
  return ok_status();
}

struct Head {
  int64_t seq = 0;
  std::string hash = kGenesis;
};

Result<Head> read_head(Db& db) {
  auto read = [](const Statement& st) -> Result<Head> { return Head{st.int64(0), st.text(1)}; };
  auto h = first_row<Head>(db, read, "SELECT seq, hash FROM audit_head WHERE one = 1");
  if (!h.ok()) return h.take_error();
  return h->value_or(Head{});
}

// Takes the chain's head for this transaction: on PostgreSQL its row is
// locked for update (made first, at seq 0, when the log is empty), so
// appenders take turns on the chain alone while every other writer goes on;
// on SQLite the transaction's write lock does it.
Result<Head> lock_head(Db& db) {
  auto read = [](const Statement& st) -> Result<Head> { return Head{st.int64(0), st.text(1)}; };
  const std::string select = "SELECT seq, hash FROM audit_head WHERE one = 1" + for_update(db);
  auto h = first_row<Head>(db, read, select);
  if (!h.ok()) return h.take_error();
  if (*h || db.engine() == Engine::sqlite) return h->value_or(Head{});
  RF_TRY(exec(db,
              "INSERT INTO audit_head (one, seq, hash) VALUES (1, 0, ?1) "
              "ON CONFLICT (one) DO NOTHING",
              kGenesis));
  h = first_row<Head>(db, read, select);
  if (!h.ok()) return h.take_error();
  return h->value_or(Head{});
}

// Appends in the caller's transaction after `head` (from lock_head), which
// moves to the new event.
Result<int64_t> append_locked(Db& db, const AuditEvent& in, int64_t now, Head& head) {
  RF_TRY(check_event(in));
  AuditEvent e = in;
  e.seq = head.seq + 1;
  e.at = in.at ? in.at : now;
  e.prev_hash = head.hash;
  e.hash = audit_event_hash(e);
  RF_TRY(exec(db,
              "INSERT INTO audit_events (seq, at, kind, actor, project_id, run_id, call_id, "
              "sandbox_id, detail_json, prev_hash, hash) "
              "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
              e.seq, e.at, e.kind, e.actor, e.project_id, e.run_id, e.call_id, e.sandbox_id,
              e.detail_json, e.prev_hash, e.hash));
  RF_TRY(exec(db,
              "INSERT INTO audit_head (one, seq, hash) VALUES (1, ?1, ?2) "
              "ON CONFLICT (one) DO UPDATE SET seq = ?1, hash = ?2",
              e.seq, e.hash));
  head = Head{e.seq, e.hash};
  return e.seq;
}

}  // namespace

Result<int64_t> append_audit_in(Db& db, const std::vector<AuditEvent>& events, int64_t now) {
  if (events.empty()) return int64_t{0};
  if (sodium_init() < 0) return make_error("append audit events", "libsodium cannot start");
  auto head = lock_head(db);
  if (!head.ok()) return head.take_error();
  int64_t last = 0;
  for (const auto& e : events) {
    auto seq = append_locked(db, e, now, *head);
    if (!seq.ok()) return seq.take_error();
    last = *seq;
  }
  return last;
}

Status write_audit_in(Db& db, const std::vector<AuditEvent>& events, int64_t now) {
  auto logged = append_audit_in(db, events, now);
  return logged.ok() ? ok_status() : logged.take_error();
}

Result<int64_t> AuditLog::append(const AuditEvent& event) { return append_all({event}); }

Result<int64_t> AuditLog::append_all(const std::vector<AuditEvent>& events) {
  const int64_t now = store_.clock_now();
  return store_.locked([&](Db& db) {
    auto all = [&]() -> Result<int64_t> { return append_audit_in(db, events, now); };
    return within("append audit events", claim_transaction(db, all));
  });
}

Result<std::vector<AuditEvent>> AuditLog::list(const AuditFilter& f) {
  return store_.locked([&](Db& db) {
    return within(
        "read the audit log",
        rows<AuditEvent>(db, read_event,
                         "SELECT " + std::string(kColumns) +
                             " FROM audit_events WHERE seq > ?1 "
                             "AND (?2 = '' OR run_id = ?2) AND (?3 = '' OR project_id = ?3) "
                             "AND (?5 = '' OR kind = ?5) AND (?6 = 0 OR call_id = ?6) "
                             "ORDER BY seq LIMIT ?4",
                         f.after_seq, f.run_id.value_or(""), f.project_id.value_or(""),
                         int64_t{f.limit}, f.kind.value_or(""), f.call_id.value_or(0)));
  });
}

Result<AuditEvent> AuditLog::get(int64_t seq) {
  auto e = store_.locked([&](Db& db) {
    return within(
        "read the audit log",
        first_row<AuditEvent>(
            db, read_event, "SELECT " + std::string(kColumns) + " FROM audit_events WHERE seq = ?1",
            seq));
  });
  if (!e.ok()) return e.take_error();
  if (!e->has_value()) {
    return Error{"audit event " + std::to_string(seq), "there is no such event", 0,
                 ErrorCode::kNotFound};
  }
  return std::move(**e);
}

Result<std::vector<std::string>> AuditLog::hashes_between(int64_t after, int64_t up_to) {
  return store_.locked([&](Db& db) {
    return within("read the audit log",
                  rows<std::string>(db, read_text0,
                                    "SELECT hash FROM audit_events WHERE seq > ?1 AND seq <= ?2 "
                                    "ORDER BY seq",
                                    after, up_to));
  });
}

Result<int64_t> AuditLog::size() {
  return number("read the audit log", "SELECT COALESCE(MAX(seq), 0) FROM audit_events");
}

Result<int64_t> AuditLog::merkle_leaves() {
  return number("read the audit log's tree",
                "SELECT COALESCE(MAX(idx) + 1, 0) FROM audit_merkle WHERE level = 0");
}

Result<int64_t> AuditLog::number(const char* what, std::string_view sql) {
  auto n =
      store_.locked([&](Db& db) { return within(what, first_row<int64_t>(db, read_int0, sql)); });
  if (!n.ok()) return n.take_error();
  return n->value_or(0);
}

Result<std::optional<std::string>> AuditLog::merkle_node(int level, int64_t index) {
  return store_.locked([&](Db& db) {
    return within("read the audit log's tree",
                  first_row<std::string>(db, read_text0,
                                         "SELECT hash FROM audit_merkle WHERE level = ?1 AND "
                                         "idx = ?2",
                                         int64_t{level}, index));
  });
}

Status AuditLog::keep_merkle_nodes(const std::vector<MerkleNode>& nodes) {
  if (nodes.empty()) return ok_status();
  return store_.locked([&](Db& db) {
    return within("keep the audit log's tree", write_transaction(db, [&]() -> Status {
                    for (const MerkleNode& n : nodes) {
                      RF_TRY(exec(db,
                                  "INSERT INTO audit_merkle (level, idx, hash) VALUES (?1, ?2, ?3) "
                                  "ON CONFLICT (level, idx) DO NOTHING",
                                  int64_t{n.level}, n.index, n.hash));
                    }
                    return ok_status();
                  }));
  });
}

Result<AuditVerdict> verify_audit_chain(Db& db) {
  if (sodium_init() < 0) return make_error("verify the audit log", "libsodium cannot start");
  AuditVerdict v;
  auto bad = [&](int64_t seq, std::string why) {
    v.intact = false;
    v.first_bad = seq;
    v.reason = std::move(why);
    return v;
  };
  // In the order stored (on SQLite, seq is the rowid), each checked
  // against the one before: a reordering shows.
  auto st = db.prepare("SELECT " + std::string(kColumns) + " FROM audit_events ORDER BY " +
                       (db.engine() == Engine::sqlite ? "rowid" : "seq"));
  if (!st.ok()) return st.take_error();
  std::string prev = kGenesis;
  int64_t expected = 1;
  for (;;) {
    auto row = st->step();
    if (!row.ok()) return row.take_error();
    if (!*row) break;
    auto e = read_event(*st);
    if (!e.ok()) return e.take_error();
    ++v.events;
    if (e->seq != expected) {
      return bad(expected, e->seq > expected
                               ? "event " + std::to_string(expected) +
                                     " is missing (deleted?): the chain goes from " +
                                     std::to_string(expected - 1) + " to " + std::to_string(e->seq)
                               : "event " + std::to_string(e->seq) + " comes after event " +
                                     std::to_string(expected - 1) + " (reordered?)");
    }
    if (e->prev_hash != prev) {
      return bad(e->seq, "event " + std::to_string(e->seq) + ": its prev_hash is not event " +
                             std::to_string(e->seq - 1) + "'s hash (reordered or edited?)");
    }
    if (audit_event_hash(*e) != e->hash) {
      return bad(e->seq, "event " + std::to_string(e->seq) +
                             ": its hash does not match its fields (edited?)");
    }
    prev = e->hash;
    ++expected;
  }
  auto head = read_head(db);
  if (!head.ok()) return head.take_error();
  if (head->seq != expected - 1 || head->hash != prev) {
    return bad(expected, "the head says " + std::to_string(head->seq) + " events, the log has " +
                             std::to_string(expected - 1) +
                             (head->seq > expected - 1 ? " (the newest deleted?)"
                                                       : " (the head was edited?)"));
  }
  v.head_hash = prev;
  return v;
}

Result<AuditVerdict> AuditLog::verify() {
  return store_.locked([&](Db& db) -> Result<AuditVerdict> {
    return within("verify the audit log",
                  read_transaction(db, [&] { return verify_audit_chain(db); }));
  });
}

}  // namespace rf::store
