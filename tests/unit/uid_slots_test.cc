// The host uid layout of sandbox slots: ranges apart, under 2^31, and spread
// over the kernel's user_struct hash (kernel/user.c: 128 buckets,
// ((uid >> 7) + uid) & 127), which every setuid scans under a spinlock.
#include "host/uid_slots.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>

namespace rf::host {
namespace {

uint32_t kernel_uid_bucket(uid_t uid) { return ((uid >> 7) + uid) & 127; }

TEST(UidSlots, RangesNeverOverlapAndStayBelowTwoToThe31) {
  for (uint32_t i = 0; i + 1 < kSlotCount; ++i) {
    ASSERT_LE(uint64_t{slot_host_base(i)} + kUidRangeSize, slot_host_base(i + 1)) << i;
  }
  EXPECT_LT(uint64_t{slot_host_base(kSlotCount - 1)} + kUidRangeSize - 1, 0x80000000u);
  EXPECT_GT(slot_host_base(0), 0x10000000u);  // far above login and subuid ranges
}

TEST(UidSlots, EveryUidOfASlotAndNoOtherMapsBackToIt) {
  uint32_t slot = 0;
  for (uint32_t i : {0u, 1u, 127u, 128u, 9999u, kSlotCount - 1}) {
    for (uint32_t inside : {0u, kSandboxUid, kUidRangeSize - 1}) {
      ASSERT_TRUE(uid_slot_of(slot_host_base(i) + inside, &slot)) << i << " " << inside;
      EXPECT_EQ(slot, i);
    }
    // The 128 uids after a range belong to no slot.
    EXPECT_FALSE(uid_slot_of(slot_host_base(i) + kUidRangeSize, &slot)) << i;
    EXPECT_FALSE(uid_slot_of(slot_host_base(i) + kSlotStride - 1, &slot)) << i;
  }
  EXPECT_FALSE(uid_slot_of(0, &slot));
  EXPECT_FALSE(uid_slot_of(kFirstHostUid - 1, &slot));
  EXPECT_FALSE(uid_slot_of(slot_host_base(kSlotCount - 1) + kSlotStride, &slot));
}

// With ranges 65536 apart, every slot's root fell into one bucket (and every
// sandbox user into another): each set-up walked a chain of all live sandboxes.
TEST(UidSlots, SandboxRootsAndUsersSpreadEvenlyOverTheKernelsUidHash) {
  std::array<uint32_t, 128> roots{}, users{};
  for (uint32_t i = 0; i < kSlotCount; ++i) {
    ++roots[kernel_uid_bucket(slot_host_base(i))];
    ++users[kernel_uid_bucket(slot_host_base(i) + kSandboxUid)];
  }
  EXPECT_EQ(*std::max_element(roots.begin(), roots.end()), kSlotCount / 128);
  EXPECT_EQ(*std::max_element(users.begin(), users.end()), kSlotCount / 128);
}

}  // namespace
}  // namespace rf::host
