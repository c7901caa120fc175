// The host uid layout of sandbox slots: ranges apart, under 2^31, and spread
// over the kernel's user_struct hash (kernel/user.c: 128 buckets,
// ((uid >> 7) + uid) & 127), which every setuid scans under a spinlock.
#include "host/uid_slots.h"

#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <vector>

#include "support/ci_skip.h"

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

// Abstract socket names are per network namespace: when slots were held by
// them, a worker in another one (`ip netns exec`, the fleet test's) held its
// slots apart from the host's, and could give a slot another live sandbox
// held to one of its own. The child here, in a network namespace of its own,
// must find the parent's slot taken.
TEST(UidSlots, ASlotIsHeldForAProcessInAnotherNetworkNamespaceToo) {
  if (::geteuid() != 0) RF_SKIP() << "a network namespace of its own needs root";
  auto slot = acquire_uid_slot();
  ASSERT_TRUE(slot.ok()) << slot.error().to_string();
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::unshare(CLONE_NEWNET) != 0) ::_exit(10);
    struct stat before {
    }, after{};
    if (::stat("/proc/thread-self/ns/net", &before) != 0) ::_exit(11);
    auto again = try_lock_uid_slot(slot->index());
    if (::stat("/proc/thread-self/ns/net", &after) != 0 || after.st_ino != before.st_ino)
      ::_exit(12);           // left in another namespace
    if (again) ::_exit(13);  // the same slot, held twice
    ::_exit(again.error().sys_errno == EADDRINUSE ? 0 : 14);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10 unshare, 13 taken twice, 14 another error";
}

// A non-root docker worker (a member of the docker group) and a root worker on
// one host take their slots through the same lock files: root's exclusive lock
// and the member's shared one exclude each other. Before, the member held its
// slots by an abstract socket only, which root no longer looks at, and the two
// could be given one range (one host uid, one egress identity). Two members
// exclude each other by the socket as well.
TEST(UidSlots, RootAndANonRootDockerWorkerNeverShareASlot) {
  if (::geteuid() != 0) RF_SKIP() << "changing to another user needs root";
  group g{};
  group* found = nullptr;
  std::vector<char> buf(16384);
  if (::getgrnam_r(kUidSlotGroup, &g, buf.data(), buf.size(), &found) != 0 || found == nullptr)
    RF_SKIP() << "no " << kUidSlotGroup << " group on this host";
  const gid_t docker = g.gr_gid;
  auto slot = acquire_uid_slot();
  ASSERT_TRUE(slot.ok()) << slot.error().to_string();
  int to_parent[2], to_child[2];
  ASSERT_EQ(::pipe2(to_parent, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(to_child, O_CLOEXEC), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(to_parent[0]);
    ::close(to_child[1]);
    if (::setgroups(1, &docker) != 0 || ::setgid(docker) != 0 || ::setuid(65534) != 0) ::_exit(10);
    auto again = try_lock_uid_slot(slot->index());
    if (again) ::_exit(11);  // root's slot, taken again
    if (again.error().sys_errno != EADDRINUSE) ::_exit(12);
    auto own = try_lock_uid_slot(slot->index() ^ 1);
    if (!own) ::_exit(own.error().sys_errno == EADDRINUSE ? 20 : 13);
    if (!own->file.valid() || !own->socket.valid()) ::_exit(14);
    // Another member of the group, in the same network namespace.
    const pid_t other = ::fork();
    if (other == 0) {
      auto twice = try_lock_uid_slot(slot->index() ^ 1);
      ::_exit(!twice && twice.error().sys_errno == EADDRINUSE ? 0 : 1);
    }
    int st = 0;
    if (other < 0 || ::waitpid(other, &st, 0) != other || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
      ::_exit(15);
    char c = 1;
    if (::write(to_parent[1], &c, 1) != 1) ::_exit(16);
    (void)!::read(to_child[0], &c, 1);  // until the parent has tried our slot
    ::_exit(0);
  }
  ::close(to_parent[1]);
  ::close(to_child[0]);
  char c = 0;
  const bool child_holds = ::read(to_parent[0], &c, 1) == 1;
  if (child_holds) {
    auto theirs = try_lock_uid_slot(slot->index() ^ 1);
    EXPECT_FALSE(theirs.ok()) << "root took the docker worker's slot";
    if (!theirs.ok()) {
      EXPECT_EQ(theirs.error().sys_errno, EADDRINUSE) << theirs.error().to_string();
    }
  }
  ::close(to_child[1]);
  ::close(to_parent[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  const int code = WEXITSTATUS(status);
  if (code == 20) RF_SKIP() << "the slot beside the test's is held by a live sandbox";
  EXPECT_EQ(code, 0) << "10 setuid, 11 root's slot taken again, 12/13 another error, "
                        "14 not held by file and socket, 15 two members shared a slot";
  EXPECT_TRUE(child_holds);
}

}  // namespace
}  // namespace rf::host
