#include "runner/file_watch.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace rf::runner {
namespace {

constexpr uint32_t kMask = IN_CREATE | IN_MODIFY | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO |
                           IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_EXCL_UNLINK;
constexpr int kMaxDepth = 64;

std::string trimmed(std::string path) {
  path = sandbox_path(path);
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

std::string joined(const std::string& dir, const std::string& name) {
  return dir == "/" ? "/" + name : dir + "/" + name;
}

}  // namespace

Result<std::unique_ptr<DirWatch>> DirWatch::start(const FileOps& files, const std::string& path,
                                                  bool recursive) {
  UniqueFd fd(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (!fd) return sys_error("file_watch " + path + ": inotify_init1");
  std::unique_ptr<DirWatch> w(new DirWatch(std::move(fd), trimmed(path), recursive));
  RF_TRY(w->add_tree(files, w->base_, 0));
  w->root_wd_ = w->dirs_.begin()->first;
  for (const auto& [wd, p] : w->dirs_) {
    if (p == w->base_) w->root_wd_ = wd;
  }
  return w;
}

Status DirWatch::add_tree(const FileOps& files, const std::string& path, int depth,
                          std::vector<proto::FileEvent>* made) {
  const std::string where = "file_watch " + path;
  if (dirs_.size() >= kMaxDirs) {
    return make_error(where, "more than " + std::to_string(kMaxDirs) +
                                 " directories under one watch (watch a smaller tree)");
  }
  auto dir = files.open_dir(path, where);
  if (!dir) return dir.take_error();
  // The descriptor, resolved inside the root, is what is watched: its
  // /proc/self/fd link names it whatever path led there.
  const std::string link = "/proc/self/fd/" + std::to_string(dir->get());
  const int wd = ::inotify_add_watch(fd_.get(), link.c_str(), kMask);
  if (wd < 0) return sys_error(where);
  dirs_[wd] = path;
  if (!recursive_ || depth >= kMaxDepth) return ok_status();
  const int listing = ::openat(dir->get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (listing < 0) return ok_status();  // watched, not listable: nothing below to add
  DIR* d = ::fdopendir(listing);
  if (d == nullptr) {
    ::close(listing);
    return ok_status();
  }
  Status out = ok_status();
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    bool is_dir = e->d_type == DT_DIR;
    if (e->d_type == DT_UNKNOWN) {
      struct stat st {};
      is_dir =
          ::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
    }
    if (made != nullptr) made->push_back({"create", joined(path, name), is_dir});
    if (!is_dir) continue;
    out = add_tree(files, joined(path, name), depth + 1, made);
    // One that went meanwhile is no error; a bound is.
    if (!out && out.error().sys_errno == ENOENT) out = ok_status();
    if (!out) break;
  }
  ::closedir(d);
  return out;
}

std::vector<proto::FileEvent> DirWatch::read(const FileOps& files, std::string* why) {
  std::vector<proto::FileEvent> out;
  alignas(inotify_event) char buf[64 * 1024];
  for (;;) {
    const ssize_t n = ::read(fd_.get(), buf, sizeof buf);
    if (n <= 0) break;
    for (ssize_t at = 0; at < n;) {
      const auto* ev = reinterpret_cast<const inotify_event*>(buf + at);
      at += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
      if (ev->mask & IN_Q_OVERFLOW) {
        out.push_back({"overflow", base_, true});
        continue;
      }
      auto dir = dirs_.find(ev->wd);
      if (dir == dirs_.end()) continue;
      if (ev->mask & IN_IGNORED) {
        if (ev->wd == root_wd_ && why->empty()) *why = "the watched directory is gone";
        dirs_.erase(dir);
        continue;
      }
      if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF)) {
        if (ev->wd == root_wd_) {
          *why = ev->mask & IN_MOVE_SELF ? "the watched directory was moved"
                                         : "the watched directory was removed";
        }
        continue;
      }
      const std::string name = ev->len > 0 ? std::string(ev->name) : std::string();
      const std::string path = name.empty() ? dir->second : joined(dir->second, name);
      const bool is_dir = (ev->mask & IN_ISDIR) != 0;
      const char* type = ev->mask & (IN_CREATE | IN_MOVED_TO) ? "create"
                         : ev->mask & IN_MODIFY               ? "write"
                         : ev->mask & IN_DELETE               ? "remove"
                         : ev->mask & IN_MOVED_FROM           ? "rename"
                         : ev->mask & IN_ATTRIB               ? "chmod"
                                                              : nullptr;
      if (type == nullptr) continue;
      out.push_back({type, path, is_dir});
      if (recursive_ && is_dir && (ev->mask & (IN_CREATE | IN_MOVED_TO))) {
        Status added = add_tree(files, path, 1, &out);
        if (!added && added.error().sys_errno != ENOENT) out.push_back({"overflow", path, true});
      }
    }
  }
  return out;
}

}  // namespace rf::runner
