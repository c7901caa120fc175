// Host side: the owner marker of a local sandbox, <root>/<id>.owner, next to its
// scratch directory and outside it (the runner's file operations cannot reach
// it). It names the process that created the sandbox and the runner it
// started, each with its start time so that a reused pid is never taken for
// them, and when the sandbox was made. The owner writes it once the runner
// runs and removes it after the scratch directory; `sandbox list` and
// `sandbox reap` read it (src/local/inventory.h).
//
// The file is text, one key=value per line:
//   owner_pid=4242
//   owner_start=123456        (clock ticks after boot, /proc/<pid>/stat field 22)
//   runner_pid=4250
//   runner_start=123470
//   created_at=1700000000     (seconds since the epoch)
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.h"

namespace rf::local {

struct OwnerMarker {
  pid_t owner_pid = 0;
  uint64_t owner_start = 0;
  pid_t runner_pid = 0;
  uint64_t runner_start = 0;
  int64_t created_at = 0;
};

// "<id>.owner". Sandbox ids have no '.', so it never names a scratch directory.
std::string owner_marker_name(const std::string& id);

// The marker for a runner the calling process has just started, made now.
OwnerMarker marker_for_runner(pid_t runner_pid);

std::string format_owner_marker(const OwnerMarker& m);
// Every key, once, with a positive value; anything else is an error (a marker
// being written at this very moment may read short).
Result<OwnerMarker> parse_owner_marker(std::string_view text);

// Writes <root>/<id>.owner (mode 0600), replacing an older one; a symlink
// there is refused, not followed.
Status write_owner_marker(const std::string& root, const std::string& id, const OwnerMarker& m);
// Reads <root_fd>/<id>.owner, not following a symlink.
Result<OwnerMarker> read_owner_marker(int root_fd, const std::string& id);
// A marker that is gone already is success.
Status remove_owner_marker(int root_fd, const std::string& id);
Status remove_owner_marker(const std::string& root, const std::string& id);

}  // namespace rf::local
