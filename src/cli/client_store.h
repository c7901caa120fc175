// The store a client command opens (cli side): $RINGFENCE_STORE (a postgres://
// URI, say), or the one under --state-dir, or under the workers' default state
// dir (~/.ringfence/state).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"
#include "store/store.h"

namespace rf::cli {

// `flag` when set, else the workers' default.
std::string state_dir_or_default(const std::string& flag);
// The store a command opens: `store_flag` (--store) when set, else
// $RINGFENCE_STORE, else the SQLite file in `state_dir` (docs/store.md).
std::string store_target(const std::string& store_flag, const std::string& state_dir);
// The stores named on a command line: --store, --from and --to, as
// `--flag VALUE` or `--flag=VALUE`, before any "--" (a command's argv), as
// (flag, value).
std::vector<std::pair<std::string_view, std::string_view>> store_flags_in(int argc,
                                                                          const char* const* argv);
// Where a store is named with a password (--store, --from, --to as VALUE
// or =VALUE, before any "--"; $RINGFENCE_STORE), as an error naming the
// flag or variable and never the password: any process on the host reads
// argv, and the user's own read the environment. nullopt when none does.
std::optional<std::string> store_password_refusal(int argc, const char* const* argv);
// The store of store_target("", state_dir).
Result<std::unique_ptr<store::Store>> open_client_store(const std::string& state_dir);

}  // namespace rf::cli
