// Host side: finding docker sandboxes without their owners, for `sandbox list`
// and `sandbox reap`: every container of ours carries ringfence.* labels
// (docker/container_spec.h), helpers included.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "docker_api/api_client.h"
#include "sandbox/sandbox.h"

namespace rf::docker {

// Sandbox containers and helper containers on the daemon. owner_pid is the
// owner's while it lives on this host; 0 when it is gone; the labelled pid
// when the owner is on another host (it cannot be told, so age decides).
Result<std::vector<SandboxInfo>> list_docker_sandboxes(ApiClient& api);

// Where a container's volumes are attached on the host (host/idmapped_tree.h
// AttachedTree): one directory per sandbox id, one mount point per volume.
inline constexpr const char* kVolumeAttachDir = "/run/ringfence/volumes";

// Force-removes those whose owner is gone and those at least `older_than`
// old, and the volume mounts attached for them (kVolumeAttachDir/ID); and
// the volume mounts of sandboxes whose containers are gone (a worker that
// died between removing one and detaching its volumes), once a minute old
// (a younger one may be a sandbox being made). With dry_run, only reports
// the containers.
Result<std::vector<SandboxInfo>> reap_docker_sandboxes(
    ApiClient& api, std::chrono::seconds older_than, bool dry_run,
    const std::string& attach_dir = kVolumeAttachDir);

}  // namespace rf::docker
