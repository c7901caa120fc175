// A call's command child: forked by its parent (a call supervisor,
// runner/supervisor.h, or the runner itself as PID 1, runner/call.h), it sets
// up its process group and stdio and execs. It only makes system calls: its
// arguments are prepared before the fork (ChildArgs).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <vector>

namespace rf::runner {

// Where starting the command failed.
enum ExecStage : int32_t { kStageNone = 0, kStageSetup = 1, kStageCwd = 2, kStageExec = 3 };

// What the command child tells its parent when it cannot exec.
struct ExecFailure {
  int32_t stage;
  int32_t err;
};

// Prepared before fork, so the child only makes syscalls.
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

// Reads which signals this process ignores, which every command child resets,
// and makes the ruleset of the calls' Landlock domains (runner/call_domain.h).
// Once, before the first start_command.
void prepare_command_starts();

// A command child started: its pid (-1 if none could be made), and where it
// failed if it could not exec (it has then exited 127 and is still to be reaped).
struct CommandStart {
  pid_t pid = -1;
  int32_t stage = kStageNone;
  int32_t err = 0;
};

// Forks the command child of `a` (vfork; fork for the self-probe), which
// leads a process group of its own (and on a pty a session), and returns once
// it has exec'd or failed.
CommandStart start_command(const ChildArgs& a);

}  // namespace rf::runner
