// Host side: the tool runner's channel over a container's attach stream. The
// runner reads protocol frames on its stdin and writes them on its stdout;
// Docker carries both over one hijacked connection, stdout and stderr
// multiplexed (docker/stream_demux.h). Two pump threads join that connection
// to one end of a socketpair whose other end the RunnerClient owns, so the
// client speaks to a docker sandbox exactly as to a native one. What the
// runner writes on stderr is logged and its last lines kept for errors.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/result.h"
#include "core/unique_fd.h"
#include "docker_api/connection.h"

namespace rf::docker {

class AttachChannel {
 public:
  // Starts pumping; `name` (the sandbox id) labels log lines.
  static Result<std::unique_ptr<AttachChannel>> start(std::unique_ptr<Connection> conn,
                                                      std::string name);
  ~AttachChannel();
  AttachChannel(const AttachChannel&) = delete;
  AttachChannel& operator=(const AttachChannel&) = delete;

  // The RunnerClient's end (once).
  UniqueFd take_client_fd() { return std::move(client_fd_); }
  // The last lines the runner wrote on its stderr ("" when none).
  std::string stderr_tail() const;
  // Ends both directions and joins the threads. Idempotent.
  void close();

 private:
  AttachChannel(std::unique_ptr<Connection> conn, std::string name)
      : conn_(std::move(conn)), name_(std::move(name)) {}
  void pump_up();    // client -> container stdin
  void pump_down();  // container stdout/stderr -> client, stderr -> log
  void on_stderr(std::string_view data);

  std::unique_ptr<Connection> conn_;
  std::string name_;
  UniqueFd client_fd_, pump_fd_;
  std::thread up_, down_;
  mutable std::mutex mu_;
  std::string stderr_tail_, stderr_line_;
  bool closed_ = false;
};

}  // namespace rf::docker
