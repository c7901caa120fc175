// ssh to a Docker daemon: `ssh [-p P] [-l user] host docker system
// dial-stdio`, its stdin and stdout our end of a socketpair. What ssh says on
// stderr becomes the error when the stream fails before the daemon spoke.
#pragma once

#include <chrono>
#include <memory>

#include "core/result.h"
#include "docker_api/connection.h"
#include "docker_api/docker_host.h"

namespace rf::docker {

// Extra ssh arguments come from $RINGFENCE_SSH_OPTIONS (split on spaces).
Result<std::unique_ptr<Connection>> spawn_ssh(const DockerHost& h,
                                              std::chrono::milliseconds timeout);

}  // namespace rf::docker
