// Host side: finding docker sandboxes without their owners, for `sandbox list`
// and `sandbox reap`: every container of ours carries ringfence.* labels
// (docker/container_spec.h), helpers included.
#pragma once

#include <chrono>
#include <vector>

#include "docker_api/api_client.h"
#include "sandbox/sandbox.h"

namespace rf::docker {

// Sandbox containers and helper containers on the daemon. owner_pid is the
// owner's while it lives on this host; 0 when it is gone; the labelled pid
// when the owner is on another host (it cannot be told, so age decides).
Result<std::vector<SandboxInfo>> list_docker_sandboxes(ApiClient& api);

// Force-removes those whose owner is gone and those at least `older_than`
// old. With dry_run, only reports them.
Result<std::vector<SandboxInfo>> reap_docker_sandboxes(ApiClient& api,
                                                       std::chrono::seconds older_than,
                                                       bool dry_run);

}  // namespace rf::docker
