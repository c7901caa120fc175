#include "cli/backends.h"

#include <unistd.h>

#include <cstdlib>

#include "docker/docker_backend.h"
#include "local/local_backend.h"
#include "native/native_backend.h"

namespace rf::cli {

void register_backends(const BackendConfig& config) {
  native::NativeOptions native;
  native.egress.resolve = config.proxy_resolve;
  native.egress.edge.ca_file = config.egress_ca_file;
  native::register_native_backend(native);
  local::register_local_backend();
  docker::DockerOptions docker;
  docker.host_url = config.docker_host;
  docker.egress.resolve = config.proxy_resolve;
  docker.egress.edge.ca_file = config.egress_ca_file;
  docker::register_docker_backend(docker);
}

bool docker_configured(const BackendConfig& config) {
  if (!config.docker_host.empty()) return true;
  const char* env = std::getenv("DOCKER_HOST");
  if (env != nullptr && *env != '\0') return true;
  return ::access("/var/run/docker.sock", F_OK) == 0;
}

Result<BackendConfig> backend_config(const worker::WorkerSettings& settings) {
  BackendConfig config{settings.docker_host.value, {}, settings.egress_ca_file.value};
  std::string joined;
  for (const auto& entry : settings.proxy_resolve.value)
    joined += (joined.empty() ? "" : ",") + entry;
  auto resolve = net::parse_resolve_override(joined);
  if (!resolve) {
    return make_error(worker::where_of(settings.proxy_resolve.source, "sandbox.proxy_resolve"),
                      resolve.error().to_string());
  }
  config.proxy_resolve = std::move(*resolve);
  return config;
}

Result<worker::Placement> place_worker(const worker::WorkerSettings& settings) {
  auto config = backend_config(settings);
  if (!config) return config.take_error();
  register_backends(*config);
  return worker::place(settings);
}

}  // namespace rf::cli
