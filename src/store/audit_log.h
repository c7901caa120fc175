// The audit log (issue 11): append-only, hash-chained events in the store.
// Each event carries the hash of the one before it:
//   hash = hex(SHA-256(prev_hash "\n" seq "\n" at "\n" kind "\n" actor "\n"
//                      project "\n" run "\n" call "\n" sandbox "\n" detail_json))
// (absent fields are empty; the first event's prev_hash is 64 zeros), and
// audit_head keeps the last seq and hash, so an edit, a deletion (even of the
// newest events) or a reordering made directly in the database file is found
// by verify(), which names the first bad event.
//
// Events never hold a secret's value: keys, secret names and versions only.
// Threads: as the Store it uses (each call takes the store's lock).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "store/store.h"

namespace rf::store {

struct AuditEvent {
  int64_t seq = 0;  // assigned by append: 1, 2, 3...
  int64_t at = 0;   // 0: now (the store's clock)
  // e.g. identity.resolve, identity.inject, identity.refuse, secret.set,
  // secret.revoke, secret.rotate_key, profile.set, redaction, sandbox.create,
  // sandbox.destroy, call.revoked
  std::string kind;
  std::string actor;  // who: "cli", "worker <id>"
  std::optional<std::string> project_id;
  std::optional<std::string> run_id;
  std::optional<int64_t> call_id;
  std::optional<std::string> sandbox_id;
  std::string detail_json = "{}";  // must be a JSON object
  std::string prev_hash;           // filled in by append / read back by list
  std::string hash;
};

struct AuditFilter {
  std::optional<std::string> run_id;
  std::optional<std::string> project_id;
  std::optional<std::string> kind;
  std::optional<int64_t> call_id;
  int64_t after_seq = 0;
  int limit = 1000;
};

struct AuditVerdict {
  bool intact = true;
  int64_t events = 0;                // how many were checked
  std::optional<int64_t> first_bad;  // the seq of the first bad event
  std::string reason;                // "event 7: its hash does not match its fields"
  std::string head_hash;             // the last event's hash (intact chains; 64 zeros: none)
};

// The hash of an event's fields (the formula above): what verify() checks and
// what the Merkle log's leaves hold (proof/merkle.h).
std::string audit_event_hash(const AuditEvent& e);

// Walks the whole chain of `db` (the caller holds it: its lock, and the
// transaction the walk reads in): what AuditLog::verify and `store migrate`
// check.
Result<AuditVerdict> verify_audit_chain(Db& db);

// Appends `events`, in order, in the write transaction the caller has open
// on `db` (it holds the store's lock), stamped `now` where they have no time:
// an action and the events that record it commit together, or neither does.
// Returns the last seq (0 when `events` is empty).
Result<int64_t> append_audit_in(Db& db, const std::vector<AuditEvent>& events, int64_t now);
// The same, for a caller that needs no seq.
Status write_audit_in(Db& db, const std::vector<AuditEvent>& events, int64_t now);

// The events that record an action, made inside the action's transaction
// once it has done its part, from what only the transaction knows (a
// secret's new version, how many values a rotation re-sealed; 0 where there
// is nothing to tell), and appended there (append_audit_in).
using AuditAlong = std::function<std::vector<AuditEvent>(int64_t)>;

class AuditLog {
 public:
  explicit AuditLog(Store& store) : store_(store) {}

  // Appends in one write transaction; returns the event's seq.
  Result<int64_t> append(const AuditEvent& event);
  // Appends several in one write transaction (in order); returns the last seq.
  Result<int64_t> append_all(const std::vector<AuditEvent>& events);
  // Events in seq order.
  Result<std::vector<AuditEvent>> list(const AuditFilter& filter);
  // Walks the whole chain.
  Result<AuditVerdict> verify();
  // The event of `seq`, or kNotFound.
  Result<AuditEvent> get(int64_t seq);
  // The hashes (hex) of events after+1..up_to, in seq order: the Merkle
  // log's leaves (proof/merkle.h).
  Result<std::vector<std::string>> hashes_between(int64_t after, int64_t up_to);
  // The last event's seq: the log's size (0 when empty).
  Result<int64_t> size();

  // The Merkle tree's kept nodes (proof/merkle.h: the hash of leaves
  // [index << level, (index + 1) << level), hex). How many leaves they
  // cover; one node (nullopt when not kept); new ones, in one transaction,
  // each kept once (a node is the same whoever computes it, so writers that
  // race agree).
  struct MerkleNode {
    int level = 0;
    int64_t index = 0;
    std::string hash;
  };
  Result<int64_t> merkle_leaves();
  Result<std::optional<std::string>> merkle_node(int level, int64_t index);
  Status keep_merkle_nodes(const std::vector<MerkleNode>& nodes);

 private:
  // A one-number query's answer (0 when it gives no row).
  Result<int64_t> number(const char* what, std::string_view sql);

  Store& store_;
};

}  // namespace rf::store
