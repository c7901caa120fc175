// The tool runner's protocol server: one single-threaded epoll loop over the
// host socket, a signalfd, every call's pipes and reports, and one timer for
// the calls' deadlines. Frames to the host are buffered (the socket is
// non-blocking) and, past a bound, calls stop reading their output until the
// host catches up.
#pragma once

#include <sys/epoll.h>
#include <sys/stat.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"
#include "core/unique_fd.h"
#include "proto/frame.h"
#include "proto/messages.h"
#include "runner/call.h"
#include "runner/cred_server.h"
#include "runner/egress_bridge.h"
#include "runner/file_ops.h"
#include "runner/file_watch.h"
#include "runner/orphans.h"
#include "runner/port_exchange.h"
#include "runner/supervisor_pool.h"

namespace rf::runner {

struct Options {
  int fd = 3;  // the connected protocol socket
  // --stdio: frames come in on fd 0 and go out on fd 1 (docker's attach
  // stream); both move to private fds and 0 and 1 become /dev/null.
  bool stdio = false;
  std::string root = "/";  // what file operations treat as "/"
  // --egress-bridge: listen there (before the handshake) and relay every
  // connection to the proxy's unix socket (runner/egress_bridge.h).
  std::optional<BridgeSpec> egress_bridge;
  // --cred-socket: serve JIT credential requests there ("@ringfence-cred"),
  // forwarded to the host as cred_request (runner/cred_server.h). Only in a
  // sandbox with a network namespace of its own: the name is per namespace.
  std::string cred_socket;
  // --self-probe-at-start NAMES: the self-probe, started as call
  // proto::kStartProbeCallId before the hello (runner/self_probe.h, "At the
  // start"), with these variable names (comma-separated, values empty) for
  // the environment a call gets.
  std::optional<std::vector<std::string>> start_probe_env;
  // --self-probe-inside-only: that probe leaves out what the host reads from
  // PID 1 itself (runner/self_probe.h, "Inside only").
  bool start_probe_inside_only = false;
};

class Runner final : public Loop {
 public:
  // Blocks the signals the loop reads, opens the root, sets up epoll.
  static Result<std::unique_ptr<Runner>> create(const Options& options);
  ~Runner() override;

  // Greets the host, then serves until shutdown, EOF or a signal. Returns the
  // process exit code: 0 shutdown or EOF, 1 handshake refused, 2 broken framing,
  // 128+N ended by signal N.
  int run();

  // Loop
  void watch(int fd, uint32_t call_id, FdKind kind, uint32_t events) override;
  void forget(int fd) override;
  void send(proto::MsgType type, uint32_t call_id, std::string_view json,
            std::string_view data = {}) override;
  bool output_paused() const override { return paused_; }
  void arm(uint32_t call_id, std::chrono::milliseconds after) override;
  void disarm(uint32_t call_id) override;

 private:
  Runner(Options options, FileOps files);
  void watch_supervisor(int fd, pid_t pid, bool on);
  Status handshake();
  Status read_frames_blocking();
  void on_socket(uint32_t events);
  void on_signals();
  void reap_children();
  void kill_orphans();
  // Direct mode: attributes and kills what commands left behind, and lets
  // the calls with nothing left end (runner/orphans.h).
  void settle_direct_calls();
  void handle(proto::Frame&& frame);
  void handle_exec(proto::Frame&& frame);
  void handle_call_frame(const proto::Frame& frame);
  void handle_file(proto::Frame&& frame);
  void handle_set_env(const proto::Frame& frame);
  void handle_probe(const proto::Frame& frame);
  void handle_cred_answer(proto::Frame& frame);
  CallPlan plan_call(uint32_t id, proto::ExecRequest req) const;
  void reply_error(uint32_t id, const Error& e);
  void flush_out();
  void set_paused(bool paused);
  void end_all_calls();
  void flush_before_exit();
  void watch_token(int fd, uint64_t token, uint32_t events);
  // Which descriptors watch_token has in the epoll set, by number: a new one
  // is ADDed and an unwatched one not DELeted, one system call each instead of
  // a MOD that fails first. A call now makes 2: its stdout and stderr ADDed
  // (closed at EOF without a DEL; its reports come on its supervisor's socket,
  // watched from fork to close).
  std::vector<bool> registered_;

  Options options_;
  FileOps files_;
  UniqueFd sock_, epoll_, sigfd_;
  UniqueFd out_fd_;  // --stdio: where frames go (a pipe); else frames go to sock_
  int out_fd() const { return out_fd_ ? out_fd_.get() : sock_.get(); }
  void watch_output(bool want);
  bool pid1_ = false;
  // As PID 1 the runner forks each call's command itself (call.h, "Process
  // tree"): no supervisor per call. Off if /proc cannot list our children.
  bool direct_ = false;
  OrphanLedger orphans_;
  // This binary (/proc/self/exe) as the kernel names it, to know a call of
  // its own self-probe; st_ino 0 when /proc cannot say.
  struct stat self_exe_ {};
  bool is_own_self_probe(const proto::ExecRequest& req, const std::string& path) const;
  // Starts the self-probe as call kStartProbeCallId (Options::start_probe_env);
  // then, after the handshake, waits for its end, handling what is not the
  // protocol socket (its EXIT is queued).
  void start_self_probe();
  void await_start_probe();
  // One ready descriptor that is not the protocol socket.
  void on_event(const epoll_event& ev);
  proto::FrameDecoder decoder_;
  std::string out_;
  size_t out_off_ = 0;
  bool paused_ = false;
  uint32_t sock_events_ = 0;
  SupervisorPool supervisors_;  // before calls_: a call gives its supervisor back as it goes
  UniqueFd idle_timer_;         // ticks every second while a supervisor is idle
  bool idle_timer_armed_ = false;
  void watch_idle_supervisors();
  void on_idle_timer();
  // The calls' deadlines, on one timerfd set for the earliest: a call arms
  // and disarms it without a system call unless its deadline comes first
  // (a timerfd of its own was 5 a call: create, set, watch, unwatch, close).
  // Before calls_, which disarm as they go.
  using Deadline = std::pair<std::chrono::steady_clock::time_point, uint32_t>;
  UniqueFd call_timer_;
  std::set<Deadline> deadlines_;              // earliest first
  std::map<uint32_t, Deadline> deadline_of_;  // by call id
  std::chrono::steady_clock::time_point call_timer_at_ =
      std::chrono::steady_clock::time_point::max();  // what the timerfd is set for
  void set_call_timer();
  void on_call_timer();
  std::map<uint32_t, std::unique_ptr<Call>> calls_;
  // Directory watches (file_watch), by the id the host gave; at most kMaxWatches.
  static constexpr size_t kMaxWatches = 64;
  std::map<uint32_t, std::unique_ptr<DirWatch>> watches_;
  // Requests to ports inside (port_exchange).
  std::unique_ptr<PortExchanges> ports_;
  void handle_port(proto::Frame&& frame);
  void handle_watch(const proto::Frame& frame);
  void on_watch(uint32_t id);
  void end_watch(uint32_t id, const std::string& why);
  std::map<std::string, std::string> extra_env_;  // from set_env, under every call's env
  std::optional<int> exit_code_;
  std::unique_ptr<EgressBridge> bridge_;  // after epoll_: it unregisters into it
  std::unique_ptr<CredServer> cred_;      // likewise
  int host_minor_ = 0;                    // the host's protocol minor, from its hello
};

}  // namespace rf::runner
