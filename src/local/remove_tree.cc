#include "local/remove_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/unique_fd.h"

namespace rf::local {
namespace {

Status remove_entry(int parent_fd, const std::string& name, const std::string& path);

// Opens `name` under `parent_fd` as `how` says, never through a symlink and
// never across a mount: openat2's RESOLVE_NO_XDEV refuses (EXDEV) a
// directory that is a mount point, a bind mount of the same file system
// too, whose device number is the tree's own.
int open_beneath(int parent_fd, const std::string& name, uint64_t flags) {
  open_how how{};
  how.flags = flags | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
  how.resolve = RESOLVE_NO_XDEV | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  return static_cast<int>(::syscall(SYS_openat2, parent_fd, name.c_str(), &how, sizeof how));
}

// Opens the directory `name` under `parent_fd` to empty it; one the owner
// locked (mode 0 and the like) is opened up first, as rm -rf would. Nothing
// is changed before the directory is known to be no mount point: a mount a
// command left in the tree (a host directory bound there) is neither
// entered nor chmod'ed.
Result<UniqueFd> open_subdir(int parent_fd, const std::string& name, const std::string& path) {
  auto refused = [&]() -> Result<UniqueFd> {
    if (errno == EXDEV) return make_error("remove " + path, "a mount point; not entered");
    return sys_error("remove " + path);
  };
  UniqueFd fd(open_beneath(parent_fd, name, O_RDONLY));
  if (!fd && errno == EACCES) {
    // Its mode, changed through a descriptor of this very directory (O_PATH
    // needs no permission on it), not through its name.
    UniqueFd at(open_beneath(parent_fd, name, O_PATH));
    if (!at) return refused();
    const std::string self = "/proc/self/fd/" + std::to_string(at.get());
    if (::chmod(self.c_str(), 0700) != 0) return sys_error("remove " + path);
    fd.reset(open_beneath(parent_fd, name, O_RDONLY));
  }
  if (!fd) return refused();
  // Entries can only be unlinked from a directory we may write and search.
  (void)::fchmod(fd.get(), 0700);
  return fd;
}

Result<std::vector<std::string>> entry_names(int dir_fd, const std::string& path) {
  const int dup = ::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
  if (dup < 0) return sys_error("remove " + path + ": dup");
  DIR* dir = ::fdopendir(dup);
  if (dir == nullptr) {
    const int err = errno;
    ::close(dup);
    return sys_error("remove " + path + ": fdopendir", err);
  }
  std::vector<std::string> names;
  errno = 0;
  while (const dirent* e = ::readdir(dir)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
      names.emplace_back(e->d_name);
    }
    errno = 0;
  }
  const int err = errno;
  ::closedir(dir);
  if (err != 0) return sys_error("remove " + path + ": readdir", err);
  return names;
}

// Empties the directory `name`, then removes it.
Status remove_dir(int parent_fd, const std::string& name, const std::string& path) {
  auto fd = open_subdir(parent_fd, name, path);
  if (!fd) return fd.take_error();
  auto names = entry_names(fd->get(), path);
  if (!names) return names.take_error();
  for (const auto& n : *names) RF_TRY(remove_entry(fd->get(), n, path + "/" + n));
  if (::unlinkat(parent_fd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
    return sys_error("remove " + path);
  }
  return ok_status();
}

Status remove_entry(int parent_fd, const std::string& name, const std::string& path) {
  struct stat st {};
  if (::fstatat(parent_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return errno == ENOENT ? ok_status() : sys_error("remove " + path);
  }
  if (S_ISDIR(st.st_mode)) return remove_dir(parent_fd, name, path);
  // Files, symlinks (never followed), fifos, sockets, devices: the name goes.
  if (::unlinkat(parent_fd, name.c_str(), 0) != 0 && errno != ENOENT) {
    return sys_error("remove " + path);
  }
  return ok_status();
}

}  // namespace

Status remove_tree_at(int parent_fd, const std::string& name, const std::string& path) {
  return remove_entry(parent_fd, name, path);
}

}  // namespace rf::local
