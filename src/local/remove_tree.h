// Host side: removes a directory tree that untrusted-ish code wrote into,
// without following any symlink out of it. Every entry is reached through its
// parent's fd (openat2 with RESOLVE_NO_SYMLINKS, unlinkat), so a symlink is
// removed, never followed, and a path swapped for a symlink mid-walk cannot
// redirect it. A directory that is a mount point (another file system, or a
// bind mount of a host directory, even from the same file system) is neither
// entered nor chmod'ed: removing it fails and the error names it.
#pragma once

#include <string>

#include "core/result.h"

namespace rf::local {

// Removes `name` in the directory `parent_fd` and everything below it.
// `path` names it in errors ("remove /tmp/x/workspace/d: Permission denied").
// An entry that is already gone is success.
Status remove_tree_at(int parent_fd, const std::string& name, const std::string& path);

}  // namespace rf::local
