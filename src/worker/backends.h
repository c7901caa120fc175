// Every backend this build has, registered by name for the CLI and the worker:
// native, local, docker and remotedocker (docker/docker_backend.h).
#pragma once

#include <string>

namespace rf::worker {

struct BackendConfig {
  std::string docker_host;  // --docker-host; empty: $DOCKER_HOST or the default socket
};

// Idempotent; a later call replaces the docker backends' configuration.
void register_backends(const BackendConfig& config = {});

// Whether `sandbox list` / `reap` without --backend should ask the docker
// daemon too: a host was given, DOCKER_HOST is set, or the default socket exists.
bool docker_configured(const BackendConfig& config);

}  // namespace rf::worker
