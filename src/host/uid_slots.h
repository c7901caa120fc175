// Host uid ranges for sandboxes (host side). Each live sandbox owns one slot: a
// range of 65536 host uids/gids that its user namespace maps 0..65535 onto, so
// no two live sandboxes share a host uid and none is host root.
//
// A slot is held by a lock on its byte of a file under /run/ringfence/uid-slots
// (F_OFD_SETLK, through a descriptor of the holder's own), released by the
// kernel when the holder dies, and seen by every process on the host whatever
// its network namespace; at most 128 small files on disk.
// - Root locks the byte exclusively.
// - A member of the `docker` group (a non-root docker worker: root's equal
//   through the docker socket anyway) may read the files, and locks the byte
//   shared: root's exclusive lock and its shared one exclude each other. Two
//   shared locks do not, so it also binds an abstract unix socket named after
//   the slot, which every non-root process in its network namespace sees.
// - Any other process has only that socket.
// Until 2026-11-28 every process held its slots by the socket alone: a worker
// in another network namespace (`ip netns exec`) held its slots apart from the
// host's, and two live sandboxes could be given one range. Left: a non-root
// process finds the files only once a root process on the host has made them
// (all at once, the first time), and two non-root processes in different
// network namespaces still do not see each other.
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

// What holds one slot (see the top of this file): the lock file's descriptor,
// the abstract socket, or both.
struct SlotLock {
  UniqueFd file;
  UniqueFd socket;
  bool valid() const { return file.valid() || socket.valid(); }
};

class UidSlot {
 public:
  UidSlot() = default;
  UidSlot(uint32_t index, SlotLock lock) : index_(index), lock_(std::move(lock)) {}
  uint32_t index() const { return index_; }
  uid_t host_base() const { return slot_host_base(index_); }
  bool held() const { return lock_.valid(); }
  void release() { lock_ = SlotLock{}; }

 private:
  uint32_t index_ = 0;
  SlotLock lock_;
};

Result<UidSlot> acquire_uid_slot();
inline constexpr const char* kUidSlotLockDir = "/run/ringfence/uid-slots";
inline constexpr uint32_t kUidSlotsPerLockFile = 128;

// The group whose members may lock slots shared (see the top of this file).
inline constexpr const char* kUidSlotGroup = "docker";

// Takes slot `index` as the top of this file says; EADDRINUSE means another
// sandbox has it.
Result<SlotLock> try_lock_uid_slot(uint32_t index);
// The slot owning host uid `uid`, if it is in the sandbox range.
bool uid_slot_of(uid_t uid, uint32_t* index);

}  // namespace rf::host
