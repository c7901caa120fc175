#include "host/volume_disk.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include "core/log.h"
#include "core/spawn.h"

namespace rf::host {
namespace {

namespace fs = std::filesystem;

// Runs a helper to its end; its exit status as an error naming it.
Status run_tool(const std::vector<std::string>& argv, const std::string& what) {
  auto pid = spawn_helper(argv, {{-1, 0}, {-1, 1}, {-1, 2}}, nullptr, /*search_path=*/true);
  if (!pid) return make_error(what, pid.error().to_string());
  int st = 0;
  while (::waitpid(*pid, &st, 0) < 0) {
    if (errno != EINTR) return sys_error(what + ": waitpid");
  }
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    return make_error(
        what, argv[0] + " failed (status " +
                  std::to_string(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st)) + ")");
  }
  return ok_status();
}

// Whether `dir` is a mount point (another device than its parent's).
bool is_mount_point(const std::string& dir) {
  struct stat self {
  }, parent{};
  if (::stat(dir.c_str(), &self) != 0) return false;
  if (::stat((dir + "/..").c_str(), &parent) != 0) return false;
  return self.st_dev != parent.st_dev;
}

}  // namespace

VolumeDisks::~VolumeDisks() {
  for (const auto& [dir, ours] : mounted_) {
    if (ours && ::umount2(dir.c_str(), MNT_DETACH) != 0) {
      spdlog::warn("unmount volume {}: {}", dir, std::strerror(errno));
    }
  }
}

std::string VolumeDisks::image_of(const std::string& project, const std::string& name) const {
  return root_ + "/" + project + "/" + name + ".img";
}

std::string VolumeDisks::dir_of(const std::string& project, const std::string& name) const {
  return root_ + "/" + project + "/" + name;
}

// mkfs.ext4 where Debian puts it, whatever our PATH says; "" when missing.
static std::string mkfs_path() {
  for (const char* dir : {"/usr/sbin", "/sbin", "/usr/bin", "/bin"}) {
    const std::string p = std::string(dir) + "/mkfs.ext4";
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

Status VolumeDisks::available() {
  if (::access("/dev/loop-control", R_OK | W_OK) != 0) {
    return sys_error("volumes need loop devices (/dev/loop-control)");
  }
  if (mkfs_path().empty())
    return make_error("volumes", "need mkfs.ext4 (apt-get install e2fsprogs)");
  return ok_status();
}

Result<std::string> VolumeDisks::mounted(const std::string& project, const std::string& name,
                                         uint64_t size_bytes) {
  const std::string what = "volume " + name + " of project " + project;
  std::lock_guard lock(mu_);
  const std::string dir = dir_of(project, name), image = image_of(project, name);
  if (mounted_.count(dir) != 0 || is_mount_point(dir)) {
    mounted_.emplace(dir, false);
    return dir;
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return make_error(what, "cannot make " + dir + ": " + ec.message());
  ::chmod(root_.c_str(), 0700);  // the host's paths and images are root's only
  if (::access(image.c_str(), F_OK) != 0) {
    // Made under another name first: a crash mid-mkfs leaves no image to trust.
    const std::string fresh = image + ".new";
    {
      const int fd = ::open(fresh.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      if (fd < 0) return sys_error(what + ": create " + fresh);
      const int r = ::ftruncate(fd, static_cast<off_t>(size_bytes));
      ::close(fd);
      if (r != 0) return sys_error(what + ": size " + fresh);
    }
    // No journal and no reserved blocks: the bound is what a client asked for.
    RF_TRY(available());
    RF_TRY(run_tool(
        {mkfs_path(), "-q", "-F", "-m", "0", "-O", "^has_journal", "-E", "root_owner=0:0", fresh},
        what + ": mkfs.ext4"));
    if (::rename(fresh.c_str(), image.c_str()) != 0) return sys_error(what + ": rename " + fresh);
  }
  RF_TRY(run_tool({"mount", "-o", "loop,nosuid,nodev", image, dir}, what + ": mount"));
  mounted_[dir] = true;
  return dir;
}

Status VolumeDisks::remove(const std::string& project, const std::string& name) {
  const std::string what = "volume " + name + " of project " + project;
  std::lock_guard lock(mu_);
  const std::string dir = dir_of(project, name), image = image_of(project, name);
  if (is_mount_point(dir) && ::umount2(dir.c_str(), 0) != 0) {
    return sys_error(what + ": unmount " + dir);
  }
  mounted_.erase(dir);
  std::error_code ec;
  fs::remove(image, ec);
  if (ec) return make_error(what, "cannot remove " + image + ": " + ec.message());
  fs::remove(dir, ec);
  return ok_status();
}

}  // namespace rf::host
