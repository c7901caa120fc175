// The API's audit routes (issues 14, 15): the log's events, its verdict,
// its signed checkpoint and Merkle proofs. An agent token reads its own
// project's events only: an inclusion proof of another project's event
// answers exactly as an unknown event does, and the verdict says whether
// the chain is intact, not how long it is. Checkpoints and consistency
// proofs are hashes of the whole log and name no project's data.
#include <nlohmann/json.hpp>

#include "api/api.h"
#include "api/json_answers.h"
#include "core/json_input.h"
#include "core/units.h"
#include "proof/proof_log.h"
#include "store/audit_log.h"

namespace rf::api {
using nlohmann::json;

namespace {

// A whole number query parameter: nullopt when absent, -1 when not a whole number.
std::optional<int64_t> number(const Target& t, const char* name) {
  const auto it = t.query.find(name);
  if (it == t.query.end()) return std::nullopt;
  const auto v = parse_whole_number(it->second);
  if (!v || *v > static_cast<uint64_t>(INT64_MAX)) return -1;
  return static_cast<int64_t>(*v);
}

}  // namespace

void Api::audit_list(Ctx& c) {
  auto project = project_of(c);
  if (!project) return;
  store::AuditFilter filter;
  // An operator without ?project= reads every project's; anyone else, their own.
  if (!c.who.is_operator() || c.target.query.count("project")) filter.project_id = *project;
  // Whole numbers in range, or a 400 naming the parameter: never read as
  // 0 or clamped into something the caller did not ask for.
  if (auto it = c.target.query.find("after"); it != c.target.query.end()) {
    const auto after = parse_whole_number(it->second);
    if (!after || *after > static_cast<uint64_t>(INT64_MAX)) {
      return fail(
          c.out, 400, "after",
          "after \"" + it->second + "\": expected an event's seq (a whole number, 0 or more)");
    }
    filter.after_seq = static_cast<int64_t>(*after);
  }
  if (auto it = c.target.query.find("limit"); it != c.target.query.end()) {
    const auto limit = parse_whole_number(it->second);
    if (!limit || *limit < 1 || *limit > 1000) {
      return fail(c.out, 400, "limit",
                  "limit \"" + it->second + "\": expected a whole number from 1 to 1000");
    }
    filter.limit = static_cast<int>(*limit);
  }
  auto events = store::AuditLog(store_).list(filter);
  if (!events) return fail(c.out, 500, "", events.error().to_string());
  json list = json::array();
  for (const auto& e : *events) {
    list.push_back(audit_event_json(e));
  }
  answer(c.out, 200, {{"events", list}});
}

void Api::audit_verify(Ctx& c) {
  auto v = store::AuditLog(store_).verify();
  if (!v) return fail(c.out, 500, "", v.error().to_string());
  // How many events every project wrote, and where the chain broke, are the
  // operator's to know.
  if (!c.who.is_operator()) return answer(c.out, 200, {{"intact", v->intact}});
  answer(c.out, 200,
         {{"intact", v->intact},
          {"events", v->events},
          {"first_bad", opt(v->first_bad)},
          {"reason", v->reason}});
}

void Api::audit_checkpoint(Ctx& c) {
  if (options_.signing_key == nullptr)
    return fail(c.out, 503, "", "this server has no signing key");
  proof::ProofLog log(store_, *options_.signing_key, proof::default_origin());
  auto note = log.checkpoint();
  if (!note) return fail(c.out, 500, "", note.error().to_string());
  answer(c.out, 200, {{"checkpoint", *note}});
}

// /v1/audit/proofs/inclusion?seq=N: the event and the path to the signed
// root. The event holds its project's data (token names, keys, secret
// names): another project's answers as an event that does not exist.
void Api::audit_inclusion(Ctx& c) {
  if (options_.signing_key == nullptr)
    return fail(c.out, 503, "", "this server has no signing key");
  const auto seq = number(c.target, "seq");
  if (!seq || *seq <= 0) return fail(c.out, 400, "seq", "a positive event number is needed");
  const Error unknown{"audit event " + std::to_string(*seq), "there is no such event", 0,
                      ErrorCode::kNotFound};
  auto event = store::AuditLog(store_).get(*seq);
  if (!event) {
    if (event.error().code == ErrorCode::kNotFound)
      return fail(c.out, 404, "seq", unknown.to_string());
    return fail(c.out, 500, "", event.error().to_string());
  }
  if (!c.who.is_operator() && event->project_id != c.who.project) {
    return fail(c.out, 404, "seq", unknown.to_string());
  }
  proof::ProofLog log(store_, *options_.signing_key, proof::default_origin());
  auto out = log.inclusion(*seq);
  if (!out && out.error().code == ErrorCode::kNotFound) {
    return fail(c.out, 404, "seq", out.error().to_string());
  }
  if (!out) return fail(c.out, 500, "", out.error().to_string());
  answer(c.out, 200, *out);
}

void Api::audit_consistency(Ctx& c) {
  if (options_.signing_key == nullptr)
    return fail(c.out, 503, "", "this server has no signing key");
  const auto from = number(c.target, "from"), to = number(c.target, "to");
  if (!from || *from <= 0) return fail(c.out, 400, "from", "a positive tree size is needed");
  if (to && *to < 0) return fail(c.out, 400, "to", "a tree size is needed");
  proof::ProofLog log(store_, *options_.signing_key, proof::default_origin());
  auto out = log.consistency(static_cast<uint64_t>(*from), static_cast<uint64_t>(to.value_or(0)));
  if (!out) return fail(c.out, 400, "from", out.error().to_string());
  answer(c.out, 200, *out);
}

}  // namespace rf::api
