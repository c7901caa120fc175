// The lifetime of a front door's sandbox (issue 41): its name (unique among
// the project's live sandboxes), its metadata, when it expires and after how
// long idle. The worker holding the sandbox enforces them (worker/
// door_sandboxes.h); every serve of the fleet reads them here to list,
// filter and find sandboxes by name.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "core/result.h"
#include "store/store.h"

namespace rf::store {

struct SandboxLifetime {
  std::string sandbox_id;
  std::string project;
  std::string name;  // "" = unnamed
  std::map<std::string, std::string> metadata;
  std::optional<int64_t> expires_at;  // ms since the epoch; none = never
  int64_t idle_timeout_ms = 0;        // 0 = no idle expiry
  std::optional<std::string> ended_reason;
};

class SandboxLifetimes {
 public:
  explicit SandboxLifetimes(Store& store) : store_(store) {}

  // Records a new sandbox's lifetime. Refused (ErrorCode::kConflict, writing
  // nothing) when a live sandbox of the project has the name already.
  Status record(const SandboxLifetime& lifetime);
  // A new expiry (the client's PUT .../timeout).
  Status set_expiry(const std::string& sandbox_id, std::optional<int64_t> expires_at);
  // Why it ended: "timeout", "idle", "deleted"...
  Status ended(const std::string& sandbox_id, const std::string& reason);
  // The lifetimes of the project's live sandboxes ("" = every project's), by id.
  Result<std::map<std::string, SandboxLifetime>> of_live(const std::string& project);

 private:
  Store& store_;
};

}  // namespace rf::store
