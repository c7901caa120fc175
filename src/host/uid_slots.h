// Host uid ranges for sandboxes (host side). Each live sandbox owns one slot: a
// range of 65536 host uids/gids that its user namespace maps 0..65535 onto, so
// no two live sandboxes share a host uid and none is host root. A slot is held
// by a lock on its byte of a file under /run/ringfence/uid-slots (F_OFD_SETLK,
// through a descriptor of the holder's own): exclusive across every process on
// the host, released by the kernel when the holder dies; at most 128 empty
// files on disk. A
// process that cannot open that file (not root) binds an abstract unix socket
// named after the slot instead, which only processes in its network namespace
// see. Until 2026-11-28 every process did: a worker in another network
// namespace (`ip netns exec`) held its slots apart from the host's, and two
// live sandboxes could be given one range.
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "core/result.h"
#include "core/unique_fd.h"

namespace rf::host {

inline constexpr uint32_t kUidRangeSize = 65536;
// Slots start kSlotStride uids apart, not kUidRangeSize: the kernel keeps a
// user_struct per host uid in a table of 128 buckets, bucket ((uid >> 7) + uid)
// % 128, scanned under a spinlock with interrupts off on every setuid. With
// ranges 65536 apart every sandbox's root (and every sandbox's user) fell into
// one bucket, so each sandbox's set-up walked a chain as long as the host had
// sandboxes (measured: "become root" 34 µs at 100 live sandboxes, ~3 ms at
// 2,000), and so did every setuid(0) on the host. 128 more spread them evenly.
inline constexpr uint32_t kSlotStride = kUidRangeSize + 128;
inline constexpr uint32_t kSlotCount = 16384;
// Far above login and subuid ranges; the last slot ends below 2^31, where
// programs that keep uids in an int would see them negative.
inline constexpr uint32_t kFirstHostUid = 0x3FE00000;
static_assert(uint64_t{kFirstHostUid} + uint64_t{kSlotCount} * kSlotStride <= 0x80000000u);
inline constexpr uint32_t kSandboxUid = 1000;  // the user commands run as, inside

// The first host uid of slot `index`: inside uid u is host uid slot_host_base + u.
constexpr uid_t slot_host_base(uint32_t index) { return kFirstHostUid + index * kSlotStride; }

class UidSlot {
 public:
  UidSlot() = default;
  UidSlot(uint32_t index, UniqueFd lock) : index_(index), lock_(std::move(lock)) {}
  uint32_t index() const { return index_; }
  uid_t host_base() const { return slot_host_base(index_); }
  bool held() const { return lock_.valid(); }
  void release() { lock_.reset(); }

 private:
  uint32_t index_ = 0;
  UniqueFd lock_;
};

Result<UidSlot> acquire_uid_slot();
inline constexpr const char* kUidSlotLockDir = "/run/ringfence/uid-slots";
inline constexpr uint32_t kUidSlotsPerLockFile = 128;

// Locks slot `index`'s byte under kUidSlotLockDir (else binds
// "\0ringfence/uid-slot/<index>"); EADDRINUSE means another sandbox has it.
Result<UniqueFd> try_lock_uid_slot(uint32_t index);
// The slot owning host uid `uid`, if it is in the sandbox range.
bool uid_slot_of(uid_t uid, uint32_t* index);

}  // namespace rf::host
