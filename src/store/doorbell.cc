#include "store/doorbell.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>

#include "core/unique_fd.h"

namespace rf::store {
namespace {

constexpr size_t kBytes = 4096;

long futex(std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
  // Not FUTEX_PRIVATE_FLAG: the word lives in a file mapping shared between processes.
  return ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
}

}  // namespace

Result<std::unique_ptr<Doorbell>> Doorbell::open(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) return sys_error("open doorbell " + path, errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return sys_error("stat doorbell " + path, errno);
  if (!S_ISREG(st.st_mode)) return make_error("open doorbell " + path, "not a regular file");
  // Growing a file that is already big enough is a no-op, so racing openers agree.
  if (st.st_size < static_cast<off_t>(kBytes) && ::ftruncate(fd.get(), kBytes) != 0) {
    return sys_error("size doorbell " + path, errno);
  }
  void* map = ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (map == MAP_FAILED) return sys_error("map doorbell " + path, errno);
  static_assert(kSlots * sizeof(Slot) == kBytes);
  return std::unique_ptr<Doorbell>(new Doorbell(static_cast<Slot*>(map)));
}

Result<std::unique_ptr<Doorbell>> Doorbell::open_private() {
  void* map = ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) return sys_error("map a private doorbell", errno);
  return std::unique_ptr<Doorbell>(new Doorbell(static_cast<Slot*>(map)));
}

Doorbell::~Doorbell() { ::munmap(slots_, kBytes); }

uint32_t Doorbell::call_slot(int64_t call_id) {
  return 2 + static_cast<uint32_t>(static_cast<uint64_t>(call_id) % (kSlots - 2));
}

uint32_t Doorbell::run_slot(std::string_view run_id) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : run_id) h = (h ^ c) * 1099511628211ull;
  return 2 + static_cast<uint32_t>(h % (kSlots - 2));
}

uint32_t Doorbell::version(uint32_t slot) const {
  return slots_[slot % kSlots].version.load(std::memory_order_acquire);
}

void Doorbell::ring(uint32_t slot) {
  Slot& s = slots_[slot % kSlots];
  s.version.fetch_add(1, std::memory_order_seq_cst);
  if (s.waiters.load(std::memory_order_seq_cst) != 0)
    futex(&s.version, FUTEX_WAKE, INT_MAX, nullptr);
}

void Doorbell::wait(uint32_t slot, uint32_t seen, std::chrono::microseconds timeout) {
  Slot& s = slots_[slot % kSlots];
  s.waiters.fetch_add(1, std::memory_order_seq_cst);
  // FUTEX_WAIT returns at once when the word is no longer `seen`: a ring between
  // the caller's look at the database and this sleep is not lost.
  const timespec ts{static_cast<time_t>(timeout.count() / 1'000'000),
                    static_cast<long>(timeout.count() % 1'000'000) * 1000};
  if (s.version.load(std::memory_order_seq_cst) == seen) futex(&s.version, FUTEX_WAIT, seen, &ts);
  s.waiters.fetch_sub(1, std::memory_order_seq_cst);
}

void Doorbell::ring_all() {
  for (uint32_t slot = 0; slot < kSlots; ++slot) ring(slot);
}

namespace {
std::atomic<BellRelayMaker> relay_maker{nullptr};
}  // namespace

void register_bell_relay(BellRelayMaker maker) { relay_maker.store(maker); }
BellRelayMaker bell_relay_maker() { return relay_maker.load(); }

}  // namespace rf::store
