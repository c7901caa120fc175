// A stream to a Docker daemon through a relay process: its stdin and stdout
// are our end of a socketpair, and it carries the bytes to the daemon (`ssh
// ... docker system dial-stdio`, or ringfence-docker-tls for TLS). What it
// says on stderr becomes the error when the stream fails before the daemon
// spoke. The relay runs in a new session, with default signals, and is ended
// (SIGTERM, then SIGKILL after 2 s) and reaped when the connection goes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "docker_api/connection.h"

namespace rf::docker {

// Spawns args[0] (looked up in PATH when it has no '/') with args. `label`
// names the relay in errors ("ssh host", "docker TLS tcp://h:2376").
// `pass_fd` (>= 0): the relay gets it as its fd 3 (a socket we connected,
// for ringfence-docker-tls --fd 3).
Result<std::unique_ptr<Connection>> spawn_relay(const std::vector<std::string>& args,
                                                const std::string& label, int pass_fd = -1);

}  // namespace rf::docker
