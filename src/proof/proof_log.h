// Host side: reports and receipts into the audit log, and the log as a
// Merkle tree (proof/merkle.h) with signed checkpoints (proof/checkpoint.h).
//   proof.report   detail {sha256, envelope, held, not_held, unknown}
//   proof.receipt  detail {sha256, report_sha256, report_seq, envelope}
// (sha256: of the envelope's payload, the statement.) A receipt file (the
// "bundle", docs/proof.md) holds both envelopes, both audit events with
// their inclusion proofs, and a checkpoint of the log that covers them.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "proof/boundary_facts.h"
#include "proof/boundary_report.h"
#include "proof/dsse.h"
#include "proof/receipt.h"
#include "proof/signing_key.h"
#include "sandbox/sandbox.h"
#include "store/audit_log.h"

namespace rf::proof {

inline constexpr std::string_view kBundleFormat = "ringfence-receipt/v1";

struct Recorded {
  Envelope envelope;
  std::string sha256;  // of the payload
  int64_t seq = 0;     // its audit event
};

// Who the events are about, as the audit log files them.
struct EventContext {
  std::string actor = "cli";
  std::optional<std::string> project_id, run_id;
  std::optional<int64_t> call_id;
};

// A signed statement and the audit event that will file it (its seq comes
// from filing it).
struct Signed {
  Recorded recorded;
  store::AuditEvent event;
};

// The log's name in checkpoints: "ringfence/<host name>/audit".
std::string default_origin();

class ProofLog {
 public:
  ProofLog(store::Store& store, const SigningKey& key, std::string origin)
      : store_(store), key_(key), origin_(std::move(origin)) {}

  // Signs the statement and appends its event.
  Result<Recorded> record_report(const nlohmann::json& statement, const EventContext& ctx);
  // `report_seq`: the event of the sandbox's report, which the receipt names.
  // Signs `call`'s receipt (its report_sha256 filled in) and appends its event.
  Result<Recorded> record_receipt(const CallRecord& call, int64_t report_seq,
                                  const EventContext& ctx);
  // The same in two halves, so that a busy worker files many receipts in one
  // transaction: sign one, then file several (in order; each one's seq is
  // filled in).
  Signed sign_receipt(const CallRecord& call, int64_t report_seq, const EventContext& ctx);
  Status file(std::vector<Signed>& batch);

  // A checkpoint of the log as it is now (size = its last seq).
  Result<std::string> checkpoint();
  // The receipt file for a receipt and its report, proven against a new checkpoint.
  Result<nlohmann::json> bundle(int64_t receipt_seq, int64_t report_seq);
  // The same, found from a receipt's event seq (the report's is in its detail).
  Result<nlohmann::json> bundle_for_receipt(int64_t receipt_seq);
  // The seq of call `call_id`'s receipt event; nullopt while it has none.
  Result<std::optional<int64_t>> receipt_of_call(int64_t call_id);
  // The receipt file of call `call_id`; nullopt while it has no receipt.
  Result<std::optional<nlohmann::json>> bundle_for_call(int64_t call_id);
  // Gathers, judges, signs and files `sandbox`'s boundary report.
  // `probe`: its self-probe, when started ahead (start_self_probe).
  Result<Recorded> record_sandbox_report(Sandbox& sandbox, const EventContext& ctx,
                                         StartedProbe probe = {});
  // {"checkpoint", "size", "index", "event", "inclusion": [hex...]}: event
  // `seq` in the log as it is now, with a new checkpoint.
  Result<nlohmann::json> inclusion(int64_t seq);
  // {"checkpoint", "from", "to", "from_root", "consistency": [hex...]}: the
  // tree of `from` events is a prefix of the tree of `to` (0: all) events.
  Result<nlohmann::json> consistency(uint64_t from, uint64_t to);

 private:
  // Signs `payload` (a statement's bytes) and makes its event.
  Signed sign(const char* kind, std::string payload, std::optional<std::string> sandbox_id,
              nlohmann::json detail, const EventContext& ctx);
  Result<Recorded> file_one(Signed s);
  store::Store& store_;
  const SigningKey& key_;
  std::string origin_;
};

// An audit event as the bundle carries it, and back.
nlohmann::json event_json(const store::AuditEvent& e);
Result<store::AuditEvent> parse_event_json(const nlohmann::json& j, const std::string& where);

}  // namespace rf::proof
