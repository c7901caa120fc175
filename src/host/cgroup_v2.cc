// cgroup v2: one directory in the unified hierarchy.
#include <fcntl.h>
#include <unistd.h>

#include <sstream>

#include "core/io.h"
#include "core/unique_fd.h"
#include "host/cgroup.h"
#include "host/cgroup_internal.h"

namespace rf::host::cgroup_internal {

namespace {

constexpr char kControllers[] = "+memory +pids +cpu";

std::string limit_or_max(uint64_t value) { return value == 0 ? "max" : std::to_string(value); }

// What a call's result needs besides its peak: OOM kills, pids limit hits.
class V2Counters final : public CgroupCounters {
 public:
  V2Counters(const std::string& dir, bool keep_open)
      : memory_events_(dir + "/memory.events", keep_open),
        pids_events_(dir + "/pids.events", keep_open) {}

  Result<CgroupEvents> read() const override {
    CgroupEvents e;
    RF_TRY(store(&e.oom_kills, memory_events_.keyed("oom_kill")));
    RF_TRY(store(&e.pids_max_hits, pids_events_.keyed("max")));
    return e;
  }

 private:
  CounterFile memory_events_, pids_events_;
};

// The cgroup's peak over its life: memory.peak appeared in Linux 5.19;
// before it, memory.current (tried second: no existence check on the
// kernels that have it).
Result<uint64_t> lifetime_peak(const std::string& dir) {
  auto peak = CounterFile(dir + "/memory.peak", false).number();
  if (!peak && peak.error().sys_errno == ENOENT) {
    peak = CounterFile(dir + "/memory.current", false).number();
  }
  return peak;
}

class CgroupV2 final : public Cgroup {
 public:
  CgroupV2(std::string dir, bool fake, UniqueFd fd)
      : dir_(std::move(dir)),
        fake_(fake),
        fd_(std::move(fd)),
        peaks_(std::make_shared<PeakWatch>(dir_ + "/memory.peak", "reset", fake)) {}

  Status apply(const CgroupLimits& limits) override {
    RF_TRY(set("memory.max", limit_or_max(limits.memory_bytes)));
    if (exists(file("memory.swap.max"))) RF_TRY(set("memory.swap.max", "0"));
    RF_TRY(set("pids.max", limit_or_max(limits.pids)));
    const auto quota = cpu_quota_us(limits.cpus);
    const std::string max = quota ? std::to_string(*quota) : "max";
    return set("cpu.max", max + " " + std::to_string(kCpuPeriodUs));
  }

  Status add_process(pid_t pid) override { return set("cgroup.procs", std::to_string(pid)); }

  int clone_into_fd() const override { return fd_.get(); }

  std::vector<std::string> self_attach_files() const override { return {}; }

  Result<CgroupUsage> usage() const override {
    CgroupUsage u;
    RF_TRY(store(&u.memory_peak_bytes, lifetime_peak(dir_)));
    auto events = V2Counters(dir_, false).read();
    if (!events) return events.take_error();
    u.oom_kills = events->oom_kills;
    u.pids_max_hits = events->pids_max_hits;
    return u;
  }

  std::shared_ptr<const CgroupCounters> hold_counters() const override {
    return held_.get([this] { return std::make_shared<V2Counters>(dir_, !fake_); });
  }

  // Any non-empty write resets a descriptor's peak; "reset" is the word of
  // the kernel's documentation.
  Result<std::shared_ptr<CallPeak>> start_call_peak() const override { return peaks_->start(); }

  Result<std::vector<pid_t>> pids() const override { return read_procs({dir_}); }

  Status kill_all() override {
    // cgroup.kill (Linux 5.14) also catches processes forked while we kill.
    const std::string kill_file = exists(file("cgroup.kill")) ? file("cgroup.kill") : "";
    return kill_until_empty({dir_}, kill_file, fake_);
  }

  Status freeze(bool frozen) override {
    RF_TRY(set("cgroup.freeze", frozen ? "1" : "0"));
    if (fake_) return ok_status();
    // cgroup.events says "frozen 1" once every task stopped; asked again
    // every 100 µs, for at most 5 s.
    const std::string want = frozen ? "frozen 1" : "frozen 0";
    for (int i = 0; i < 50'000; ++i) {
      auto events = read_file(file("cgroup.events"));
      if (events && events->find(want) != std::string::npos) return ok_status();
      ::usleep(100);
    }
    return make_error("freeze " + dir_,
                      "not " + std::string(frozen ? "frozen" : "thawed") + " after 5 s");
  }

  Status remove() override { return remove_dir(dir_, fake_); }

  std::vector<std::string> paths() const override { return {dir_}; }

  std::map<std::string, std::string> limit_files() const override {
    std::map<std::string, std::string> out;
    for (const char* f : {"memory.max", "memory.swap.max", "pids.max", "cpu.max"}) {
      if (auto text = read_trimmed(file(f))) out[f] = *text;
    }
    return out;
  }

 private:
  std::string file(const std::string& name) const { return dir_ + "/" + name; }
  Status set(const std::string& name, std::string_view value) const {
    return write_value(file(name), value, fake_);
  }

  std::string dir_;
  bool fake_;
  UniqueFd fd_;
  mutable SharedCounters held_;  // hold_counters()
  std::shared_ptr<PeakWatch> peaks_;
};

bool has_controllers(const std::string& subtree_control) {
  const std::set<std::string> on = words(subtree_control);
  return on.contains("memory") && on.contains("pids") && on.contains("cpu");
}

Status enable_controllers(const std::string& dir, bool fake) {
  const std::string path = dir + "/cgroup.subtree_control";
  if (auto current = read_file(path); current && has_controllers(*current)) return ok_status();
  return write_value(path, kControllers, fake);
}

// Enables the controllers at the root and at each level of `parent`, so that
// the sandbox directory gets the memory, pids and cpu files.
Status prepare_parent(const std::string& root, const std::string& parent, bool fake) {
  RF_TRY(make_dirs(root, parent));
  RF_TRY(enable_controllers(root, fake));
  std::string dir = root;
  std::istringstream parts(parent);
  for (std::string part; std::getline(parts, part, '/');) {
    if (part.empty()) continue;
    dir += "/" + part;
    RF_TRY(enable_controllers(dir, fake));
  }
  return ok_status();
}

}  // namespace

Result<std::unique_ptr<Cgroup>> open_cgroup_v2(const CgroupLayout& layout,
                                               const std::string& parent, const std::string& name) {
  const std::string dir = layout.v2_root + "/" + parent + "/" + name;
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return sys_error("open " + dir);
  return std::unique_ptr<Cgroup>(std::make_unique<CgroupV2>(dir, layout.fake, std::move(fd)));
}

Result<std::unique_ptr<Cgroup>> create_cgroup_v2(const CgroupLayout& layout,
                                                 const std::string& parent,
                                                 const std::string& name) {
  RF_TRY(prepare_parent(layout.v2_root, parent, layout.fake));
  const std::string dir = layout.v2_root + "/" + parent + "/" + name;
  RF_TRY(make_dir(dir));
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) {
    Error err = sys_error("open " + dir);
    (void)remove_dir(dir, layout.fake);
    return err;
  }
  return std::unique_ptr<Cgroup>(std::make_unique<CgroupV2>(dir, layout.fake, std::move(fd)));
}

}  // namespace rf::host::cgroup_internal
