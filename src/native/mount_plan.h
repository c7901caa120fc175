// The mount plan: the sandbox's file system as data, built on the host before
// the child exists and unit-tested without root (tests/unit/mount_plan_test.cc);
// the sandbox side executes it op by op (child_setup.cc). Targets are paths in
// the new root; bind sources already carry the old-root prefix the child sees
// them under (kOldRoot).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace rf::native {

// Where the host's root is visible to the child while the plan runs.
inline constexpr const char* kOldRoot = "/.oldroot";
// Where the tool runner binary is bound inside every sandbox.
inline constexpr const char* kRunnerPathInSandbox = "/.ringfence/tool-runner";
// Holds rf-cred (a link to the runner), the JIT client; on the PATH of JIT calls.
inline constexpr const char* kCredBinDirInSandbox = "/.ringfence/bin";

struct MountOp {
  enum class Kind {
    kDir,         // mkdir target (mode)
    kFile,        // create an empty file at target (a bind mount point)
    kWriteFile,   // create target with `content` (mode)
    kSymlink,     // symlink target -> source
    kBind,        // bind source on target (recursive); readonly remounts it read-only
    kTmpfs,       // tmpfs on target with `data` (size=, mode=, uid=)
    kProc,        // a new proc on target
    kDevpts,      // a new devpts instance on target
    kRemountRo,   // remount an existing mount point read-only (the whole /dev, say)
    kAttachTree,  // move_mount a host-prepared tree (ChildConfig::tree_fds[tree]) onto target
  };
  Kind kind = Kind::kDir;
  std::string source;
  std::string target;
  std::string data;     // mount data for tmpfs/devpts
  std::string content;  // kWriteFile
  mode_t mode = 0755;
  bool readonly = false;
  bool optional = false;   // a missing source or target is skipped, not an error
  bool allow_dev = false;  // device node binds (everything else is nodev)
  bool noexec = false;
  int tree = 0;  // kAttachTree: which (0: the workspace; 1 on: the volumes, in order)

  // "bind /usr (ro)", "mount /proc", ... the step name errors are reported under.
  std::string describe() const;
};

struct MountPlan {
  std::vector<MountOp> ops;
  // Paths a hostile read must never find; checked by tests against the plan.
  bool mounts_target(const std::string& target) const;
  const MountOp* find(const std::string& target) const;
};

}  // namespace rf::native
