#include "local/remove_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "core/unique_fd.h"

namespace rf::local {
namespace {

Status remove_entry(int parent_fd, const std::string& name, const std::string& path, dev_t dev);

// Opens the directory `name` under `parent_fd` without following a symlink;
// one the owner locked (mode 0 and the like) is opened up first, as rm -rf would.
Result<UniqueFd> open_subdir(int parent_fd, const std::string& name, const std::string& path) {
  constexpr int kFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
  UniqueFd fd(::openat(parent_fd, name.c_str(), kFlags));
  if (!fd && errno == EACCES &&
      ::fchmodat(parent_fd, name.c_str(), 0700, AT_SYMLINK_NOFOLLOW) == 0) {
    fd.reset(::openat(parent_fd, name.c_str(), kFlags));
  }
  if (!fd) return sys_error("remove " + path);
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

// Empties the directory `name` (a directory on the device `dev`), then removes it.
Status remove_dir(int parent_fd, const std::string& name, const std::string& path, dev_t dev) {
  auto fd = open_subdir(parent_fd, name, path);
  if (!fd) return fd.take_error();
  struct stat st {};
  if (::fstat(fd->get(), &st) != 0) return sys_error("remove " + path);
  if (st.st_dev != dev) return make_error("remove " + path, "a mount point; not entered");
  auto names = entry_names(fd->get(), path);
  if (!names) return names.take_error();
  for (const auto& n : *names) RF_TRY(remove_entry(fd->get(), n, path + "/" + n, dev));
  if (::unlinkat(parent_fd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
    return sys_error("remove " + path);
  }
  return ok_status();
}

Status remove_entry(int parent_fd, const std::string& name, const std::string& path, dev_t dev) {
  struct stat st {};
  if (::fstatat(parent_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return errno == ENOENT ? ok_status() : sys_error("remove " + path);
  }
  if (S_ISDIR(st.st_mode)) return remove_dir(parent_fd, name, path, dev);
  // Files, symlinks (never followed), fifos, sockets, devices: the name goes.
  if (::unlinkat(parent_fd, name.c_str(), 0) != 0 && errno != ENOENT) {
    return sys_error("remove " + path);
  }
  return ok_status();
}

}  // namespace

Status remove_tree_at(int parent_fd, const std::string& name, const std::string& path) {
  struct stat st {};
  if (::fstatat(parent_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return errno == ENOENT ? ok_status() : sys_error("remove " + path);
  }
  return remove_entry(parent_fd, name, path, st.st_dev);
}

}  // namespace rf::local
