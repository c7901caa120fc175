// The docker backend (host side): the same SandboxSpec and tool runner as the
// native backend, in containers of a Docker daemon reached through its Engine
// API over a unix socket, TCP (+TLS) or SSH. `docker` and `remotedocker` are
// this backend; `remotedocker` insists on a remote URL. See docs/backends.md
// and docs/images.md.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "host/egress_hub.h"
#include "sandbox/sandbox.h"

namespace rf::docker {

struct DockerOptions {
  std::string host_url;         // empty: $DOCKER_HOST, else unix:///var/run/docker.sock
  std::string runner_path;      // empty: host::find_runner_binary()
  bool allow_pull = true;       // pull an image that is not on the daemon
  bool require_remote = false;  // remotedocker: a tcp:// or ssh:// URL only
  host::EgressOptions egress;   // network proxy (local daemons only)
  std::chrono::milliseconds connect_timeout{10'000};
};

Result<std::unique_ptr<Backend>> make_docker_backend(const DockerOptions& options);

// `sandbox doctor --backend docker`: works when the backend cannot be made,
// reporting why as failed checks (daemon reachable, API version, seccomp,
// the runner binary, the runner volume).
std::vector<HealthCheck> docker_doctor(const DockerOptions& options);

// Adds "docker" and "remotedocker" to the backend registry, both made with
// `options` (the CLI's and worker's --docker-host).
void register_docker_backend(const DockerOptions& options = {});

}  // namespace rf::docker
