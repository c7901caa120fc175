// Shared by cgroup.cc, cgroup_v1.cc and cgroup_v2.cc; not part of the API.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/unique_fd.h"
#include "host/cgroup.h"

namespace rf::host::cgroup_internal {

inline constexpr int64_t kCpuPeriodUs = 100000;
// What a v1 sandbox needs, each a hierarchy (possibly shared with another).
inline constexpr const char* kV1Controllers[] = {"memory", "pids", "cpu", "cpuacct"};
// Used where mounted, never required: the freezer (pause and resume).
inline constexpr const char* kV1Optional[] = {"freezer"};

Result<std::unique_ptr<Cgroup>> create_cgroup_v1(const CgroupLayout& layout,
                                                 const std::string& parent,
                                                 const std::string& name);
Result<std::unique_ptr<Cgroup>> open_cgroup_v1(const CgroupLayout& layout,
                                               const std::string& parent, const std::string& name);
Result<std::unique_ptr<Cgroup>> open_cgroup_v2(const CgroupLayout& layout,
                                               const std::string& parent, const std::string& name);
Result<std::unique_ptr<Cgroup>> create_cgroup_v2(const CgroupLayout& layout,
                                                 const std::string& parent,
                                                 const std::string& name);

// The whitespace-separated words of `text` (cgroup.controllers and the like).
std::set<std::string> words(std::string_view text);

// Writes `value` to a cgroup file. Only on a fake tree is the file created.
Status write_value(const std::string& path, std::string_view value, bool fake);
bool exists(const std::string& path);
// A file's text without its trailing newlines; nullopt when unreadable.
std::optional<std::string> read_trimmed(const std::string& path);
// A number as a counter file prints it ("max" is UINT64_MAX); `path` names
// the file in the error.
Result<uint64_t> parse_number(const std::string& path, std::string_view text);
// The text of the cgroup file open at `fd`, read from offset 0 in one pread
// (the kernel prints the file anew for each read from 0).
Result<std::string> pread_text(int fd, const std::string& path);

// One counter file. Kept open, it is opened at its first read and read
// with pread from offset 0 after that; else opened at every read.
class CounterFile {
 public:
  CounterFile(std::string path, bool keep_open) : path_(std::move(path)), keep_open_(keep_open) {}
  // A file holding one number ("max" is UINT64_MAX).
  Result<uint64_t> number() const;
  // The number after `key` in a file of "key N" lines; 0 when the key is absent.
  Result<uint64_t> keyed(std::string_view key) const;

 private:
  Result<std::string> text() const;

  std::string path_;
  bool keep_open_;
  mutable std::once_flag opened_;
  mutable UniqueFd fd_;
  mutable int open_errno_ = 0;
};

// The kept counters of one cgroup: made for the first holder, shared by all
// who hold them at once, closed with the last (only a weak reference stays).
class SharedCounters {
 public:
  template <class Make>
  std::shared_ptr<const CgroupCounters> get(Make make) {
    std::lock_guard lock(mu_);
    if (auto held = held_.lock()) return held;
    std::shared_ptr<const CgroupCounters> fresh = make();
    held_ = fresh;
    return fresh;
  }

 private:
  std::mutex mu_;
  std::weak_ptr<const CgroupCounters> held_;
};

// The peaks of the calls running in one cgroup (Cgroup::start_call_peak),
// each read through a descriptor of its own on `path` and reset by writing
// `reset_text` to it when its call starts. A reset makes the calls already
// running forget the peak they reached: on v1 the counter is one for all,
// and on v2 Linux sets the other descriptors to the usage at the reset, not
// to their peak so far. So each start first reads the running calls' peaks
// and keeps them (only a peak reached and gone in the microseconds between
// that read and the reset is lost). Starts and finishes take one lock per
// cgroup.
class PeakWatch : public std::enable_shared_from_this<PeakWatch> {
 public:
  PeakWatch(std::string path, std::string reset_text, bool fake)
      : path_(std::move(path)), reset_text_(std::move(reset_text)), fake_(fake) {}
  Result<std::shared_ptr<CallPeak>> start();

 private:
  class Call;
  Result<uint64_t> finish(Call* call);
  void forget(Call* call);
  void keep_peaks_so_far();
  Error refused(Error e);

  const std::string path_;
  const std::string reset_text_;
  const bool fake_;
  std::mutex mu_;
  std::vector<Call*> running_;  // each unregisters when finished or dropped
  int refused_errno_ = 0;       // the kernel's refusal, not asked again
};

// Stores a read value into `*out`, or passes its error on.
Status store(uint64_t* out, Result<uint64_t> value);

// Processes listed in any of the dirs' cgroup.procs, sorted; a dir that is
// gone has none.
Result<std::vector<pid_t>> read_procs(const std::vector<std::string>& dirs);
// Signals what `dirs` list (by writing "1" to `kill_file` when not empty, else
// SIGKILL per pid) until cgroup.procs is empty or ~1s passed.
Status kill_until_empty(const std::vector<std::string>& dirs, const std::string& kill_file,
                        bool fake);

// mkdir -p of `rel` (slash-separated) under the existing directory `root`.
Status make_dirs(const std::string& root, const std::string& rel);
// mkdir that fails if the directory exists.
Status make_dir(const std::string& path);
// rmdir, retried on EBUSY for ~1s; ENOENT is success. On a fake tree the
// files inside are deleted first.
Status remove_dir(const std::string& dir, bool fake);
// Removes all `dirs`, last first; returns the first error.
Status remove_dirs(const std::vector<std::string>& dirs, bool fake);

// cpus * period, or nullopt for no limit (cpus <= 0).
std::optional<int64_t> cpu_quota_us(double cpus);

}  // namespace rf::host::cgroup_internal
