// Host uid ranges for sandboxes (host side). Each live sandbox owns one slot: a
// range of 65536 host uids/gids that its user namespace maps 0..65535 onto, so
// no two live sandboxes share a host uid and none is host root. A slot is held
// by binding an abstract unix socket named after it: exclusive across every
// process on the host, released by the kernel when the holder dies, and it
// leaves nothing on disk.
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "core/result.h"
#include "core/unique_fd.h"

namespace rf::host {

inline constexpr uint32_t kUidRangeSize = 65536;
inline constexpr uint32_t kFirstHostUid = 0x40000000;  // far above login and subuid ranges
inline constexpr uint32_t kSlotCount = 16384;
inline constexpr uint32_t kSandboxUid = 1000;  // the user commands run as, inside

class UidSlot {
 public:
  UidSlot() = default;
  UidSlot(uint32_t index, UniqueFd lock) : index_(index), lock_(std::move(lock)) {}
  uint32_t index() const { return index_; }
  uid_t host_base() const { return kFirstHostUid + index_ * kUidRangeSize; }
  bool held() const { return lock_.valid(); }
  void release() { lock_.reset(); }

 private:
  uint32_t index_ = 0;
  UniqueFd lock_;
};

Result<UidSlot> acquire_uid_slot();
// Binds "\0ringfence/uid-slot/<index>"; EADDRINUSE means another sandbox has it.
Result<UniqueFd> try_lock_uid_slot(uint32_t index);
// The slot owning host uid `uid`, if it is in the sandbox range.
bool uid_slot_of(uid_t uid, uint32_t* index);

}  // namespace rf::host
