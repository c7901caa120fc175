// One tool call inside the runner: its process tree, pipes (or pty), stdin
// buffer, timeout, output cap, and the EXIT it reports.
//
// Process tree (see docs/protocol.md, "Process tree"). As PID 1 (native and
// docker sandboxes), the runner forks the command itself:
//
//   runner (PID 1) ── command (own process group) ── ...
//
// and whatever the command leaves behind reparents to the runner, which says
// whose it is (runner/orphans.h) and kills it as that call's command ends:
// the command's process group at once, and each orphan of the call with
// everything below it. The call reports its end only once those are reaped.
// So nothing a call started outlives the call or keeps its stdout open,
// with one documented exception: a process that left the call's process
// group and holds none of its stdio, found while other calls ran, lives
// until all of those have ended their commands.
//
// Where the runner is not PID 1 (the local backend), a supervisor stands
// between (one of the runner's, runner/supervisor_pool.h, busy with one call
// at a time):
//
//   runner ── supervisor (subreaper) ── command (own process group) ── ...
//
// It forks the command, waits for it, then SIGKILLs every process left below
// it (orphans reparent to it because it is a subreaper) until it has no
// children, and only then writes its report (kDone) and waits for its next
// call. Its records (kStarted, kDone) come back on its socket; the runner's
// side of that socket reaching EOF (shut for a timeout, output cap or
// shutdown, or the runner dying) makes it kill the tree.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/unique_fd.h"
#include "proto/frame.h"
#include "proto/messages.h"
#include "runner/orphans.h"
#include "runner/supervisor.h"
#include "runner/supervisor_pool.h"

namespace rf::runner {

// Which of a call's descriptors an event is about.
enum class FdKind : uint8_t { kStdout = 1, kStderr, kStdin, kReport };

// What a call needs from the runner's event loop.
class Loop {
 public:
  virtual ~Loop() = default;
  // Sets the epoll interest of `fd`; 0 removes it (a quiet fd must not stay
  // registered: a hung-up pipe would wake the loop forever).
  virtual void watch(int fd, uint32_t call_id, FdKind kind, uint32_t events) = 0;
  // `fd` is about to close and no other process holds its file: the close
  // takes it out of the epoll set, so only the record of it goes (no
  // epoll_ctl). A copy in a supervisor just forked (until it closes all but
  // its socket) keeps it there a moment longer: its events then carry a call
  // id whose descriptor is gone, and are ignored.
  virtual void forget(int fd) = 0;
  // Queues a frame for the host.
  virtual void send(proto::MsgType type, uint32_t call_id, std::string_view json,
                    std::string_view data = {}) = 0;
  // True while too much output waits for the host: calls stop reading their pipes.
  virtual bool output_paused() const = 0;
  // Calls Call::on_deadline of `call_id` once `after` has passed (replacing
  // an earlier deadline of that call); disarm forgets it. One timer serves
  // every call: a call costs no timer descriptor of its own.
  virtual void arm(uint32_t call_id, std::chrono::milliseconds after) = 0;
  virtual void disarm(uint32_t call_id) = 0;
};

// Everything the runner decided before starting a call.
struct CallPlan {
  uint32_t id = 0;
  proto::ExecRequest req;
  std::vector<std::string> env;         // "NAME=value", the complete environment
  std::vector<std::string> candidates;  // paths to try for argv[0], in order
  bool searched = false;                // argv[0] was looked up in PATH
  bool self_probe = false;              // this runner's self-probe (ChildArgs::self_probe)
  bool direct = false;  // the runner forks the command itself (PID 1): no supervisor
  std::vector<std::string> disk_paths;  // checked for a full disk after the call
};

// The EXIT of a command that was not found in PATH: 127, and no process was made.
proto::ExitStatus command_not_found(const std::string& name);

class Call {
 public:
  // Forks the command (CallPlan::direct), or hands the call to a supervisor
  // of `pool`. A command that cannot start is
  // reported through EXIT, not here; an error here means no process was made
  // (pipes, fork).
  static Result<std::unique_ptr<Call>> start(Loop& loop, SupervisorPool& pool, CallPlan plan,
                                             std::string stdin_data, bool stdin_complete);
  ~Call();

  uint32_t id() const { return plan_.id; }
  // The supervisor while it is busy with this call (0 once its kDone was read).
  pid_t supervisor_pid() const { return supervisor_; }
  pid_t command_pid() const { return command_; }
  bool finished() const { return finished_; }
  // The supervisor exited without its report: it was killed, and its orphans
  // (now the runner's children) are loose.
  bool supervisor_lost() const { return supervisor_status_.has_value() && !have_done_; }

  void on_event(FdKind kind, uint32_t events);
  // Its deadline (Loop::arm) passed: the timeout, or the grace after a lost supervisor.
  void on_deadline();
  // The runner reaped the supervisor.
  void on_supervisor_exit(int wait_status);

  // A command the runner forked itself (CallPlan::direct)...
  bool direct() const { return plan_.direct; }
  // ... while it is not reaped; else 0.
  pid_t running_command() const { return plan_.direct && !command_ended_ ? command_ : 0; }
  // ... was reaped (its process group killed first): what it left is the
  // runner's to end (runner/orphans.h) ...
  void on_command_exit(int wait_status, const rusage& ru);
  bool awaiting_leftovers() const { return plan_.direct && command_ended_ && !have_done_; }
  // ... and now nothing of it is left: the call may end.
  void on_leftovers_gone();
  // What the orphan ledger needs of it (runner/orphans.h).
  DirectCall as_direct() const;
  // The inodes of its stdout and stderr pipes still open.
  std::vector<ino_t> output_pipes() const;

  void add_stdin(std::string_view data);
  void close_stdin();
  Status signal(int sig);
  Status resize(int rows, int cols);
  // Ends the call's whole tree; `reason` is "timeout", "output" or "shutdown".
  void kill(const char* reason);
  // Re-reads Loop::output_paused() and updates what is watched.
  void update_watches();

 private:
  bool output_open() const;
  Call(Loop& loop, SupervisorPool& pool, CallPlan plan);
  Status spawn(std::string stdin_data, bool stdin_complete);
  void read_output(FdKind kind);
  void forward(FdKind kind, std::string_view data);
  void at_eof(FdKind kind);
  void read_report();
  // Forks the command of `a` here (CallPlan::direct).
  void start_direct(const ChildArgs& a);
  void flush_stdin();
  void drop_stdin();
  void maybe_finish();
  void release(UniqueFd& fd);
  void close_at_eof(UniqueFd& fd);
  bool disk_full() const;
  proto::ExitStatus exit_status() const;
  UniqueFd& output_slot(FdKind kind);

  Loop& loop_;
  SupervisorPool& pool_;
  CallPlan plan_;
  std::chrono::steady_clock::time_point started_at_;
  pid_t supervisor_ = 0;
  pid_t command_ = 0;
  bool command_ended_ = false;  // a direct command was reaped

  UniqueFd out_, err_, pty_;  // read ends (pty_: the master, also the stdin side)
  UniqueFd in_;               // stdin write end (pipes only)
  bool report_eof_ = false;   // the supervisor's socket ended before its kDone
  bool out_eof_ = false, err_eof_ = false;
  bool output_watched_ = false;  // output_open() was seen: its fds are watched
  bool pty_eof_ = false;         // the master read EIO: no slave is left open

  std::string stdin_buf_;
  size_t stdin_off_ = 0;
  bool stdin_close_wanted_ = false, stdin_closed_ = false, pty_eof_sent_ = false;
  bool pty_at_line_start_ = true;

  int64_t output_bytes_ = 0;
  bool truncated_ = false;
  std::string kill_reason_;
  bool grace_ = false;  // the supervisor died without a report: waiting briefly for EOF

  std::string report_buf_;
  bool have_done_ = false;
  struct Done {
    int wait_status = 0, exec_stage = 0, exec_errno = 0;
    bool killed = false;
    int64_t wall_us = 0, user_us = 0, sys_us = 0, max_rss_kb = 0;
  } done_;
  std::optional<int> supervisor_status_;
  bool finished_ = false;
};

}  // namespace rf::runner
