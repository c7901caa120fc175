#include "runner/file_ops.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>

#include "core/io.h"
#include "proto/frame.h"

namespace rf::runner {
namespace {

proto::FileInfo info_from(const struct stat& st) {
  proto::FileInfo info;
  if (S_ISREG(st.st_mode)) {
    info.type = "file";
  } else if (S_ISDIR(st.st_mode)) {
    info.type = "dir";
  } else if (S_ISLNK(st.st_mode)) {
    info.type = "symlink";
  } else {
    info.type = "other";
  }
  info.size = st.st_size;
  info.mode = st.st_mode & 07777;
  info.mtime = st.st_mtim.tv_sec;
  return info;
}

// "/a/b/c" -> {"/a/b", "c"}; a trailing slash leaves the name empty.
std::pair<std::string, std::string> split_last(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

std::vector<std::string> components(const std::string& path) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= path.size()) {
    const auto end = std::min(path.find('/', start), path.size());
    if (end > start) out.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// A name no other writer picks: pid, a counter and the clock.
std::string temp_name() {
  static unsigned counter = 0;
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return ".rf-tmp-" + std::to_string(::getpid()) + "-" + std::to_string(++counter) + "-" +
         std::to_string(ts.tv_nsec);
}

}  // namespace

std::string sandbox_path(const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  return "/workspace/" + path;
}

Result<FileOps> FileOps::open(const std::string& root) {
  // O_PATH: the root is only ever a starting point for openat2, never read.
  UniqueFd fd(::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return sys_error("open root " + root);
  return FileOps(std::move(fd));
}

Result<UniqueFd> FileOps::resolve(const std::string& path, int flags,
                                  const std::string& where) const {
  open_how how{};
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC);
  // IN_ROOT: "/", ".." and absolute symlinks stay inside the sandbox root even when
  // the runner's own root differs; NO_MAGICLINKS: /proc/*/fd links cannot jump out.
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  const std::string rel = sandbox_path(path);
  for (int attempt = 0; attempt < 8; ++attempt) {
    const long fd = ::syscall(SYS_openat2, root_.get(), rel.c_str(), &how, sizeof how);
    if (fd >= 0) return UniqueFd(static_cast<int>(fd));
    // EAGAIN: a concurrent rename made the kernel unsure the walk stayed inside.
    if (errno != EAGAIN && errno != EINTR) break;
  }
  return sys_error(where);
}

Result<UniqueFd> FileOps::make_parents(const std::string& dir, const std::string& where) const {
  std::string cur = "/";
  for (const auto& name : components(dir)) {
    const std::string next = cur + name;
    auto fd = resolve(next, O_PATH | O_DIRECTORY, where);
    if (!fd && fd.error().sys_errno == ENOENT) {
      auto parent = resolve(cur, O_PATH | O_DIRECTORY, where);
      if (!parent) return parent.take_error();
      // mkdirat with a plain name in a resolved directory: nothing to follow.
      if (::mkdirat(parent->get(), name.c_str(), 0755) != 0 && errno != EEXIST) {
        return sys_error(where);
      }
      fd = resolve(next, O_PATH | O_DIRECTORY, where);
    }
    if (!fd) return fd.take_error();
    cur = next + "/";
  }
  return resolve(dir, O_PATH | O_DIRECTORY, where);
}

Result<FileData> FileOps::read(const std::string& path, int64_t max_bytes) const {
  const std::string where = "file_read " + path;
  const int64_t limit = (max_bytes <= 0 || max_bytes > int64_t{proto::kMaxData})
                            ? int64_t{proto::kMaxData}
                            : max_bytes;
  // O_NONBLOCK: opening a FIFO must not hang the runner's only thread.
  auto fd = resolve(path, O_RDONLY | O_NONBLOCK, where);
  if (!fd) return fd.take_error();
  struct stat st {};
  if (::fstat(fd->get(), &st) != 0) return sys_error(where);
  if (S_ISDIR(st.st_mode)) return sys_error(where, EISDIR);
  if (!S_ISREG(st.st_mode)) return make_error(where, "not a regular file");
  if (st.st_size > limit) return make_error(where, "file too large");
  FileData out{info_from(st), {}};
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd->get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sys_error(where);
    if (n == 0) break;
    // /proc files report size 0 and grow while read: check as we go.
    if (static_cast<int64_t>(out.bytes.size()) + n > limit) {
      return make_error(where, "file too large");
    }
    out.bytes.append(buf, static_cast<size_t>(n));
  }
  out.info.size = static_cast<int64_t>(out.bytes.size());
  return out;
}

Status FileOps::write(const std::string& path, std::string_view data, uint32_t mode,
                      bool parents) const {
  const std::string where = "file_write " + path;
  const auto [dir, name] = split_last(sandbox_path(path));
  if (name.empty() || name == "." || name == "..") return sys_error(where, EISDIR);
  auto dirfd = parents ? make_parents(dir, where) : resolve(dir, O_PATH | O_DIRECTORY, where);
  if (!dirfd) return dirfd.take_error();

  std::string tmp;
  UniqueFd fd;
  for (int attempt = 0; attempt < 16 && !fd; ++attempt) {
    tmp = temp_name();
    // O_EXCL | O_NOFOLLOW: never write through a name a sandbox process planted.
    fd.reset(::openat(dirfd->get(), tmp.c_str(),
                      O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd && errno != EEXIST) return sys_error(where);
  }
  if (!fd) return sys_error(where, EEXIST);
  auto fail = [&](Error e) -> Status {
    ::unlinkat(dirfd->get(), tmp.c_str(), 0);
    return e;
  };
  if (auto s = write_all(fd.get(), data); !s) return fail(Error{where, "", s.error().sys_errno});
  // fchmod, not the open mode: the umask must not change what the host asked for.
  if (::fchmod(fd.get(), mode) != 0) return fail(sys_error(where));
  if (::close(fd.release()) != 0) return fail(sys_error(where));
  // rename replaces the name in one step: readers see the old file or the new one.
  if (::renameat(dirfd->get(), tmp.c_str(), dirfd->get(), name.c_str()) != 0) {
    return fail(sys_error(where));
  }
  return ok_status();
}

Result<std::vector<proto::FileInfo>> FileOps::list(const std::string& path) const {
  const std::string where = "file_list " + path;
  auto fd = resolve(path, O_RDONLY | O_DIRECTORY, where);
  if (!fd) return fd.take_error();
  DIR* d = ::fdopendir(fd->get());
  if (d == nullptr) return sys_error(where);
  fd->release();
  std::vector<proto::FileInfo> out;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st {};
    if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
      continue;  // gone meanwhile
    proto::FileInfo info = info_from(st);
    info.name = name;
    out.push_back(std::move(info));
  }
  ::closedir(d);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

Result<proto::FileInfo> FileOps::stat(const std::string& path) const {
  const std::string where = "file_stat " + path;
  // O_PATH | O_NOFOLLOW opens a final symlink itself, so fstat is lstat.
  auto fd = resolve(path, O_PATH | O_NOFOLLOW, where);
  if (!fd) return fd.take_error();
  struct stat st {};
  if (::fstatat(fd->get(), "", &st, AT_EMPTY_PATH) != 0) return sys_error(where);
  return info_from(st);
}

Status FileOps::mkdir(const std::string& path, bool parents) const {
  const std::string where = "file_mkdir " + path;
  if (parents) {
    auto made = make_parents(sandbox_path(path), where);
    return made ? ok_status() : Status(made.take_error());
  }
  const auto [dir, name] = split_last(sandbox_path(path));
  if (name.empty() || name == "." || name == "..") return sys_error(where, EEXIST);
  auto dirfd = resolve(dir, O_PATH | O_DIRECTORY, where);
  if (!dirfd) return dirfd.take_error();
  if (::mkdirat(dirfd->get(), name.c_str(), 0755) != 0) return sys_error(where);
  return ok_status();
}

namespace {

// Everything in the directory `dir` (an fd opened O_DIRECTORY), depth
// first; names are taken relative to their directory's fd, so nothing is
// followed and nothing is resolved outside it.
Status empty_directory(int dir, const std::string& where, int depth) {
  if (depth > 256) return make_error(where, "nested more than 256 directories deep");
  const int dup = ::fcntl(dir, F_DUPFD_CLOEXEC, 0);
  if (dup < 0) return sys_error(where);
  DIR* d = ::fdopendir(dup);
  if (d == nullptr) {
    ::close(dup);
    return sys_error(where);
  }
  std::vector<std::pair<std::string, bool>> names;  // name, is a directory
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st {};
    if (::fstatat(dir, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // gone meanwhile
    names.emplace_back(name, S_ISDIR(st.st_mode));
  }
  ::closedir(d);
  for (const auto& [name, is_dir] : names) {
    if (is_dir) {
      UniqueFd sub(::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!sub) return sys_error(where);
      RF_TRY(empty_directory(sub.get(), where, depth + 1));
    }
    if (::unlinkat(dir, name.c_str(), is_dir ? AT_REMOVEDIR : 0) != 0 && errno != ENOENT) {
      return sys_error(where);
    }
  }
  return ok_status();
}

}  // namespace

Status FileOps::remove(const std::string& path, bool recursive) const {
  const std::string where = "file_remove " + path;
  const auto [dir, name] = split_last(sandbox_path(path));
  if (name.empty() || name == "." || name == "..") return sys_error(where, EINVAL);
  auto dirfd = resolve(dir, O_PATH | O_DIRECTORY, where);
  if (!dirfd) return dirfd.take_error();
  struct stat st {};
  if (::fstatat(dirfd->get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return sys_error(where);
  }
  if (!S_ISDIR(st.st_mode)) {
    if (::unlinkat(dirfd->get(), name.c_str(), 0) != 0) return sys_error(where);
    return ok_status();
  }
  if (recursive) {
    UniqueFd sub(
        ::openat(dirfd->get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!sub) return sys_error(where);
    RF_TRY(empty_directory(sub.get(), where, 0));
  }
  if (::unlinkat(dirfd->get(), name.c_str(), AT_REMOVEDIR) != 0) return sys_error(where);
  return ok_status();
}

Status FileOps::move(const std::string& from, const std::string& to) const {
  const std::string where = "file_move " + from + " -> " + to;
  const auto [from_dir, from_name] = split_last(sandbox_path(from));
  const auto [to_dir, to_name] = split_last(sandbox_path(to));
  for (const std::string& n : {from_name, to_name}) {
    if (n.empty() || n == "." || n == "..") return sys_error(where, EINVAL);
  }
  auto src = resolve(from_dir, O_PATH | O_DIRECTORY, where);
  if (!src) return src.take_error();
  auto dst = resolve(to_dir, O_PATH | O_DIRECTORY, where);
  if (!dst) return dst.take_error();
  // Plain names in resolved directories: the link itself moves, never its target.
  if (::renameat(src->get(), from_name.c_str(), dst->get(), to_name.c_str()) != 0) {
    return sys_error(where);
  }
  return ok_status();
}

}  // namespace rf::runner
