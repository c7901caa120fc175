#include "docker_api/tls_relay.h"

#include <vector>

#include "core/helper_binary.h"
#include "docker_api/relay_connection.h"

namespace rf::docker {

Result<std::string> find_tls_relay() {
  return find_helper_binary("ringfence-docker-tls", "RINGFENCE_DOCKER_TLS");
}

Result<std::unique_ptr<Connection>> spawn_tls_relay(const DockerHost& h,
                                                    std::chrono::milliseconds timeout) {
  auto relay = find_tls_relay();
  if (!relay) return make_error("docker TLS " + h.url, relay.error().to_string());
  std::vector<std::string> args = {*relay, "--timeout-ms", std::to_string(timeout.count())};
  if (!h.cert_dir.empty()) {
    args.push_back("--cert-dir");
    args.push_back(h.cert_dir);
  }
  if (!h.ca_file.empty()) {
    args.push_back("--ca-file");
    args.push_back(h.ca_file);
  }
  if (!h.tls_verify) args.push_back("--no-verify");
  args.push_back(h.url);
  args.push_back(h.host);
  args.push_back(std::to_string(h.port));
  return spawn_relay(args, "docker TLS " + h.url);
}

}  // namespace rf::docker
