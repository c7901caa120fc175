#include "policy/load.h"

#include "core/json_input.h"
#include "store/policy_store.h"

namespace rf::policy {
namespace {

Result<std::optional<PolicyDoc>> doc_of(const std::optional<store::PolicyRow>& row) {
  if (!row) return std::optional<PolicyDoc>();
  auto j = parse_json(row->policy_json, "policy of " + row->project);
  if (!j) return j.take_error();
  auto doc = parse_policy_doc(*j);
  if (!doc) {
    return make_error("policy of " + row->project,
                      doc.error().to_string() + " (ringfence policy set rewrites it)");
  }
  return std::optional<PolicyDoc>(std::move(*doc));
}

}  // namespace

Result<OperatorPolicy> load_policy(store::Store& store, const std::string& project) {
  auto rows = store::PolicyStore(store).get_with_default(project);
  if (!rows) return rows.take_error();
  // A policy that cannot be read fails closed: no request is checked against
  // less than the operator wrote.
  auto mine = doc_of(rows->project);
  if (!mine) return mine.take_error();
  auto fallback = doc_of(rows->fallback);
  if (!fallback) return fallback.take_error();
  return OperatorPolicy::resolve(project, *mine ? &**mine : nullptr,
                                 *fallback ? &**fallback : nullptr, host_capacity());
}

}  // namespace rf::policy
