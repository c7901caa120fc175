// Finding native sandboxes without their owners (host side), for
// `sandbox list` and `sandbox reap`: every sandbox has a cgroup named after its
// id under the backend's cgroup parent, and its PID 1 is in it.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "host/cgroup.h"
#include "sandbox/sandbox.h"

namespace rf::native {

Result<std::vector<SandboxInfo>> list_native_sandboxes(const host::CgroupLayout& layout,
                                                       const std::string& parent);

// Kills and removes the sandboxes that are orphaned (a PID 1 whose owner is
// gone), left over (a cgroup without PID 1 for over a minute: its janitor was
// killed too; a younger one may be a sandbox being set up) or at least
// `older_than` old.
// Idempotent. With dry_run, only reports them.
Result<std::vector<SandboxInfo>> reap_native_sandboxes(const host::CgroupLayout& layout,
                                                       const std::string& parent,
                                                       std::chrono::seconds older_than,
                                                       bool dry_run);

}  // namespace rf::native
