// A sandbox's background processes (issue 41 item 2), host side, on every
// backend: a command started in the background outlives the request that
// started it. Each is one call of the sandbox (Sandbox::exec, through the
// caller's `Run`: the guarded call path at a worker) with neither a call
// timeout nor an output cap; its sandbox's lifetime ends it, and its output
// is kept in a ring buffer of the policy's size (the newest bytes; what
// fell out is counted). Any number of readers follow one process's output,
// from its start (what the buffer still holds) or from now, each at its own
// offset, before or after the client that started it left. stdin, a
// signal and a terminal's size go to the running call.
//
// A process is known by its pid in the sandbox. The ended ones are kept
// (their exit and their buffer) until more than `kept_ended` have ended,
// oldest first. One thread per running process waits for its call (the
// runner's client is read by whichever thread waits: a process's output
// flows while nobody reads it); it touches little of its stack and holds no
// buffer of its own. The threads are detached and hold the table's state
// and their entry by shared_ptr; what `Run` points at (the owner's call
// path) must outlive join(), which returns once every thread is past its
// last use of it: owners close(), destroy the sandbox, then join()
// (worker/door_sandboxes.cc, api/sandbox_service.cc; the destructor too).
#pragma once

#include <chrono>
#include <condition_variable>
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
#include "sandbox/sandbox.h"

namespace rf {

struct ProcessInfo {
  int pid = 0;  // in the sandbox
  std::vector<std::string> argv;
  std::string tag;
  bool pty = false;
  bool stdin_open = false;
  int64_t started_ms = 0, ended_ms = 0;  // ms since the epoch; ended 0 while it runs
  bool running = true;
  std::optional<ExecResult> result;  // once it exited
  std::string end_error;             // it ended without an exit (its sandbox went): why
  uint64_t output_bytes = 0;         // written so far: the offset of the next byte
  uint64_t dropped_bytes = 0;        // the oldest, out of the buffer
};

struct OutputPiece {
  uint64_t offset = 0;  // of its first byte in the process's output
  bool is_stderr = false;
  std::string data;
};

struct ProcessRead {
  std::vector<OutputPiece> pieces;
  uint64_t next = 0;     // the offset to read on from
  uint64_t skipped = 0;  // bytes from the asked offset that were no longer held
  bool ended = false;    // the process ended and everything was read
  ProcessInfo info;
};

class ProcessTable {
 public:
  // Runs one call to its end, its output to `sink` (which reports the start).
  using Run = std::function<Result<ExecResult>(ExecCall call, OutputSink& sink)>;
  struct Bounds {
    size_t buffer_bytes = 1u << 20;  // each process's ring buffer
    size_t max_running = 64;
    size_t kept_ended = 64;
  };
  static constexpr uint64_t kFromNow = UINT64_MAX;

  ProcessTable(Sandbox& sandbox, Run run);
  ~ProcessTable();  // close("") and join()
  ProcessTable(const ProcessTable&) = delete;
  ProcessTable& operator=(const ProcessTable&) = delete;

  // Starts `call` (call.background is set here) and returns once it runs:
  // its pid known. A command that could not start is an error whose where
  // is "argv" and whose message is the runner's ("x: command not found");
  // more than bounds.max_running is ErrorCode::kLimit.
  Result<ProcessInfo> start(ExecCall call, std::string tag, const Bounds& bounds);
  std::vector<ProcessInfo> list() const;
  std::optional<ProcessInfo> find(int pid) const;
  size_t running() const;

  // ErrorCode::kNotFound for a pid the table does not know; an error naming
  // the pid for one that ended (stdin, resize) or whose stdin is closed.
  Status write_stdin(int pid, std::string_view data);
  Status close_stdin(int pid);
  Status signal(int pid, int sig);
  Status resize(int pid, int rows, int cols);

  // Output from offset `from` (kFromNow: from the next byte written): what
  // the buffer holds, at most `max_bytes`; when there is nothing yet and the
  // process runs, waits up to `wait` for output or its end. nullopt: no
  // such process.
  std::optional<ProcessRead> read(int pid, uint64_t from, std::chrono::milliseconds wait,
                                  size_t max_bytes = 1u << 20) const;

  // The sandbox goes (`why`: "it expired (its timeout ran out)"): no process
  // starts from now on, and each still running ends with `why` once its
  // call returns. Call before destroying the sandbox.
  void close(std::string why);
  // Waits until every process's thread has returned (after the sandbox was
  // destroyed, which ends their calls).
  void join();

 private:
  struct Entry;
  class Sink;
  struct Shared;
  std::shared_ptr<Entry> entry(int pid) const;
  Result<uint32_t> running_call(int pid, const char* what) const;

  Sandbox& sandbox_;
  std::shared_ptr<Shared> shared_;
};

}  // namespace rf
