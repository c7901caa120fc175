// The CLI's stdio for one call (`sandbox exec`, `sandbox shell`): the call's
// output goes to our stdout and stderr; our stdin and our signals go to the
// call. One thread does the inbound half and the forwarder owns it: the
// thread polls stdin, a signalfd and a stop eventfd, and stop() (or the
// destructor) joins it, so it never outlives the sandbox it writes to.
//
//   - stdin is forwarded only once the call has started (on_started), and the
//     call's stdin is closed at our EOF; a pipe that never closes does not hold
//     up the exit, since stop() wakes the poll.
//   - SIGINT, SIGTERM, SIGHUP and SIGQUIT go to the command (those that came
//     before it started are sent once it has); with a pty, SIGWINCH resizes it.
//     One thread does both, signals first: input typed after a resize reaches
//     the command after the resize does.
//
// Reads stdin with plain blocking read(2) once poll says it is readable: the
// forwarder must be the only reader of our stdin while it runs.
#pragma once

#include <signal.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>

#include "core/result.h"
#include "core/unique_fd.h"
#include "proof/digest.h"
#include "sandbox/sandbox.h"

namespace rf::cli {

class StdioForwarder final : public OutputSink {
 public:
  // The signals forwarded. Blocks them in the calling thread: call it before
  // any other thread starts (every later thread inherits the mask), so they
  // reach only the forwarder's signalfd.
  static sigset_t block_signals();

  // Forwards to the calls of `sandbox`, which must outlive the forwarder.
  // `pty`: the call runs on a pty, which SIGWINCH resizes.
  static Result<std::unique_ptr<StdioForwarder>> start(Sandbox& sandbox, bool pty);
  ~StdioForwarder() override;  // stop()
  StdioForwarder(const StdioForwarder&) = delete;
  StdioForwarder& operator=(const StdioForwarder&) = delete;

  void on_started(uint32_t call_id, int pid) override;
  void on_stdout(std::string_view data) override;
  void on_stderr(std::string_view data) override;

  // Ends forwarding and joins the thread. Idempotent.
  void stop();

  // What was forwarded to the call's stdin (for its receipt); read after stop().
  const proof::Sha256Stream& stdin_digest() const { return stdin_digest_; }

 private:
  StdioForwarder(Sandbox& sandbox, bool pty) : sandbox_(sandbox), pty_(pty) {}
  void loop();
  void wake();
  // Sends `sig` (as read from the signalfd) to call `id`.
  void forward_signal(uint32_t id, int sig);

  Sandbox& sandbox_;
  const bool pty_;
  UniqueFd wake_fd_;    // eventfd: the call started, or stop
  UniqueFd signal_fd_;  // the signals of block_signals()
  bool stdin_usable_ = true;
  std::mutex mu_;
  uint32_t call_id_ = 0;   // guarded by mu_
  bool stopping_ = false;  // guarded by mu_
  std::thread thread_;
  proof::Sha256Stream stdin_digest_;  // written by the thread only
};

}  // namespace rf::cli
