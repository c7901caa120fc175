#include "host/uid_slots.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace rf::host {
namespace {

std::string lock_file_path(uint32_t file) {
  return std::string(kUidSlotLockDir) + "/" + std::to_string(file);
}

// kUidSlotGroup's id, looked up once; nullopt where the host has no such group.
std::optional<gid_t> slot_group() {
  static const std::optional<gid_t> gid = []() -> std::optional<gid_t> {
    group g{};
    group* found = nullptr;
    std::vector<char> buf(16384);
    if (::getgrnam_r(kUidSlotGroup, &g, buf.data(), buf.size(), &found) != 0 || found == nullptr)
      return std::nullopt;
    return g.gr_gid;
  }();
  return gid;
}

// A lock file as root keeps it: readable by kUidSlotGroup (for shared locks),
// by nobody else. Files made before that group could read them are fixed here.
void keep_readable_by_group(int fd) {
  const std::optional<gid_t> gid = slot_group();
  const mode_t mode = gid ? 0640 : 0600;
  struct stat st {};
  if (::fstat(fd, &st) != 0) return;
  if (gid && st.st_gid != *gid) (void)!::fchown(fd, 0, *gid);
  if ((st.st_mode & 07777) != mode) (void)!::fchmod(fd, mode);
}

// Opens lock file `file` for an exclusive lock (root: made if missing, with
// its parents, and every other lock file with it, so a non-root process finds
// them all once one root process ran), else for a shared one (a member of
// kUidSlotGroup). An empty descriptor where neither can be had.
Result<UniqueFd> open_lock_file(uint32_t file, bool* exclusive) {
  const std::string path = lock_file_path(file);
  constexpr int kFlags = O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC;
  UniqueFd fd(::open(path.c_str(), kFlags, 0600));
  if (!fd && errno == ENOENT) {
    const std::string parent = std::filesystem::path(kUidSlotLockDir).parent_path();
    for (const std::string& dir : {parent, std::string(kUidSlotLockDir)})
      if (::mkdir(dir.c_str(), 0711) != 0 && errno != EEXIST) break;
    for (uint32_t f = 0; f < kSlotCount / kUidSlotsPerLockFile; ++f) {
      UniqueFd made(::open(lock_file_path(f).c_str(), kFlags, 0600));
      if (made) keep_readable_by_group(made.get());
    }
    fd.reset(::open(path.c_str(), kFlags, 0600));
  }
  if (fd) {
    keep_readable_by_group(fd.get());
    *exclusive = true;
    return fd;
  }
  if (errno != EACCES && errno != EPERM && errno != EROFS && errno != ENOENT)
    return sys_error("open " + path);
  fd.reset(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (fd) {
    *exclusive = false;
    return fd;
  }
  if (errno != EACCES && errno != EPERM && errno != ENOENT) return sys_error("open " + path);
  return UniqueFd();
}

// Locks byte `index % kUidSlotsPerLockFile` of its lock file through `fd` (an
// open file description lock); EADDRINUSE where another holder has it.
Status lock_byte(int fd, uint32_t index, bool exclusive) {
  struct flock byte {};
  byte.l_type = exclusive ? F_WRLCK : F_RDLCK;
  byte.l_whence = SEEK_SET;
  byte.l_start = static_cast<off_t>(index % kUidSlotsPerLockFile);
  byte.l_len = 1;
  if (::fcntl(fd, F_OFD_SETLK, &byte) == 0) return ok_status();
  // Held by another descriptor: said as the socket says it.
  if (errno == EAGAIN || errno == EACCES) return sys_error("lock", EADDRINUSE);
  return sys_error("lock " + lock_file_path(index / kUidSlotsPerLockFile));
}

// Binds "\0ringfence/uid-slot/<index>": seen only in this network namespace.
Result<UniqueFd> bind_slot_socket(uint32_t index) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return sys_error("socket");
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const int n =
      std::snprintf(addr.sun_path + 1, sizeof addr.sun_path - 1, "ringfence/uid-slot/%u", index);
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0) return sys_error("bind");
  return fd;
}

}  // namespace

Result<SlotLock> try_lock_uid_slot(uint32_t index) {
  SlotLock lock;
  bool exclusive = false;
  auto file = open_lock_file(index / kUidSlotsPerLockFile, &exclusive);
  if (!file) return file.take_error();
  if (file->valid()) {
    RF_TRY(lock_byte(file->get(), index, exclusive));
    lock.file = std::move(*file);
    if (exclusive) return lock;
  }
  auto socket = bind_slot_socket(index);
  if (!socket) return socket.take_error();
  lock.socket = std::move(*socket);
  return lock;
}

Result<UidSlot> acquire_uid_slot() {
  static thread_local std::minstd_rand rng(std::random_device{}());
  const uint32_t start = static_cast<uint32_t>(rng()) % kSlotCount;
  for (uint32_t i = 0; i < kSlotCount; ++i) {
    const uint32_t index = (start + i) % kSlotCount;
    auto lock = try_lock_uid_slot(index);
    if (lock) return UidSlot(index, std::move(*lock));
    if (lock.error().sys_errno != EADDRINUSE)
      return make_error("allocate uid range", lock.error().to_string());
  }
  return make_error("allocate uid range",
                    "all " + std::to_string(kSlotCount) + " host uid ranges are in use");
}

bool uid_slot_of(uid_t uid, uint32_t* index) {
  if (uid < kFirstHostUid) return false;
  const uint64_t i = (uint64_t{uid} - kFirstHostUid) / kSlotStride;
  if (i >= kSlotCount || uid - slot_host_base(static_cast<uint32_t>(i)) >= kUidRangeSize) {
    return false;  // past the last slot, or in the gap between two
  }
  *index = static_cast<uint32_t>(i);
  return true;
}

}  // namespace rf::host
