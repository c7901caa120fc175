// TLS to a Docker daemon (tcp:// with DOCKER_TLS_VERIFY, or https://), through
// ringfence-docker-tls (src/docker_tls), a relay process like ssh's: the
// daemon's certificate is verified against DOCKER_CERT_PATH's ca.pem there, and
// our certificate is presented when there is one.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "core/result.h"
#include "docker_api/connection.h"
#include "docker_api/docker_host.h"

namespace rf::docker {

Result<std::unique_ptr<Connection>> spawn_tls_relay(const DockerHost& h,
                                                    std::chrono::milliseconds timeout);

// $RINGFENCE_DOCKER_TLS, else next to the running binary, else
// /usr/libexec/ringfence/ringfence-docker-tls.
Result<std::string> find_tls_relay();

}  // namespace rf::docker
