#include "native/mount_plan.h"

namespace rf::native {

std::string MountOp::describe() const {
  switch (kind) {
    case Kind::kDir:
      return "mkdir " + target;
    case Kind::kFile:
      return "create " + target;
    case Kind::kWriteFile:
      return "write " + target;
    case Kind::kSymlink:
      return "symlink " + target + " -> " + source;
    case Kind::kBind:
      return "bind " + target + (readonly ? " (ro)" : " (rw)");
    case Kind::kTmpfs:
      return "mount tmpfs " + target;
    case Kind::kProc:
      return "mount " + target;
    case Kind::kDevpts:
      return "mount devpts " + target;
    case Kind::kRemountRo:
      return "remount " + target + " read-only";
    case Kind::kAttachTree:
      return "attach workspace " + target;
  }
  return "unknown op";
}

bool MountPlan::mounts_target(const std::string& target) const { return find(target) != nullptr; }

const MountOp* MountPlan::find(const std::string& target) const {
  for (const auto& op : ops) {
    if (op.target == target) return &op;
  }
  return nullptr;
}

}  // namespace rf::native
