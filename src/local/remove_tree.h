// Host side: removes a directory tree that untrusted-ish code wrote into,
// without following any symlink out of it. Every entry is reached through its
// parent's fd (openat with O_NOFOLLOW, unlinkat), so a symlink is removed, never
// followed, and a path swapped for a symlink mid-walk cannot redirect it. A
// directory on another file system (a mount point inside the tree) is not
// entered: removing it fails and the error names it.
#pragma once

#include <string>

#include "core/result.h"

namespace rf::local {

// Removes `name` in the directory `parent_fd` and everything below it.
// `path` names it in errors ("remove /tmp/x/workspace/d: Permission denied").
// An entry that is already gone is success.
Status remove_tree_at(int parent_fd, const std::string& name, const std::string& path);

}  // namespace rf::local
