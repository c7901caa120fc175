// `sandbox doctor --backend local` (host side): what the local backend needs,
// which is little: the tool runner, and a scratch root only we can write.
#pragma once

#include <vector>

#include "local/local_backend.h"
#include "sandbox/sandbox.h"

namespace rf::local {

// Works when the backend cannot be made, reporting why as failed checks.
std::vector<HealthCheck> local_doctor(const LocalOptions& options);

}  // namespace rf::local
