// TLS to a Docker daemon over a connected TCP socket (tcp:// with
// DOCKER_TLS_VERIFY, or https://): the daemon's certificate is verified
// against DOCKER_CERT_PATH's CA, and ours is presented when there is one.
#pragma once

#include <chrono>
#include <memory>

#include "core/result.h"
#include "core/unique_fd.h"
#include "docker_api/connection.h"
#include "docker_api/docker_host.h"

namespace rf::docker {

Result<std::unique_ptr<Connection>> wrap_tls(UniqueFd fd, const DockerHost& h,
                                             std::chrono::milliseconds timeout);

}  // namespace rf::docker
