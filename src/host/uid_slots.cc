#include "host/uid_slots.h"

#include <sys/socket.h>
#include <sys/un.h>

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <random>

namespace rf::host {

Result<UniqueFd> try_lock_uid_slot(uint32_t index) {
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
