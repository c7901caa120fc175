// A sandbox's background processes and watches from the CLI, through
// `serve` (issue 41): a process's output followed as it comes (`sandbox
// process logs --follow`), a directory's changes (`sandbox watch`), and a
// terminal attached to a sandbox that already exists (`sandbox shell
// --attach ID`): a new shell on a pty of its own, or a pty process already
// running (--pid). The terminal uses the API's streaming pair: its output
// comes as server-sent events (GET .../processes/{pid}/output), each key
// typed goes as a POST to .../stdin, a window's new size to .../resize. The
// token is the project's (RINGFENCE_TOKEN or --token-file, never argv).
#pragma once

#include <cstdint>
#include <string>

namespace rf::cli {

struct ProcessTarget {
  std::string api;         // serve's base URL
  std::string token_file;  // "" = RINGFENCE_TOKEN
  std::string sandbox;
  int pid = 0;
};

// Writes the process's output from `from` ("start", "now" or an offset) to
// our stdout and stderr until it ends; with `follow` false, only what is
// buffered now. Returns its exit code (128+N when a signal ended it), or 0
// when not following; 125 when it ended without one or serve could not say,
// 2 for what serve refused as the caller's fault.
int follow_process_via_api(const ProcessTarget& target, const std::string& from, bool follow);

// A terminal on `target.sandbox`: a new login shell on a pty (pid 0), or
// the pty process `target.pid`. Returns the shell's exit code.
int attach_shell_via_api(const ProcessTarget& target);

// What changes under `path` of `target.sandbox`, a line each ("create
// /workspace/a.txt"; a directory ends with '/'), until the watch ends (0)
// or the stream breaks (125).
int watch_via_api(const ProcessTarget& target, const std::string& path, bool recursive);

}  // namespace rf::cli
