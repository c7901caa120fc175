// cgroup v1 and v2 behind one interface (host side). A sandbox gets one cgroup
// (on v1: one directory per controller) named after its id, under a parent
// ("ringfence") at the root of each hierarchy. Tested on a fake cgroupfs
// directory (tests/unit/cgroup_test.cc) as well as the real one.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace rf::host {

enum class CgroupVersion { kV1, kV2 };

struct CgroupLayout {
  CgroupVersion version = CgroupVersion::kV2;
  std::string v2_root;                           // v2: the unified mount, e.g. /sys/fs/cgroup
  std::map<std::string, std::string> v1_mounts;  // v1: controller -> mount point
  // Tests only: the tree is a plain directory, so files are created on write.
  bool fake = false;
};

// Finds the cgroup mounts in /proc/self/mountinfo text. Picks v2 when the
// unified hierarchy offers memory, pids and cpu; else v1 when memory, pids, cpu
// and cpuacct are mounted; else an error naming what is missing.
// The text-only form cannot read the unified mount, so it assumes v2 offers
// each controller that no v1 hierarchy holds (on a v2-only host: all of them).
Result<CgroupLayout> detect_cgroup_layout(std::string_view mountinfo);
Result<CgroupLayout> detect_cgroup_layout();

// Returns the text of `<v2_root>/cgroup.controllers` ("" when unreadable).
using V2ControllersReader = std::function<std::string(const std::string& v2_root)>;
// The pure core of detection, for tests: `v2_controllers` answers for the
// unified mount instead of the file system.
Result<CgroupLayout> detect_cgroup_layout(std::string_view mountinfo,
                                          const V2ControllersReader& v2_controllers);

// A zero memory_bytes or pids, or cpus <= 0, means no limit.
struct CgroupLimits {
  double cpus = 1.0;
  uint64_t memory_bytes = 0;
  uint64_t pids = 0;
};

// What a call's result needs from its sandbox's cgroup besides its peak
// memory (CallPeak), read after every call (host/call_usage.h): no cpu
// counter (the call's own rusage says its cpu time), which was a file more to
// open and read per call, and on v2 a flush of the cgroup's statistics.
struct CgroupEvents {
  uint64_t oom_kills = 0;      // memory.events oom_kill (v2) / memory.oom_control oom_kill (v1)
  uint64_t pids_max_hits = 0;  // pids.events max
};

// A cgroup's counters as `sandbox list` shows them.
struct CgroupUsage {
  // v2: the most the cgroup held over its life (memory.peak; memory.current
  // before Linux 5.19). v1: memory.max_usage_in_bytes, which every call
  // started in a cgroup made here resets (Cgroup::start_call_peak).
  uint64_t memory_peak_bytes = 0;
  uint64_t oom_kills = 0;
  uint64_t pids_max_hits = 0;
};

// A cgroup's event counters (Cgroup::hold_counters) read through files kept
// open: each read is one pread a file from offset 0, where the kernel prints
// the file anew (~1.5 µs for the three files a call read on v1 with the peak,
// against ~13 µs opened, read and closed). Reads may come from several
// threads at once.
class CgroupCounters {
 public:
  virtual ~CgroupCounters() = default;
  virtual Result<CgroupEvents> read() const = 0;
};

// The most memory a cgroup held while one call ran: from the
// Cgroup::start_call_peak() made before the call was sent to finish().
class CallPeak {
 public:
  virtual ~CallPeak() = default;
  // The peak since the start, read once at the call's end: it ends the watch.
  virtual Result<uint64_t> finish() = 0;
};

class Cgroup {
 public:
  virtual ~Cgroup() = default;
  virtual Status apply(const CgroupLimits& limits) = 0;
  virtual Status add_process(pid_t pid) = 0;
  // v2: an O_DIRECTORY fd for clone3(CLONE_INTO_CGROUP); -1 on v1.
  virtual int clone_into_fd() const = 0;
  // v1: the `tasks` files a new single-threaded process writes "0" to, to move
  // itself in. A thread moving itself skips the global threadgroup rwsem that a
  // write of another pid to cgroup.procs takes (an RCU grace period, ~10 ms).
  // Empty on v2, where clone_into_fd() does the job.
  virtual std::vector<std::string> self_attach_files() const = 0;
  // Opens, reads and closes each counter file (`sandbox list`).
  virtual Result<CgroupUsage> usage() const = 0;
  // The event counters, their files kept open while the result, or another
  // taken while it lives, is held. A call holds them from its start to its
  // read after the call ends (host/call_usage.h): calls that overlap share
  // one set, opened at its first read, and a sandbox with no call running
  // holds no fd for them (issue 10 bounds a sandbox's fds at three).
  // On a fake tree (tests, which rewrite and remove files) each read opens.
  virtual std::shared_ptr<const CgroupCounters> hold_counters() const = 0;
  // Starts measuring the cgroup's peak memory for one call, just before the
  // call is sent; one descriptor per call running, closed with its CallPeak.
  // An error where the cgroup cannot say one call's peak: the call then
  // reports its own ru_maxrss only, never the cgroup's peak over its life,
  // which an earlier call may have set.
  //  v2: a memory.peak descriptor of the call's own, reset by writing
  //   "reset" to it (Linux 6.12+). Older kernels refuse the open (EACCES) or
  //   lack the file (before 5.19); a refusal is remembered, not retried.
  //  v1: memory.max_usage_in_bytes, reset by writing "0". It is one counter
  //   for every reader, so it is reset only in a cgroup made here
  //   (create_cgroup): never in a docker daemon's, whose stats report it.
  // Calls that overlap each get their own peak (cgroup_internal::PeakWatch).
  virtual Result<std::shared_ptr<CallPeak>> start_call_peak() const = 0;
  virtual Result<std::vector<pid_t>> pids() const = 0;
  // SIGKILL every process in it (cgroup.kill on v2 where present), repeated
  // until cgroup.procs is empty or ~1s passed.
  virtual Status kill_all() = 0;
  // rmdir of every directory; retries briefly on EBUSY; ok if already gone.
  virtual Status remove() = 0;
  // Every directory this cgroup owns (for the janitor and `sandbox reap`).
  virtual std::vector<std::string> paths() const = 0;
  // Freezes every process in it (pause: they keep their memory and state
  // and use no CPU) or thaws them, and returns once the kernel says it is
  // so (v2 cgroup.freeze and cgroup.events; v1 the freezer hierarchy, an
  // error when it is not mounted). A frozen cgroup can still be killed.
  virtual Status freeze(bool /*frozen*/) {
    return make_error("freeze", "this cgroup has no freezer");
  }
  // The limits as the kernel holds them, file name -> its text (trimmed):
  // v2 memory.max, memory.swap.max, pids.max, cpu.max; v1 memory.limit_in_bytes,
  // memory.memsw.limit_in_bytes, pids.max, cpu.cfs_quota_us, cpu.cfs_period_us.
  // Files that cannot be read are left out (the boundary report says so).
  virtual std::map<std::string, std::string> limit_files() const = 0;
};

// Creates `<parent>/<name>` in every needed hierarchy (creating the parent
// and, on v2, enabling the memory, pids and cpu controllers for it).
// On failure nothing is left behind.
Result<std::unique_ptr<Cgroup>> create_cgroup(const CgroupLayout& layout, const std::string& parent,
                                              const std::string& name);

// An existing sandbox cgroup, for `sandbox list` and `sandbox reap`: the
// directories of `<parent>/<name>` that exist, created by no one. Error if none does.
Result<std::unique_ptr<Cgroup>> open_cgroup(const CgroupLayout& layout, const std::string& parent,
                                            const std::string& name);

// Names of existing sandbox cgroups under `parent` (for reaping).
Result<std::vector<std::string>> list_cgroups(const CgroupLayout& layout,
                                              const std::string& parent);

}  // namespace rf::host
