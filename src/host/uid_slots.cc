#include "host/uid_slots.h"

#include <fcntl.h>
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

namespace rf::host {
namespace {

// Byte `index % kUidSlotsPerLockFile` of lock file `index / kUidSlotsPerLockFile`,
// locked through a descriptor of the holder's own (an open file description
// lock): seen by every process on the host, whatever its network namespace.
// Each lock file holds few slots, because a lock is checked against every
// lock held on its file. Returns nullopt where the file cannot be had (not
// root: /run is root's), for the abstract socket instead.
std::optional<Result<UniqueFd>> try_lock_in_file(uint32_t index) {
  constexpr int kFlags = O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC;
  const std::string path =
      std::string(kUidSlotLockDir) + "/" + std::to_string(index / kUidSlotsPerLockFile);
  UniqueFd fd(::open(path.c_str(), kFlags, 0600));
  if (!fd && errno == ENOENT) {
    // Its parent (/run/ringfence), then the directory: each made once, by
    // whoever comes first.
    const std::string parent = std::filesystem::path(kUidSlotLockDir).parent_path();
    for (const std::string& dir : {parent, std::string(kUidSlotLockDir)})
      if (::mkdir(dir.c_str(), 0711) != 0 && errno != EEXIST) break;
    fd.reset(::open(path.c_str(), kFlags, 0600));
  }
  if (!fd) {
    if (errno == EACCES || errno == EPERM || errno == EROFS || errno == ENOENT) return std::nullopt;
    return Result<UniqueFd>(sys_error("open " + path));
  }
  struct flock byte {};
  byte.l_type = F_WRLCK;
  byte.l_whence = SEEK_SET;
  byte.l_start = static_cast<off_t>(index % kUidSlotsPerLockFile);
  byte.l_len = 1;
  if (::fcntl(fd.get(), F_OFD_SETLK, &byte) != 0) {
    // Held by another descriptor: said as the socket would say it.
    if (errno == EAGAIN || errno == EACCES) return Result<UniqueFd>(sys_error("lock", EADDRINUSE));
    return Result<UniqueFd>(sys_error("lock " + path));
  }
  return Result<UniqueFd>(std::move(fd));
}

}  // namespace

Result<UniqueFd> try_lock_uid_slot(uint32_t index) {
  if (auto locked = try_lock_in_file(index)) return std::move(*locked);
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
