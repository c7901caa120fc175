// What /proc/<pid>/stat says about a process: its state (the runner asking
// whether a silent supervisor is only starved of CPU), its parent, and its
// start time, which tells whether a pid still names the process it named
// before (a pid is reused once its process is reaped; the start time is not).
// Same pid namespace only.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace rf {

struct ProcStat {
  char state = '?';  // R, S, D, Z...
  pid_t ppid = 0;
  pid_t pgrp = 0;
  uint64_t start_time = 0;  // field 22: clock ticks after boot
};

// Empty when there is no such process (or its stat cannot be parsed).
std::optional<ProcStat> read_proc_stat(pid_t pid);

// The start time of `pid`, 0 when it is gone.
uint64_t start_time_of(pid_t pid);

// True while `pid` is the process that started at `start_time` and has not
// exited (a zombie has).
bool is_running(pid_t pid, uint64_t start_time);

// The processes of process group `pgrp` that have not exited.
std::vector<pid_t> group_members(pid_t pgrp);

}  // namespace rf
