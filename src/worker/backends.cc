#include "worker/backends.h"

#include <unistd.h>

#include <cstdlib>

#include "docker/docker_backend.h"
#include "local/local_backend.h"
#include "native/native_backend.h"

namespace rf::worker {

void register_backends(const BackendConfig& config) {
  native::register_native_backend();
  local::register_local_backend();
  docker::DockerOptions docker;
  docker.host_url = config.docker_host;
  docker::register_docker_backend(docker);
}

bool docker_configured(const BackendConfig& config) {
  if (!config.docker_host.empty()) return true;
  const char* env = std::getenv("DOCKER_HOST");
  if (env != nullptr && *env != '\0') return true;
  return ::access("/var/run/docker.sock", F_OK) == 0;
}

}  // namespace rf::worker
