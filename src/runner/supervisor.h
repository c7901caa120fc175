// A call's own processes, after the runner forks (see call.h, "Process
// tree"): the supervisor, a child subreaper that forks the command, waits for
// it and then kills everything left below it; and the command child, which
// sets up its process group and stdio and execs. Both only make syscalls: the
// arguments are prepared before fork (ChildArgs).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <vector>

namespace rf::runner {

// Where starting the command failed.
enum ExecStage : int32_t { kStageNone = 0, kStageSetup = 1, kStageCwd = 2, kStageExec = 3 };

// What the command child tells its supervisor when it cannot exec (supervisor.cc).
struct ExecFailure {
  int32_t stage;
  int32_t err;
};

// The supervisor's records to the runner, on its socket after kCallAck
// (runner/call_handoff.h), each one write: kStarted once the command runs,
// kDone as its last act for the call.
enum ReportKind : int32_t { kStarted = 1, kDone = 2 };
struct Report {
  int32_t kind = 0;
  int32_t pid = 0;
  int32_t wait_status = 0;
  int32_t exec_stage = 0;
  int32_t exec_errno = 0;
  int32_t killed = 0;  // the kill request came before the command ended
  int64_t wall_us = 0, user_us = 0, sys_us = 0, max_rss_kb = 0;
};

// Prepared before fork, so the children only make syscalls.
struct ChildArgs {
  int in = -1, out = -1, err = -1;  // the command's stdio (the pty slave three times)
  bool pty = false;
  // The command is this runner binary's self-probe: run in the command
  // child, forked, instead of exec'd (runner/self_probe.h, "In a fork").
  bool self_probe = false;
  std::vector<char*> argv, envp;
  std::vector<const char*> candidates;
  const char* cwd = "/";
};

// The children of `pid` (every thread's), appended to `out`; false if /proc cannot say.
bool children_of(pid_t pid, std::vector<pid_t>* out);
// SIGKILLs `pid` and every process below it.
void kill_tree(pid_t pid);

// In a forked child: serves calls handed to it over `sock`
// (runner/call_handoff.h), one at a time, writing kStarted and then kDone
// back on `sock`. The runner's end of `sock` reaching EOF during a call (it
// shut its side: timeout, output cap, shutdown; or it died) kills the call's
// tree; at EOF between calls it exits. Never returns.
[[noreturn]] void serve_calls(int sock);

}  // namespace rf::runner
