// A sandbox's workspace read out for an artifact (issue 12), through the
// sandbox's own file API: paths resolve inside the sandbox, and symlinks are
// never followed (they are skipped and counted), so nothing outside the
// workspace is ever read. Bounded in bytes and entries.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/result.h"
#include "sandbox/sandbox.h"

namespace rf::artifact {

struct WorkspaceEntry {
  std::string path;  // relative to the root, '/'-separated
  bool directory = false;
  std::string content;
  uint32_t mode = 0644;
};

struct Workspace {
  std::string root;
  std::vector<WorkspaceEntry> entries;  // parents before children
  uint64_t bytes = 0;
  int files = 0;
  int symlinks_skipped = 0;
  int others_skipped = 0;  // sockets, fifos, devices
};

// Refused when the content passes `max_bytes` or the entries 100,000, naming
// the path that did it. `exclude`: top-level names left out (".git").
Result<Workspace> read_workspace(Sandbox& sandbox, const std::string& root, uint64_t max_bytes,
                                 const std::vector<std::string>& exclude = {});

// A ustar archive of it (dest none: kept in the store; s3: uploaded).
Result<std::string> workspace_tar(const Workspace& ws);

// dest local: copies it to ROOT/PROJECT/REL (REL relative, no "..", confined
// to ROOT/PROJECT, so one project never writes over another's; no symlink
// under ROOT is followed). Written to a new directory next to the
// target, fsynced, and renamed into place, so a failure or a crash leaves no
// half-written copy; an existing target is swapped with it in one
// renameat2(RENAME_EXCHANGE), never missing, then removed.
// Returns {"path", "files", "bytes"}.
Result<nlohmann::json> copy_to_local(const Workspace& ws, const std::string& root,
                                     const std::string& project, const std::string& rel);

}  // namespace rf::artifact
