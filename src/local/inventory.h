// Finding local sandboxes without their owners (host side), for `sandbox list`
// and `sandbox reap`: every local sandbox is a scratch directory <root>/<id>,
// and its owner marker <root>/<id>.owner (owner_marker.h) names the process
// that made it and its runner.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "sandbox/sandbox.h"

namespace rf::local {

// A scratch directory without a readable marker younger than this may be a
// sandbox being created (the marker is written once its runner runs).
inline constexpr std::chrono::seconds kSetupGrace{60};

// Every scratch directory under `root`: pid is the runner's while it runs (else
// 0), owner_pid the owner's while it lives (else 0), age from the marker (or,
// without one, from the directory), no memory figure.
Result<std::vector<SandboxInfo>> list_local_sandboxes(const std::string& root);

// Ends and removes the sandboxes whose owner is gone, those at least
// `older_than` old, and scratch directories without a readable marker older
// than kSetupGrace: SIGKILL to the runner (its call supervisors then end their
// calls), then whatever is left in its process group, then the scratch
// directory (following no symlink, entering no mount) and the marker. Markers
// whose directory is gone are removed too. Idempotent. With dry_run, only
// reports them. A removal that fails does not stop the others; the error names
// every sandbox that is left.
Result<std::vector<SandboxInfo>> reap_local_sandboxes(const std::string& root,
                                                      std::chrono::seconds older_than,
                                                      bool dry_run);

}  // namespace rf::local
