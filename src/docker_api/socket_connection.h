// Plain sockets to a Docker daemon (unix, TCP): connecting with a deadline,
// and the Connection over such a socket, which the ssh transport builds on.
#pragma once

#include <chrono>
#include <string>

#include "core/result.h"
#include "core/unique_fd.h"
#include "docker_api/connection.h"
#include "docker_api/docker_host.h"

namespace rf::docker {

// Waits for `events` on fd; 0 ms means forever. ETIMEDOUT when the time ran out
// (EINTR does not restart the clock).
Status wait_fd(int fd, short events, std::chrono::milliseconds timeout);
Status set_nonblocking(int fd, bool on);

// A connected unix socket to h.path, or TCP to h.host:h.port (every address
// it resolves to, in order; TCP_NODELAY and keep-alive on).
Result<UniqueFd> connect_unix(const DockerHost& h, std::chrono::milliseconds timeout);
Result<UniqueFd> connect_tcp(const DockerHost& h, std::chrono::milliseconds timeout);

// A plain socket (unix or TCP), or our end of the socketpair to ssh. One
// reader and one writer may use it at the same time (attach streams do).
class FdConnection : public Connection {
 public:
  explicit FdConnection(UniqueFd fd) : fd_(std::move(fd)) {}
  Result<size_t> read_some(char* buf, size_t n, std::chrono::milliseconds timeout) override;
  Status write_all(std::string_view data) override;
  Status shutdown_write() override;
  bool has_buffered() const override { return false; }
  int fd() const override { return fd_.get(); }

 protected:
  UniqueFd fd_;
};

}  // namespace rf::docker
