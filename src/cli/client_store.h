// The store a client command opens (cli side): the one under --state-dir, or
// under the workers' default state dir (~/.ringfence/state).
#pragma once

#include <memory>
#include <string>

#include "core/result.h"
#include "store/store.h"

namespace rf::cli {

// `flag` when set, else the workers' default.
std::string state_dir_or_default(const std::string& flag);
Result<std::unique_ptr<store::Store>> open_client_store(const std::string& state_dir);

}  // namespace rf::cli
