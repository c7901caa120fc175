// How the runner hands a call to one of its supervisors (runner/supervisor_pool.h):
// one message on the supervisor's socket, a header carrying the call's three
// descriptors (SCM_RIGHTS: stdin, stdout, stderr), then the strings: cwd,
// argv, the environment, and the paths to try for argv[0]. The supervisor
// answers kCallAck, then its Reports (runner/supervisor.h) on the same socket.
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
  bool pty = false, self_probe = false;
  std::string cwd;
  std::vector<std::string> argv, env, candidates;
  UniqueFd in, out, err;
  // Pointers into this object, for the command child (valid while it lives).
  ChildArgs args();
};

// The next call from the runner; nullopt when the runner closed the socket.
Result<std::optional<ReceivedCall>> receive_call(int sock);

}  // namespace rf::runner
