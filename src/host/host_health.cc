#include "host/host_health.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "core/unique_fd.h"
#include "core/units.h"

namespace rf::host {
namespace {

const char* kOtherDir =
    "; or point the worker elsewhere (--state-dir, or state_dir in the worker config)";

// What to do about `err` on `dir`, for the remedy line.
std::string advice_for(int err, const std::string& dir) {
  switch (err) {
    case EROFS:
      return "the file system of " + dir + " is read-only: remount it read-write";
    case EACCES:
    case EPERM:
      return "give uid " + std::to_string(::geteuid()) + " write access to " + dir +
             " (chown or chmod)";
    case ENOSPC:
    case EDQUOT:
      return "the file system of " + dir + " is full: free space or raise the quota";
    case ENOTDIR:
    case EEXIST:
      return "a component of " + dir + " is not a directory: move that file away";
    default:
      return "make " + dir + " a writable directory";
  }
}

std::string errno_text(int err) {
  const char* name = ::strerrorname_np(err);
  return std::string(std::strerror(err)) + " (" + (name ? name : std::to_string(err)) + ")";
}

HealthCheck failed_write(const std::string& dir, const std::string& what, int err) {
  HealthCheck c;
  c.name = "state dir writable";
  c.detail = what + ": " + errno_text(err);
  c.remedy = advice_for(err, dir) + kOtherDir;
  return c;
}

std::string nearest_existing(std::string path) {
  struct stat st {};
  while (path.size() > 1 && ::stat(path.c_str(), &st) != 0) {
    const auto slash = path.find_last_of('/');
    path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
  }
  return path;
}

}  // namespace

HealthCheck check_state_dir_writable(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return failed_write(dir, "create " + dir, ec.value());
  const std::string probe = dir + "/.doctor-probe-" + std::to_string(::getpid());
  UniqueFd fd(::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) return failed_write(dir, "create " + probe, errno);
  const bool written = ::write(fd.get(), "ok\n", 3) == 3 && ::fsync(fd.get()) == 0;
  const int err = errno;
  fd.reset();
  const bool unlinked = ::unlink(probe.c_str()) == 0;
  if (!written) return failed_write(dir, "write " + probe, err);
  if (!unlinked) return failed_write(dir, "unlink " + probe, errno);
  HealthCheck c;
  c.name = "state dir writable";
  c.ok = true;
  c.detail = dir + " (created, synced and removed a file)";
  return c;
}

HealthCheck free_disk_verdict(const std::string& name, const std::string& path, DiskSpace space) {
  HealthCheck c;
  c.name = name;
  const uint64_t percent = space.total_bytes ? space.free_bytes * 100 / space.total_bytes : 0;
  c.detail = format_size_human(space.free_bytes) + " free of " +
             format_size_human(space.total_bytes) + " (" + std::to_string(percent) + "%) in " +
             path;
  c.ok = space.free_bytes >= kMinFreeBytes && percent >= kMinFreePercent;
  if (!c.ok) {
    c.remedy =
        "free at least " + format_size_human(kMinFreeBytes) + " and " +
        std::to_string(kMinFreePercent) + "% on the file system of " + path +
        ": `ringfence sandbox reap --older-than 10m` removes orphaned sandboxes' scratch dirs; "
        "then look for large files (du -xsh " +
        path + "/*)";
  }
  return c;
}

HealthCheck check_free_disk(const std::string& name, const std::string& path) {
  const std::string at = nearest_existing(path);
  struct statvfs sv {};
  if (::statvfs(at.c_str(), &sv) != 0) {
    HealthCheck c;
    c.name = name;
    c.detail = "statvfs " + at + ": " + errno_text(errno);
    c.remedy = "check that " + at + " is reachable";
    return c;
  }
  const uint64_t unit = sv.f_frsize ? sv.f_frsize : sv.f_bsize;
  return free_disk_verdict(name, at, DiskSpace{sv.f_blocks * unit, sv.f_bavail * unit});
}

}  // namespace rf::host
