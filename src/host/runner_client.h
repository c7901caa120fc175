// The host side of the tool runner protocol (docs/protocol.md): one client per
// sandbox, over a connected stream socket to the runner (a socketpair end for
// native, an attach stream for docker). Thread-safe: several execs may run at
// once; whichever thread waits reads frames and hands each to its call.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/unique_fd.h"
#include "proto/frame.h"
#include "proto/messages.h"
#include "sandbox/sandbox.h"

namespace rf::host {

class RunnerClient {
 public:
  explicit RunnerClient(UniqueFd fd);
  ~RunnerClient();

  // Reads the runner's hello, checks its version is in range, sends ours.
  Status handshake(std::chrono::milliseconds timeout);
  const std::string& runner_version() const { return runner_version_; }

  // Runs one call to its end, streaming output into `sink` (sink.on_started gets
  // the call id first, so another thread can feed stdin). `stdin_complete`:
  // `stdin_data` is all of stdin; otherwise more follows via write_stdin().
  Result<proto::ExitStatus> exec(const proto::ExecRequest& req, std::string_view stdin_data,
                                 bool stdin_complete, OutputSink& sink);
  // exec() in two halves: start_exec sends the call (stdin complete) and
  // returns, so it reaches the runner before any call another thread sends
  // after it; finish_exec waits for its end. Meanwhile its frames are kept
  // for it; `sink` must live until finish_exec returns.
  struct StartedExec;
  std::shared_ptr<StartedExec> start_exec(const proto::ExecRequest& req,
                                          std::string_view stdin_data, OutputSink& sink);
  Result<proto::ExitStatus> finish_exec(StartedExec& started);
  // A call the runner starts by itself as `id` (proto::kStartProbeCallId):
  // its frames are kept for it from now on, as for one start_exec sent.
  // Before the handshake, so that none comes unclaimed.
  std::shared_ptr<StartedExec> expect_exec(uint32_t id, OutputSink& sink);
  Status write_stdin(uint32_t call_id, std::string_view data);
  Status close_stdin(uint32_t call_id);
  Status send_signal(uint32_t call_id, int sig);
  Status resize(uint32_t call_id, int rows, int cols);

  Result<std::string> read_file(const std::string& path, int64_t max_bytes = 0);
  Status write_file(const std::string& path, std::string_view data, uint32_t mode);
  Result<std::vector<proto::FileInfo>> list_dir(const std::string& path);
  // Protocol 0.4 (proto::kFileOpsMinor); a runner that speaks less gets an
  // error naming its version, and nothing is sent.
  Status make_dir(const std::string& path, bool parents);
  Status remove(const std::string& path, bool recursive);
  Status move(const std::string& from, const std::string& to);
  Result<proto::FileInfo> stat(const std::string& path);
  // Protocol 0.5 (proto::kWatchMinor): watches a directory until it ends
  // (unwatch(), its directory gone, the connection gone), each batch of
  // events to `on_events` on this thread; `on_watching` hears its id once
  // the runner took it. Returns why it ended; an error when it never began.
  Result<std::string> watch(const std::string& path, bool recursive,
                            const std::function<void(uint32_t)>& on_watching,
                            const std::function<void(std::vector<proto::FileEvent>&&)>& on_events);
  Status unwatch(uint32_t id);
  // Protocol 0.5 (proto::kPortMinor): `request`'s bytes to 127.0.0.1:`port`
  // inside the sandbox, and what the connection answers, piece by piece, to
  // `on_data` (on this thread), until it closes. An error when it could not
  // connect or broke, or the answer passed `max` bytes. Protocol 0.6
  // (proto::kPortStreamMinor): `max` 0 is no bound, and `on_open` hears the
  // exchange's id, for port_input() and port_close() from other threads
  // while this one waits (a WebSocket's other direction).
  static constexpr size_t kPortAnswerMax = 256u << 20;
  Status port_exchange(int port, std::string_view request,
                       const std::function<void(std::string_view)>& on_data,
                       size_t max = kPortAnswerMax,
                       const std::function<void(uint32_t)>& on_open = {});
  Status port_input(uint32_t id, std::string_view bytes);
  Status port_close(uint32_t id);
  Status set_env(const proto::SetEnv& vars);
  Result<proto::ProbeResult> probe();

  // Asks the runner to end every call and exit; does not wait.
  Status shutdown();
  // Ends every waiting call with `reason` (the sandbox died underneath).
  void fail_all(const Error& reason);
  // For transports whose end is not always told (a Docker daemon may keep an
  // attach stream open after the container died): while a call waits and the
  // stream stays silent for `every`, `check` is asked whether the runner's side
  // is gone; an error from it ends every waiting call. Set before any call.
  void set_liveness_check(std::function<std::optional<Error>()> check,
                          std::chrono::milliseconds every);
  int fd() const { return fd_.get(); }

  // JIT credential requests from inside (cred_request, protocol 0.2): each goes
  // to `handler`, on whichever thread reads frames, under the client's lock:
  // it must only queue the request (and never call back into this client);
  // the answer goes out later through answer_credential(). Without a handler
  // a request is refused. Empty: none from here on.
  using CredHandler = std::function<void(const proto::CredRequest&)>;
  void set_cred_handler(CredHandler handler);
  // The asker of a request left before its answer (cred_withdrawn, protocol
  // 0.3): told to `handler` as requests are, and under the same rules.
  using CredWithdrawnHandler = std::function<void(const proto::CredWithdrawn&)>;
  void set_cred_withdrawn_handler(CredWithdrawnHandler handler);
  // The answer to one request; `value` (granted only) is the frame's data.
  Status answer_credential(const proto::CredAnswer& answer, std::string_view value);

 private:
  struct Pending;
  // Points `s`'s frames at its sink and its end.
  void take_exec_frames(StartedExec& s);
  // Registers `s`, sends its exec frame (and stdin beyond it); the send's status.
  Status send_exec(StartedExec& s, const proto::ExecRequest& req, std::string_view stdin_data,
                   bool stdin_complete);
  Result<proto::ExitStatus> finish(StartedExec& s);
  Status send(proto::MsgType type, uint32_t id, std::string_view json, std::string_view data = {},
              uint8_t flags = 0);
  // Sends a request and waits for its single reply frame.
  Result<proto::Frame> request(proto::MsgType type, std::string_view json, std::string_view data);
  Status file_op(proto::MsgType type, const proto::FileRequest& req);
  // Waits until `p` is done, reading and dispatching frames while no one else does.
  Status wait(Pending& p);
  Status read_some();  // called with reader role held; reads and dispatches
  // After a read, with mu_ held: wakes the calls that have frames now, and
  // one to take the reader role if `reader` will not read again at once.
  void wake_after_read(const Pending& reader);
  // Whether a call other than `p` has more data queued than it may (then
  // `p` does not read on for it), with mu_ held.
  bool another_is_full(const Pending& p) const;
  void dispatch(proto::Frame&& frame);

  UniqueFd fd_;
  std::string runner_version_;
  std::string runner_protocol_;  // from its hello
  int runner_minor_ = 0;
  std::mutex send_mu_;
  std::mutex mu_;  // guards everything below
  bool reading_ = false;
  std::optional<Error> broken_;
  uint32_t next_id_ = 1;
  std::map<uint32_t, Pending*> pending_;
  proto::FrameDecoder decoder_;
  std::optional<Error> last_error_;  // the latest ERROR about no call (id 0)
  std::function<std::optional<Error>()> liveness_;
  CredHandler cred_handler_;
  CredWithdrawnHandler cred_withdrawn_handler_;
  std::vector<proto::CredAnswer> cred_refusals_;      // sent once mu_ is released
  void on_cred_request(const proto::Frame& frame);    // with mu_ held
  void on_cred_withdrawn(const proto::Frame& frame);  // with mu_ held
  void send_cred_refusals();                          // without mu_
  std::chrono::milliseconds liveness_every_{0};
  // Registers a call id for `p` (under mu_), and removes it again.
  void add_pending(Pending& p);
  void remove_pending(Pending& p);
  Error closed_error(int err);  // takes mu_: never call it holding mu_
};

}  // namespace rf::host
