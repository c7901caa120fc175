// The store's operator policies (issue 39): one JSON document per project, and
// the default one under the project id "*", as `ringfence policy set` wrote
// them. The store keeps the text; policy/operator_policy.h reads it. Setting
// one writes its audit event in the same transaction.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "store/audit_log.h"
#include "store/store.h"

namespace rf::store {

// The project id of the default policy, which every project's falls back to.
inline constexpr const char* kDefaultPolicy = "*";

struct PolicyRow {
  std::string project;  // or kDefaultPolicy
  std::string policy_json;
  int64_t updated_at = 0;
  std::string updated_by;
};

class PolicyStore {
 public:
  explicit PolicyStore(Store& store) : store_(store) {}

  // The policy of `project` (or of kDefaultPolicy), nullopt when none was set.
  Result<std::optional<PolicyRow>> get(const std::string& project);
  // Both at once, in one read: the project's and the default.
  struct Pair {
    std::optional<PolicyRow> project, fallback;
  };
  Result<Pair> get_with_default(const std::string& project);
  // Replaces the policy of `project`, writing `audit` in the same transaction.
  Status set(const PolicyRow& row, const std::vector<AuditEvent>& audit);
  // Removes it (the default applies again); false when there was none.
  Result<bool> clear(const std::string& project, const std::vector<AuditEvent>& audit);
  Result<std::vector<PolicyRow>> list();

 private:
  Store& store_;
};

}  // namespace rf::store
