// A byte stream to a Docker daemon: a unix socket, a TCP socket (optionally
// TLS), or the stdin/stdout of `ssh [-p P] [user@]host docker system dial-stdio`.
// Blocking I/O with deadlines; owns the socket and, for ssh, the ssh process
// (ended and reaped when the connection is destroyed).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "core/result.h"
#include "docker_api/docker_host.h"

namespace rf::docker {

class Connection {
 public:
  virtual ~Connection() = default;
  // Up to `n` bytes; 0 at EOF. Waits at most `timeout` (0: forever) and then
  // fails with ETIMEDOUT.
  virtual Result<size_t> read_some(char* buf, size_t n, std::chrono::milliseconds timeout) = 0;
  virtual Status write_all(std::string_view data) = 0;
  // Half-close: the daemon sees EOF on what we send (the container's stdin).
  virtual Status shutdown_write() = 0;
  // Bytes read from the socket but not yet returned by read_some (TLS buffers,
  // or what was read past an HTTP response head).
  virtual bool has_buffered() const = 0;
  // The underlying descriptor, for poll(); for ssh, our end of the socketpair.
  virtual int fd() const = 0;
};

// Opens a new stream to the daemon. `timeout` bounds connect (and, for ssh,
// nothing more: ssh's own ConnectTimeout is set from it).
Result<std::unique_ptr<Connection>> open_connection(const DockerHost& host,
                                                    std::chrono::milliseconds timeout);

// A connection that first returns `prefix`, then reads from `inner` (what an
// HTTP parser read past a response head belongs to the stream after it).
std::unique_ptr<Connection> with_prefix(std::unique_ptr<Connection> inner, std::string prefix);

}  // namespace rf::docker
