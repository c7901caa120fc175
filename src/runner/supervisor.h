// A call supervisor (see call.h, "Process tree"), where the runner is not
// PID 1: a child subreaper that forks the command (runner/command_child.h),
// waits for it and then kills everything left below it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <vector>

#include "runner/command_child.h"

namespace rf::runner {

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
