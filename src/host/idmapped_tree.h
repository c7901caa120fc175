// A host directory bound into a sandbox (host side): at /workspace, or a
// volume's file system at its path. It is idmapped so that
// files owned by the directory's owner appear as the sandbox user inside, and
// files the sandbox creates belong to that owner on the host: binding your own
// project just works, and nothing in it ends up owned by a sandbox uid.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "core/result.h"
#include "core/unique_fd.h"

namespace rf::host {

// A detached mount (from open_tree) of `dir`, nosuid and nodev, idmapped so the
// owner of `dir` becomes `sandbox_uid`/`sandbox_gid` (host ids). The child
// attaches it with move_mount. Where the file system cannot be idmapped, the
// mount is plain and `idmapped` says so.
struct IdmappedTree {
  UniqueFd fd;
  bool idmapped = false;
};
// `readonly`: the tree is read-only too (a volume mounted so).
Result<IdmappedTree> make_idmapped_tree(const std::string& dir, uid_t sandbox_uid,
                                        gid_t sandbox_gid, bool readonly = false);

// A tree made by make_idmapped_tree, attached at a host directory of its
// own (for a backend that binds host paths, docker): unmounted and its
// directory removed when this goes.
class AttachedTree {
 public:
  static Result<std::unique_ptr<AttachedTree>> attach(const std::string& dir, uid_t sandbox_uid,
                                                      gid_t sandbox_gid, bool readonly,
                                                      const std::string& at);
  ~AttachedTree();
  AttachedTree(const AttachedTree&) = delete;
  AttachedTree& operator=(const AttachedTree&) = delete;
  const std::string& path() const { return at_; }

 private:
  explicit AttachedTree(std::string at) : at_(std::move(at)) {}
  std::string at_;
};

// What a worker that died left of its AttachedTrees: every mount point
// directly below `dir` unmounted (lazily) and removed, then `dir`. Ok when
// `dir` is gone already.
Status detach_trees_under(const std::string& dir);

}  // namespace rf::host
