#include "proof/proof_log.h"

#include <unistd.h>

#include <map>

#include "core/base64.h"
#include "proof/boundary_facts.h"
#include "proof/checkpoint.h"
#include "proof/merkle.h"

namespace rf::proof {
namespace {

using json = nlohmann::json;

// The log's tree as the store keeps it (store::AuditLog::merkle_*), read a
// node at a time and remembered for one root or proof.
class StoredNodes final : public MerkleNodes {
 public:
  explicit StoredNodes(store::AuditLog& log) : log_(log) {}
  std::string node(unsigned level, uint64_t index) override {
    const NodeRef ref{level, index};
    if (const auto it = read_.find(ref); it != read_.end()) return it->second;
    auto hex = log_.merkle_node(static_cast<int>(level), static_cast<int64_t>(index));
    std::string raw;
    if (hex.ok() && *hex) {
      if (auto r = from_hex(**hex); r && r->size() == kHashBytes) raw = std::move(*r);
    }
    if (raw.empty()) {
      // Not kept, or unreadable: the answer cannot be trusted; say which.
      failed_ = "node " + std::to_string(level) + "/" + std::to_string(index) + " of the tree " +
                (hex.ok() ? "is not kept" : hex.error().to_string());
      raw.assign(kHashBytes, '\0');
    }
    return read_[ref] = raw;
  }
  const std::string& failed() const { return failed_; }

 private:
  store::AuditLog& log_;
  std::map<NodeRef, std::string> read_;
  std::string failed_;
};

// Extends the kept tree to cover the log's first `size` events: their leaf
// hashes and every complete subtree they finish, O(new events + log n) rows.
Status keep_tree(store::AuditLog& log, uint64_t size) {
  auto covered = log.merkle_leaves();
  if (!covered.ok()) return covered.take_error();
  const uint64_t from = static_cast<uint64_t>(*covered);
  if (from >= size) return ok_status();
  auto hashes = log.hashes_between(static_cast<int64_t>(from), static_cast<int64_t>(size));
  if (!hashes.ok()) return hashes.take_error();
  if (hashes->size() != size - from) return make_error("audit log", "events are missing");
  std::map<NodeRef, std::string> made;
  for (uint64_t i = 0; i < hashes->size(); ++i) {
    auto raw = from_hex((*hashes)[i]);
    if (!raw || raw->size() != kHashBytes)
      return make_error("audit log", "an event's hash is not 64 hex digits");
    made[{0, from + i}] = leaf_hash(*raw);
  }
  StoredNodes kept(log);
  auto child = [&](unsigned level, uint64_t index) {
    const auto it = made.find({level, index});
    return it != made.end() ? it->second : kept.node(level, index);
  };
  for (unsigned l = 1; l < 64 && (uint64_t{1} << l) <= size; ++l) {
    // The nodes of this level that the new leaves finish (the first one
    // ends past `from`: the ones before it were kept by an earlier extension).
    for (uint64_t j = from >> l; ((j + 1) << l) <= size; ++j)
      made[{l, j}] = node_hash(child(l - 1, 2 * j), child(l - 1, 2 * j + 1));
  }
  if (!kept.failed().empty()) return make_error("audit log", kept.failed());
  std::vector<store::AuditLog::MerkleNode> rows;
  rows.reserve(made.size());
  for (const auto& [ref, hash] : made)
    rows.push_back({static_cast<int>(ref.level), static_cast<int64_t>(ref.index), to_hex(hash)});
  return log.keep_merkle_nodes(rows);
}

// The log's size now, with its tree kept that far.
Result<uint64_t> kept_size(store::AuditLog& log) {
  auto size = log.size();
  if (!size.ok()) return size.take_error();
  RF_TRY(keep_tree(log, static_cast<uint64_t>(*size)));
  return static_cast<uint64_t>(*size);
}

json hex_list(const std::vector<std::string>& hashes) {
  json out = json::array();
  for (const auto& h : hashes) out.push_back(to_hex(h));
  return out;
}

// An event, its place in the tree of the first `size` leaves, and its audit path.
json proven_entry(MerkleNodes& nodes, uint64_t size, const store::AuditEvent& e) {
  const uint64_t index = static_cast<uint64_t>(e.seq - 1);
  return json{{"event", event_json(e)},
              {"index", index},
              {"inclusion", hex_list(inclusion_proof(nodes, index, size))}};
}

}  // namespace

std::string default_origin() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0')
    std::snprintf(host, sizeof host, "localhost");
  return std::string("ringfence/") + host + "/audit";
}

json event_json(const store::AuditEvent& e) {
  json j = {{"seq", e.seq},
            {"at", e.at},
            {"kind", e.kind},
            {"actor", e.actor},
            {"detail_json", e.detail_json},
            {"prev_hash", e.prev_hash},
            {"hash", e.hash}};
  j["project"] = e.project_id ? json(*e.project_id) : json(nullptr);
  j["run"] = e.run_id ? json(*e.run_id) : json(nullptr);
  j["call"] = e.call_id ? json(*e.call_id) : json(nullptr);
  j["sandbox"] = e.sandbox_id ? json(*e.sandbox_id) : json(nullptr);
  return j;
}

Result<store::AuditEvent> parse_event_json(const json& j, const std::string& where) {
  auto bad = [&](const std::string& what) { return make_error(where, what); };
  if (!j.is_object()) return bad("not a JSON object");
  store::AuditEvent e;
  try {
    e.seq = j.at("seq").get<int64_t>();
    e.at = j.at("at").get<int64_t>();
    e.kind = j.at("kind").get<std::string>();
    e.actor = j.at("actor").get<std::string>();
    e.detail_json = j.at("detail_json").get<std::string>();
    e.prev_hash = j.at("prev_hash").get<std::string>();
    e.hash = j.at("hash").get<std::string>();
    if (j.contains("project") && !j["project"].is_null())
      e.project_id = j["project"].get<std::string>();
    if (j.contains("run") && !j["run"].is_null()) e.run_id = j["run"].get<std::string>();
    if (j.contains("call") && !j["call"].is_null()) e.call_id = j["call"].get<int64_t>();
    if (j.contains("sandbox") && !j["sandbox"].is_null())
      e.sandbox_id = j["sandbox"].get<std::string>();
  } catch (const json::exception& ex) {
    return bad(std::string("a field is missing or of the wrong type: ") + ex.what());
  }
  return e;
}

Signed ProofLog::sign(const char* kind, std::string payload, std::optional<std::string> sandbox_id,
                      json detail, const EventContext& ctx) {
  Signed s;
  Recorded& r = s.recorded;
  r.envelope = sign_envelope(key_, kInTotoPayloadType, std::move(payload));
  r.sha256 = sha256_hex(r.envelope.payload);
  detail["sha256"] = r.sha256;
  detail["envelope"] = envelope_json(r.envelope);
  store::AuditEvent& e = s.event;
  e.kind = kind;
  e.actor = ctx.actor;
  e.project_id = ctx.project_id;
  e.run_id = ctx.run_id;
  e.call_id = ctx.call_id;
  e.sandbox_id = std::move(sandbox_id);
  e.detail_json = detail.dump();
  return s;
}

Status ProofLog::file(std::vector<Signed>& batch) {
  if (batch.empty()) return ok_status();
  std::vector<store::AuditEvent> events;
  events.reserve(batch.size());
  for (const auto& s : batch) events.push_back(s.event);
  auto last = store::AuditLog(store_).append_all(events);
  if (!last.ok()) return last.take_error();
  // One transaction: the events are consecutive, ending at `last`.
  int64_t seq = *last - static_cast<int64_t>(batch.size());
  for (auto& s : batch) s.recorded.seq = s.event.seq = ++seq;
  return ok_status();
}

Result<Recorded> ProofLog::file_one(Signed s) {
  std::vector<Signed> one;
  one.push_back(std::move(s));
  if (auto filed = file(one); !filed.ok()) return filed.take_error();
  return std::move(one.front().recorded);
}

Result<Recorded> ProofLog::record_report(const json& statement, const EventContext& ctx) {
  json detail = json::object();
  if (auto s = summarize_report(statement); s.ok()) {
    detail["held"] = s->held;
    detail["not_held"] = s->not_held;
    detail["unknown"] = s->unknown;
  }
  std::optional<std::string> sandbox;
  if (statement.contains("predicate") && statement["predicate"].contains("sandbox"))
    sandbox = statement["predicate"]["sandbox"].get<std::string>();
  return file_one(
      sign("proof.report", statement.dump(), std::move(sandbox), std::move(detail), ctx));
}

Signed ProofLog::sign_receipt(const CallRecord& call, int64_t report_seq, const EventContext& ctx) {
  json detail = {{"report_sha256", call.report_sha256}, {"report_seq", report_seq}};
  return sign("proof.receipt", receipt_payload(call), call.sandbox, std::move(detail), ctx);
}

Result<Recorded> ProofLog::record_receipt(const CallRecord& call, int64_t report_seq,
                                          const EventContext& ctx) {
  return file_one(sign_receipt(call, report_seq, ctx));
}

Result<std::string> ProofLog::checkpoint() {
  store::AuditLog log(store_);
  auto size = kept_size(log);
  if (!size.ok()) return size.take_error();
  StoredNodes nodes(log);
  const std::string root = tree_root(nodes, *size);
  if (!nodes.failed().empty()) return make_error("checkpoint", nodes.failed());
  return sign_checkpoint({origin_, *size, root}, key_);
}

Result<json> ProofLog::bundle(int64_t receipt_seq, int64_t report_seq) {
  store::AuditLog log(store_);
  auto receipt = log.get(receipt_seq);
  if (!receipt.ok()) return receipt.take_error();
  auto report = log.get(report_seq);
  if (!report.ok()) return report.take_error();
  auto kept = kept_size(log);
  if (!kept.ok()) return kept.take_error();
  const uint64_t size = *kept;
  StoredNodes nodes(log);
  const std::string note = sign_checkpoint({origin_, size, tree_root(nodes, size)}, key_);
  auto entry = [&](const store::AuditEvent& e) { return proven_entry(nodes, size, e); };
  auto envelope_of = [](const store::AuditEvent& e) {
    return json::parse(e.detail_json, nullptr, false).value("envelope", json::object());
  };
  json out = {{"format", kBundleFormat},
              {"receipt", envelope_of(*receipt)},
              {"report", envelope_of(*report)},
              {"log",
               {{"origin", origin_},
                {"size", size},
                {"checkpoint", note},
                {"receipt_entry", entry(*receipt)},
                {"report_entry", entry(*report)}}}};
  if (!nodes.failed().empty()) return make_error("receipt bundle", nodes.failed());
  return out;
}

Result<std::optional<int64_t>> ProofLog::receipt_of_call(int64_t call_id) {
  store::AuditFilter f;
  f.kind = "proof.receipt";
  f.call_id = call_id;
  f.limit = 1;
  auto events = store::AuditLog(store_).list(f);
  if (!events.ok()) return events.take_error();
  if (events->empty()) return std::optional<int64_t>();
  return std::optional<int64_t>(events->front().seq);
}

Result<std::optional<json>> ProofLog::bundle_for_call(int64_t call_id) {
  auto seq = receipt_of_call(call_id);
  if (!seq.ok()) return seq.take_error();
  if (!*seq) return std::optional<json>();
  auto b = bundle_for_receipt(**seq);
  if (!b.ok()) return b.take_error();
  return std::optional<json>(std::move(*b));
}

Result<Recorded> ProofLog::record_sandbox_report(Sandbox& sandbox, const EventContext& ctx,
                                                 StartedProbe probe) {
  auto facts = gather_boundary_facts(sandbox, std::move(probe));
  if (!facts.ok()) return facts.take_error();
  return record_report(report_statement(*facts, judge_bounds(*facts)), ctx);
}

Result<json> ProofLog::inclusion(int64_t seq) {
  store::AuditLog log(store_);
  auto event = log.get(seq);
  if (!event.ok()) return event.take_error();
  auto kept = kept_size(log);
  if (!kept.ok()) return kept.take_error();
  const uint64_t size = *kept;
  StoredNodes nodes(log);
  json out = proven_entry(nodes, size, *event);
  out["checkpoint"] = sign_checkpoint({origin_, size, tree_root(nodes, size)}, key_);
  out["size"] = size;
  if (!nodes.failed().empty()) return make_error("inclusion proof", nodes.failed());
  return out;
}

Result<json> ProofLog::consistency(uint64_t from, uint64_t to) {
  store::AuditLog log(store_);
  auto kept = kept_size(log);
  if (!kept.ok()) return kept.take_error();
  if (to == 0) to = *kept;
  if (from == 0 || from > to || to > *kept) {
    return make_error("consistency proof", "from " + std::to_string(from) + " to " +
                                               std::to_string(to) + ": the log has " +
                                               std::to_string(*kept) +
                                               " events; 0 < from <= to <= that");
  }
  StoredNodes nodes(log);
  json out = {{"checkpoint", sign_checkpoint({origin_, to, tree_root(nodes, to)}, key_)},
              {"from", from},
              {"to", to},
              {"from_root", to_hex(tree_root(nodes, from))},
              {"consistency", hex_list(consistency_proof(nodes, from, to))}};
  if (!nodes.failed().empty()) return make_error("consistency proof", nodes.failed());
  return out;
}

Result<json> ProofLog::bundle_for_receipt(int64_t receipt_seq) {
  auto receipt = store::AuditLog(store_).get(receipt_seq);
  if (!receipt.ok()) return receipt.take_error();
  if (receipt->kind != "proof.receipt")
    return make_error("audit event " + std::to_string(receipt_seq), "is not a receipt");
  const json detail = json::parse(receipt->detail_json, nullptr, false);
  const int64_t report_seq = detail.value("report_seq", int64_t{0});
  if (report_seq <= 0 || report_seq >= receipt_seq)
    return make_error("receipt " + std::to_string(receipt_seq), "it names no report before it");
  return bundle(receipt_seq, report_seq);
}

}  // namespace rf::proof
