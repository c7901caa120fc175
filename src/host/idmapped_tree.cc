#include "host/idmapped_tree.h"

#include <fcntl.h>
#include <linux/mount.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "core/io.h"
#include "core/log.h"

namespace rf::host {
namespace {

// A user namespace whose only mapping is owner -> sandbox id. It lives as long
// as the returned fd; the process that made it is gone.
Result<UniqueFd> mapping_userns(uid_t owner, gid_t group, uid_t to_uid, gid_t to_gid) {
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return sys_error("pipe");
  UniqueFd wait_read(pipefd[0]), wait_write(pipefd[1]);
  const long pid =
      ::syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, nullptr, nullptr, nullptr, nullptr);
  if (pid < 0) return sys_error("clone user namespace");
  if (pid == 0) {
    ::close(wait_write.get());  // or our own copy would keep the pipe open forever
    char b;
    (void)!::read(wait_read.get(), &b, 1);  // EOF when the parent is done with us
    _exit(0);
  }
  wait_read.reset();
  const std::string proc = "/proc/" + std::to_string(pid);
  Result<UniqueFd> out = make_error("idmap", "unset");
  auto maps = [&]() -> Status {
    RF_TRY(write_file(proc + "/uid_map",
                      std::to_string(owner) + " " + std::to_string(to_uid) + " 1\n"));
    return write_file(proc + "/gid_map",
                      std::to_string(group) + " " + std::to_string(to_gid) + " 1\n");
  }();
  if (maps) {
    UniqueFd ns(::open((proc + "/ns/user").c_str(), O_RDONLY | O_CLOEXEC));
    out = ns ? Result<UniqueFd>(std::move(ns))
             : Result<UniqueFd>(sys_error("open " + proc + "/ns/user"));
  } else {
    out = maps.take_error();
  }
  wait_write.reset();
  while (::waitpid(static_cast<pid_t>(pid), nullptr, 0) < 0 && errno == EINTR) {
  }
  return out;
}

int set_attrs(int tree, uint64_t attrs, int userns) {
  mount_attr attr{};
  attr.attr_set = attrs;
  attr.userns_fd = static_cast<uint64_t>(userns);
  return static_cast<int>(
      ::syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof attr));
}

}  // namespace

Result<IdmappedTree> make_idmapped_tree(const std::string& dir, uid_t sandbox_uid,
                                        gid_t sandbox_gid, bool readonly) {
  const uint64_t ro = readonly ? MOUNT_ATTR_RDONLY : 0;
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return sys_error("workspace " + dir);
  IdmappedTree out;
  // Only the directory's own mount: submounts below it stay out.
  out.fd.reset(static_cast<int>(
      ::syscall(SYS_open_tree, AT_FDCWD, dir.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC)));
  if (!out.fd) return sys_error("open_tree " + dir);
  auto userns = mapping_userns(st.st_uid, st.st_gid, sandbox_uid, sandbox_gid);
  if (!userns) return make_error("idmap workspace " + dir, userns.error().to_string());
  if (set_attrs(out.fd.get(), MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | ro,
                userns->get()) == 0) {
    out.idmapped = true;
    return out;
  }
  // File systems without idmapping support: a plain bind, still nosuid and nodev.
  if (errno != EINVAL && errno != EOPNOTSUPP) return sys_error("mount_setattr " + dir);
  if (set_attrs(out.fd.get(), MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | ro, -1) != 0) {
    return sys_error("mount_setattr " + dir);
  }
  return out;
}

Result<std::unique_ptr<AttachedTree>> AttachedTree::attach(const std::string& dir,
                                                           uid_t sandbox_uid, gid_t sandbox_gid,
                                                           bool readonly, const std::string& at) {
  auto tree = make_idmapped_tree(dir, sandbox_uid, sandbox_gid, readonly);
  if (!tree) return tree.take_error();
  std::error_code ec;
  std::filesystem::create_directories(at, ec);
  if (ec) return make_error("attach " + dir, "cannot make " + at + ": " + ec.message());
  if (::syscall(SYS_move_mount, tree->fd.get(), "", AT_FDCWD, at.c_str(),
                MOVE_MOUNT_F_EMPTY_PATH) != 0) {
    Error e = sys_error("move_mount " + dir + " to " + at);
    ::rmdir(at.c_str());
    return e;
  }
  return std::unique_ptr<AttachedTree>(new AttachedTree(at));
}

AttachedTree::~AttachedTree() {
  if (::umount2(at_.c_str(), MNT_DETACH) != 0 && errno != EINVAL && errno != ENOENT) {
    spdlog::warn("unmount {}: {}", at_, std::strerror(errno));
  }
  ::rmdir(at_.c_str());
}

Status detach_trees_under(const std::string& dir) {
  std::error_code ec;
  std::string failed;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string at = entry.path().string();
    if (::umount2(at.c_str(), MNT_DETACH) != 0 && errno != EINVAL && errno != ENOENT) {
      failed += (failed.empty() ? "" : "; ") + at + ": " + std::strerror(errno);
      continue;
    }
    if (::rmdir(at.c_str()) != 0 && errno != ENOENT) {
      failed += (failed.empty() ? "" : "; ") + at + ": " + std::strerror(errno);
    }
  }
  if (ec && ec != std::errc::no_such_file_or_directory) {
    return make_error("detach " + dir, ec.message());
  }
  if (!failed.empty()) return make_error("detach " + dir, failed);
  if (::rmdir(dir.c_str()) != 0 && errno != ENOENT) return sys_error("rmdir " + dir);
  return ok_status();
}

}  // namespace rf::host
