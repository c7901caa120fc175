// A project's effective operator policy, read from the store (its policy and
// the default one) and this host's capacity.
#pragma once

#include <string>

#include "core/result.h"
#include "policy/operator_policy.h"
#include "store/store.h"

namespace rf::policy {

Result<OperatorPolicy> load_policy(store::Store& store, const std::string& project);

}  // namespace rf::policy
