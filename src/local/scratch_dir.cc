#include "local/scratch_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>

#include "core/unique_fd.h"
#include "local/remove_tree.h"

namespace rf::local {
namespace {

Result<UniqueFd> open_dir(int at, const std::string& name, const std::string& path) {
  UniqueFd fd(::openat(at, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return sys_error(path);
  return fd;
}

std::string octal_mode(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

Status check_root_owner(const std::string& where, const struct stat& st) {
  if (!S_ISDIR(st.st_mode)) return make_error(where, "not a directory");
  if (st.st_uid != ::geteuid()) {
    return make_error(where, "owned by uid " + std::to_string(st.st_uid) + ", not by us (uid " +
                                 std::to_string(::geteuid()) + ")");
  }
  if ((st.st_mode & 022) != 0) {
    return make_error(where, "writable by others (mode " + octal_mode(st.st_mode) + ")");
  }
  return ok_status();
}

}  // namespace

std::string default_scratch_root() {
  const char* tmp = std::getenv("TMPDIR");
  std::string base = tmp != nullptr && tmp[0] == '/' ? tmp : "/tmp";
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  return base + "/ringfence-local";
}

Result<std::string> prepare_scratch_root(const std::string& root) {
  const std::string where = "scratch root " + root;
  if (root.empty() || root[0] != '/') return make_error(where, "must be an absolute path");
  if (::mkdir(root.c_str(), 0700) != 0 && errno != EEXIST) return sys_error(where);
  struct stat st {};
  if (::lstat(root.c_str(), &st) != 0) return sys_error(where);
  if (S_ISLNK(st.st_mode)) return make_error(where, "is a symlink");
  RF_TRY(check_root_owner(where, st));
  char real[PATH_MAX];
  if (::realpath(root.c_str(), real) == nullptr) return sys_error(where + ": realpath");
  return std::string(real);
}

Status create_scratch_dir(const std::string& root, const std::string& id) {
  const std::string path = root + "/" + id;
  if (id.empty() || id == "." || id == ".." || id.find('/') != std::string::npos) {
    return make_error("scratch dir " + path, "the sandbox id is not a file name");
  }
  auto root_fd = open_dir(AT_FDCWD, root, "scratch root " + root);
  if (!root_fd) return root_fd.take_error();
  if (::mkdirat(root_fd->get(), id.c_str(), 0700) != 0) return sys_error("scratch dir " + path);
  auto dir = open_dir(root_fd->get(), id, "scratch dir " + path);
  Status made = dir ? ok_status() : Status(dir.error());
  for (const char* sub : {"workspace", "tmp"}) {
    if (made && ::mkdirat(dir->get(), sub, 0700) != 0) {
      made = sys_error("scratch dir " + path + "/" + sub);
    }
  }
  if (!made) (void)remove_tree_at(root_fd->get(), id, path);
  return made;
}

Status remove_scratch_dir(const std::string& root, const std::string& id) {
  UniqueFd root_fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!root_fd) return errno == ENOENT ? ok_status() : sys_error("scratch root " + root);
  return remove_tree_at(root_fd.get(), id, root + "/" + id);
}

}  // namespace rf::local
