#include "proof/verify.h"

#include "proof/checkpoint.h"
#include "proof/digest.h"
#include "proof/dsse.h"
#include "proof/merkle.h"
#include "proof/proof_log.h"

namespace rf::proof {
namespace {

using json = nlohmann::json;

struct Signed {
  Envelope envelope;
  json statement;
  std::string sha256;  // of the payload: what the receipt and the log name it by
};

Result<Signed> open_envelope(const json& bundle, const char* name, std::string_view type,
                             const PublicKey& key) {
  const auto it = bundle.find(name);
  if (it == bundle.end()) return make_error(name, "missing from the file");
  auto env = parse_envelope(*it, name);
  if (!env.ok()) return env.take_error();
  if (auto v = verify_envelope(*env, key, name); !v) return v.take_error();
  auto st = envelope_statement(*env, name);
  if (!st.ok()) return st.take_error();
  if (st->value("predicateType", "") != type)
    return make_error(name, "its predicateType is not " + std::string(type));
  std::string digest = sha256_hex(env->payload);
  return Signed{std::move(*env), std::move(*st), std::move(digest)};
}

// One log entry: its event is intact, holds this envelope's digest, and is
// in the tree the checkpoint names.
Status check_entry(const json& log, const char* entry_name, const char* kind,
                   const Signed& envelope, const Checkpoint& cp) {
  const std::string where = std::string("log ") + entry_name;
  const auto it = log.find(entry_name);
  if (it == log.end() || !it->is_object()) return make_error(where, "missing from the file");
  auto event = parse_event_json(it->value("event", json()), where + " event");
  if (!event.ok()) return event.take_error();
  if (event->kind != kind)
    return make_error(where, "its event is a " + event->kind + ", not a " + kind);
  if (store::audit_event_hash(*event) != event->hash) {
    return make_error(where, "event " + std::to_string(event->seq) +
                                 ": its hash does not match its fields (edited?)");
  }
  const json detail = json::parse(event->detail_json, nullptr, false);
  if (!detail.is_object() || detail.value("sha256", "") != envelope.sha256) {
    return make_error(where,
                      "event " + std::to_string(event->seq) + " records another " +
                          std::string(kind == std::string("proof.receipt") ? "receipt" : "report") +
                          " than the one in this file");
  }
  const uint64_t index = it->value("index", uint64_t{0});
  if (event->seq < 1 || index != static_cast<uint64_t>(event->seq - 1))
    return make_error(where, "its index is not its event's place in the log");
  std::vector<std::string> path;
  const auto inc = it->find("inclusion");
  if (inc == it->end() || !inc->is_array()) return make_error(where, "no inclusion proof");
  for (const auto& h : *inc) {
    auto raw = h.is_string() ? from_hex(h.get<std::string>()) : std::nullopt;
    if (!raw || raw->size() != kHashBytes)
      return make_error(where, "a hash of its inclusion proof is not 64 hex digits");
    path.push_back(std::move(*raw));
  }
  auto leaf_data = from_hex(event->hash);
  if (!leaf_data || leaf_data->size() != kHashBytes)
    return make_error(where, "its event's hash is not 64 hex digits");
  if (auto v = verify_inclusion(index, cp.size, leaf_hash(*leaf_data), path, cp.root); !v)
    return make_error(where, v.error().message);
  return ok_status();
}

Result<BundleVerdict> verify_bundle_fields(const json& bundle, const PublicKey& key);

}  // namespace

Result<BundleVerdict> verify_bundle(const json& bundle, const PublicKey& key) {
  // The file is anyone's: a field of the wrong type is a refusal, not a crash.
  try {
    return verify_bundle_fields(bundle, key);
  } catch (const json::exception& e) {
    return make_error("receipt file", std::string("malformed: ") + e.what());
  }
}

namespace {
Result<BundleVerdict> verify_bundle_fields(const json& bundle, const PublicKey& key) {
  if (!bundle.is_object() || bundle.value("format", "") != kBundleFormat)
    return make_error("receipt file",
                      "not a ringfence receipt (format " + std::string(kBundleFormat) + ")");
  auto receipt = open_envelope(bundle, "receipt", kReceiptPredicate, key);
  if (!receipt.ok()) return receipt.take_error();
  auto report = open_envelope(bundle, "report", kReportPredicate, key);
  if (!report.ok()) return report.take_error();
  const std::string named =
      receipt->statement["predicate"].value("report", json::object()).value("sha256", "");
  const std::string& have = report->sha256;
  if (named != have) {
    return make_error("receipt", "it names report " + named.substr(0, 16) +
                                     "..., the report in this file is " + have.substr(0, 16) +
                                     "...");
  }
  if (receipt->statement["predicate"].value("sandbox", "") !=
      report->statement["predicate"].value("sandbox", "")) {
    return make_error("receipt", "its sandbox is not the report's");
  }
  const auto log = bundle.find("log");
  if (log == bundle.end() || !log->is_object()) return make_error("log", "missing from the file");
  auto cp = verify_checkpoint(log->value("checkpoint", ""), key);
  if (!cp.ok()) return make_error("log checkpoint", cp.error().message);
  if (auto v = check_entry(*log, "receipt_entry", "proof.receipt", *receipt, *cp); !v)
    return v.take_error();
  if (auto v = check_entry(*log, "report_entry", "proof.report", *report, *cp); !v)
    return v.take_error();
  auto summary = summarize_report(report->statement);
  if (!summary.ok()) return summary.take_error();
  BundleVerdict v;
  v.bounds = std::move(*summary);
  v.receipt = std::move(receipt->statement);
  v.report = std::move(report->statement);
  v.origin = cp->origin;
  v.log_size = cp->size;
  return v;
}
}  // namespace

}  // namespace rf::proof
