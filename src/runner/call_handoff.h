// How the runner hands a call to one of its supervisors (runner/supervisor_pool.h):
// one message on the supervisor's socket, a header carrying the call's five
// descriptors (SCM_RIGHTS: stdin, stdout, stderr, report, control), then the
// strings: cwd, argv, the environment, and the paths to try for argv[0].
// Both ends are this runner binary: the format is private to it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/unique_fd.h"
#include "runner/supervisor.h"

namespace rf::runner {

// Sends `a` to the supervisor at `sock` (blocking; it is idle, reading).
Status send_call(int sock, const ChildArgs& a);
// The byte a supervisor answers once it has a whole call, before it starts it.
constexpr char kCallAck = 'A';

// A call as a supervisor received it: owns its strings and descriptors.
struct ReceivedCall {
  bool pty = false;
  std::string cwd;
  std::vector<std::string> argv, env, candidates;
  UniqueFd in, out, err, report, ctl;
  // Pointers into this object, for the command child (valid while it lives).
  ChildArgs args();
};

// The next call from the runner; nullopt when the runner closed the socket.
Result<std::optional<ReceivedCall>> receive_call(int sock);

}  // namespace rf::runner
