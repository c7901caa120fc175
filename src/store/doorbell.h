// The store's doorbell: cross-process wake-ups next to the database file, so
// that workers and clients sleep until something they wait for changed instead
// of polling SQLite.
//
// A small shared file (<db>-bell) mapped by every process that opens the store.
// It holds slots; each slot is a change counter (a futex word) and a count of
// waiters. A writer commits, then rings the slot: the counter goes up and, only
// when someone waits, FUTEX_WAKE. A waiter reads the counter, looks at the
// database, and if nothing is there yet sleeps until the counter moves past what
// it read (or a timeout passes): no wake-up is lost between the look and the
// sleep. Slot 0 is the queue (a call was enqueued), slot 1 the workflow runs'
// queue; the others are call and run slots, shared by call ids modulo their
// number and by hashes of run ids (a spurious wake-up is harmless).
//
// The doorbell is an optimisation, never a correctness condition: waiters always
// pass a timeout and look again, so a process that does not ring (or a bell file
// that cannot be opened) only costs latency.
//
// On PostgreSQL, whose clients live on many hosts, each process keeps a bell of
// its own (open_private) and a BellRelay carries the rings between processes:
// LISTEN/NOTIFY (pg_bell.cc).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/result.h"

namespace rf::store {

class Doorbell {
 public:
  static constexpr uint32_t kQueueSlot = 0;     // a call was queued
  static constexpr uint32_t kRunQueueSlot = 1;  // a workflow run was queued (or requeued)

  // Opens (creating, mode 0600) the bell file and maps it shared.
  static Result<std::unique_ptr<Doorbell>> open(const std::string& path);
  // A bell of this process only (its rings come from a BellRelay).
  static Result<std::unique_ptr<Doorbell>> open_private();
  ~Doorbell();
  Doorbell(const Doorbell&) = delete;
  Doorbell& operator=(const Doorbell&) = delete;

  static uint32_t call_slot(int64_t call_id);
  // A run's slot (a hash of its id), shared with call slots like they share.
  static uint32_t run_slot(std::string_view run_id);

  // The slot's counter now; pass it to wait() after looking at the database.
  uint32_t version(uint32_t slot) const;
  // Bumps the counter and wakes the slot's waiters.
  void ring(uint32_t slot);
  // Sleeps until the counter differs from `seen` or `timeout` passes.
  void wait(uint32_t slot, uint32_t seen, std::chrono::microseconds timeout);
  // Rings every slot (rings may have been missed: a relay reconnected).
  void ring_all();

 private:
  struct Slot {
    std::atomic<uint32_t> version;
    std::atomic<uint32_t> waiters;
  };
  static_assert(sizeof(Slot) == 8);
  static constexpr uint32_t kSlots = 512;  // one 4 KiB page

  Doorbell(Slot* slots) : slots_(slots) {}
  Slot* slots_;
};

// Carries rings between the processes that share a store on many hosts: a
// ring published here reaches every process's bell (its own included).
class BellRelay {
 public:
  virtual ~BellRelay() = default;
  // After a commit: rings `slot` in every process. Never fails loudly: a ring
  // lost only costs a waiter its timeout.
  virtual void publish(uint32_t slot) = 0;
};

// The PostgreSQL engine's relay (pg_bell.cc), registered with it
// (store/postgres.h): relays rings for the store at `uri` into `bell`, which
// must outlive it.
// The PostgreSQL channel the rings go on; a payload lists slots: "3,17,42".
inline constexpr const char* kBellChannel = "rf_bell";

using BellRelayMaker = Result<std::unique_ptr<BellRelay>> (*)(const std::string& uri,
                                                              Doorbell& bell);
void register_bell_relay(BellRelayMaker maker);
BellRelayMaker bell_relay_maker();

}  // namespace rf::store
