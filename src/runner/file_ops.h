// File operations the host asks the tool runner for (file_read, file_write,
// file_list, file_stat). Every path resolves inside the sandbox root with
// openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS): a symlink to "/" or a ".."
// chain stays inside the root, and /proc/self/fd links are refused. Relative
// paths are relative to /workspace. Errors name the operation and the path:
// "file_read /workspace/x: No such file or directory".
#pragma once

#include <fcntl.h>

#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/unique_fd.h"
#include "proto/messages.h"

namespace rf::runner {

struct FileData {
  proto::FileInfo info;
  std::string bytes;
};

class FileOps {
 public:
  // Opens `root` (the sandbox's "/", or a test directory) once, at startup.
  static Result<FileOps> open(const std::string& root);

  // The whole file; an error "file too large" when it exceeds `max_bytes`
  // (0 or more than proto::kMaxData: kMaxData).
  Result<FileData> read(const std::string& path, int64_t max_bytes) const;
  // Replaces the file atomically: a temporary file in the same directory, then rename.
  Status write(const std::string& path, std::string_view data, uint32_t mode, bool parents) const;
  // Entries sorted by name, without "." and "..".
  Result<std::vector<proto::FileInfo>> list(const std::string& path) const;
  // lstat: a symlink is reported as "symlink", not followed.
  Result<proto::FileInfo> stat(const std::string& path) const;
  // A directory; with `parents`, missing ones on the way too, and an
  // existing directory is no error.
  Status mkdir(const std::string& path, bool parents) const;
  // A file or symlink (the link itself, never what it names), or an empty
  // directory; with `recursive`, a directory and everything in it (symlinks
  // inside are removed, never followed).
  Status remove(const std::string& path, bool recursive) const;
  // A rename: both names resolve inside the root; across mounts is EXDEV.
  Status move(const std::string& from, const std::string& to) const;

  // A directory resolved inside the root (O_PATH): what a watch watches.
  Result<UniqueFd> open_dir(const std::string& path, const std::string& where) const {
    return resolve(path, O_PATH | O_DIRECTORY, where);
  }

  int root_fd() const { return root_.get(); }

 private:
  explicit FileOps(UniqueFd root) : root_(std::move(root)) {}
  Result<UniqueFd> resolve(const std::string& path, int flags, const std::string& where) const;
  Result<UniqueFd> make_parents(const std::string& dir, const std::string& where) const;

  UniqueFd root_;
};

// The path as seen from the root: absolute paths as given, relative ones under /workspace.
std::string sandbox_path(const std::string& path);

}  // namespace rf::runner
