// cgroup v1: one directory per controller hierarchy (co-mounted controllers,
// e.g. "cpu,cpuacct", share one).
#include <unistd.h>

#include <algorithm>
#include <map>

#include "host/cgroup.h"
#include "host/cgroup_internal.h"

namespace rf::host::cgroup_internal {

namespace {

// What a call's result needs besides its peak: OOM kills, pids limit hits.
class V1Counters final : public CgroupCounters {
 public:
  V1Counters(const std::string& memory_dir, const std::string& pids_dir, bool keep_open)
      : oom_control_(memory_dir + "/memory.oom_control", keep_open),
        pids_events_(pids_dir + "/pids.events", keep_open) {}

  Result<CgroupEvents> read() const override {
    CgroupEvents e;
    RF_TRY(store(&e.oom_kills, oom_control_.keyed("oom_kill")));
    RF_TRY(store(&e.pids_max_hits, pids_events_.keyed("max")));
    return e;
  }

 private:
  CounterFile oom_control_, pids_events_;
};

class CgroupV1 final : public Cgroup {
 public:
  // `dir_of`: controller -> its directory; `dirs`: the distinct ones, in creation order.
  // `made`: by create_cgroup, so its peak counter is ours to reset.
  CgroupV1(std::map<std::string, std::string> dir_of, std::vector<std::string> dirs, bool fake,
           bool made)
      : dir_of_(std::move(dir_of)), dirs_(std::move(dirs)), fake_(fake) {
    if (made) {
      peaks_ = std::make_shared<PeakWatch>(dir_or_missing("memory") + "/memory.max_usage_in_bytes",
                                           "0", fake);
    }
  }

  Status apply(const CgroupLimits& limits) override {
    RF_TRY(apply_memory(limits.memory_bytes));
    RF_TRY(set("pids", "pids.max", limits.pids == 0 ? "max" : std::to_string(limits.pids)));
    RF_TRY(set("cpu", "cpu.cfs_period_us", std::to_string(kCpuPeriodUs)));
    const auto quota = cpu_quota_us(limits.cpus);
    return set("cpu", "cpu.cfs_quota_us", std::to_string(quota ? *quota : -1));
  }

  Status add_process(pid_t pid) override {
    for (const auto& dir : dirs_) {
      RF_TRY(write_value(dir + "/cgroup.procs", std::to_string(pid), fake_));
    }
    return ok_status();
  }

  int clone_into_fd() const override { return -1; }

  std::vector<std::string> self_attach_files() const override {
    std::vector<std::string> files;
    for (const auto& dir : dirs_) files.push_back(dir + "/tasks");
    return files;
  }

  Result<CgroupUsage> usage() const override {
    CgroupUsage u;
    CounterFile peak(dir_or_missing("memory") + "/memory.max_usage_in_bytes", false);
    RF_TRY(store(&u.memory_peak_bytes, peak.number()));
    auto events = V1Counters(dir_or_missing("memory"), dir_or_missing("pids"), false).read();
    if (!events) return events.take_error();
    u.oom_kills = events->oom_kills;
    u.pids_max_hits = events->pids_max_hits;
    return u;
  }

  std::shared_ptr<const CgroupCounters> hold_counters() const override {
    return held_.get([this] {
      return std::make_shared<V1Counters>(dir_or_missing("memory"), dir_or_missing("pids"), !fake_);
    });
  }

  Result<std::shared_ptr<CallPeak>> start_call_peak() const override {
    if (!peaks_) {
      return make_error("cgroup v1 peak memory",
                        "memory.max_usage_in_bytes is one counter for every reader of a cgroup "
                        "found, not made here: not reset");
    }
    return peaks_->start();
  }

  Result<std::vector<pid_t>> pids() const override { return read_procs(dirs_); }

  Status kill_all() override {
    // A frozen task takes SIGKILL only once thawed: thawed first.
    if (dir_of_.count("freezer") != 0 && exists(dir_of_.at("freezer") + "/freezer.state")) {
      (void)write_value(dir_of_.at("freezer") + "/freezer.state", "THAWED", fake_);
    }
    return kill_until_empty(dirs_, "", fake_);
  }

  Status freeze(bool frozen) override {
    const auto it = dir_of_.find("freezer");
    if (it == dir_of_.end()) {
      return make_error("freeze", "cgroup v1's freezer is not mounted on this host");
    }
    const std::string state = it->second + "/freezer.state";
    const char* want = frozen ? "FROZEN" : "THAWED";
    RF_TRY(write_value(state, want, fake_));
    if (fake_) return ok_status();
    // FREEZING until every task stopped (one in uninterruptible sleep may
    // take a while): asked again every 100 µs, for at most 5 s.
    for (int i = 0; i < 50'000; ++i) {
      auto now = read_trimmed(state);
      if (now && *now == want) return ok_status();
      if (frozen && now && *now == "THAWED") RF_TRY(write_value(state, want, fake_));
      ::usleep(100);
    }
    return make_error("freeze " + it->second, std::string("not ") + want + " after 5 s");
  }

  Status remove() override { return remove_dirs(dirs_, fake_); }

  std::vector<std::string> paths() const override { return dirs_; }

 private:
  std::map<std::string, std::string> limit_files() const override {
    std::map<std::string, std::string> out;
    for (const auto& [controller, f] : {std::pair{"memory", "memory.limit_in_bytes"},
                                        {"memory", "memory.memsw.limit_in_bytes"},
                                        {"pids", "pids.max"},
                                        {"cpu", "cpu.cfs_quota_us"},
                                        {"cpu", "cpu.cfs_period_us"}}) {
      if (dir_of_.count(controller) == 0) continue;
      if (auto text = read_trimmed(file(controller, f))) out[f] = *text;
    }
    return out;
  }

  std::string file(const std::string& controller, const std::string& name) const {
    return dir_of_.at(controller) + "/" + name;
  }
  // A controller's directory; a missing hierarchy (a cgroup opened as found)
  // gives paths that fail to open, naming it.
  std::string dir_or_missing(const std::string& controller) const {
    auto it = dir_of_.find(controller);
    return it != dir_of_.end() ? it->second : "(no " + controller + " hierarchy)";
  }
  Status set(const std::string& controller, const std::string& name, std::string_view value) const {
    return write_value(file(controller, name), value, fake_);
  }

  // memory.memsw.limit_in_bytes (memory + swap) may never be below
  // memory.limit_in_bytes, so it is written both before the memory limit (where
  // a raise gets through) and after it (where a cut does). Without swap
  // accounting the file is missing.
  Status apply_memory(uint64_t bytes) const {
    const std::string value = bytes == 0 ? "-1" : std::to_string(bytes);
    const std::string memsw = "memory.memsw.limit_in_bytes";
    const bool has_memsw = exists(file("memory", memsw));
    if (has_memsw) RF_TRY(set_memsw(value));
    RF_TRY(set("memory", "memory.limit_in_bytes", value));
    if (has_memsw) RF_TRY(set_memsw(value));
    return ok_status();
  }

  Status set_memsw(const std::string& value) const {
    auto s = set("memory", "memory.memsw.limit_in_bytes", value);
    if (!s && (s.error().sys_errno == EINVAL || s.error().sys_errno == ENOENT)) {
      return ok_status();
    }
    return s;
  }

  std::map<std::string, std::string> dir_of_;
  std::vector<std::string> dirs_;
  bool fake_;
  mutable SharedCounters held_;       // hold_counters()
  std::shared_ptr<PeakWatch> peaks_;  // null in a cgroup found, not made
};

// Creates `<mount>/<parent>/<name>` for `controller` unless a co-mounted
// controller already did; appends what it made to `made`.
Result<std::string> make_controller_dir(const CgroupLayout& layout, const char* controller,
                                        const std::string& parent, const std::string& name,
                                        std::vector<std::string>* made) {
  const auto mount = layout.v1_mounts.find(controller);
  if (mount == layout.v1_mounts.end()) {
    return make_error("cgroup v1", std::string(controller) + " not mounted");
  }
  const std::string dir = mount->second + "/" + parent + "/" + name;
  if (std::find(made->begin(), made->end(), dir) != made->end()) return dir;
  RF_TRY(make_dirs(mount->second, parent));
  RF_TRY(make_dir(dir));
  made->push_back(dir);
  return dir;
}

}  // namespace

Result<std::unique_ptr<Cgroup>> open_cgroup_v1(const CgroupLayout& layout,
                                               const std::string& parent, const std::string& name) {
  std::map<std::string, std::string> dir_of;
  std::vector<std::string> dirs;
  std::vector<const char*> controllers(std::begin(kV1Controllers), std::end(kV1Controllers));
  controllers.insert(controllers.end(), std::begin(kV1Optional), std::end(kV1Optional));
  for (const char* controller : controllers) {
    const auto mount = layout.v1_mounts.find(controller);
    if (mount == layout.v1_mounts.end()) continue;
    const std::string dir = mount->second + "/" + parent + "/" + name;
    dir_of[controller] = dir;
    if (exists(dir) && std::find(dirs.begin(), dirs.end(), dir) == dirs.end()) dirs.push_back(dir);
  }
  if (dirs.empty()) return make_error("cgroup " + parent + "/" + name, "does not exist");
  return std::unique_ptr<Cgroup>(
      std::make_unique<CgroupV1>(std::move(dir_of), std::move(dirs), layout.fake, false));
}

Result<std::unique_ptr<Cgroup>> create_cgroup_v1(const CgroupLayout& layout,
                                                 const std::string& parent,
                                                 const std::string& name) {
  std::map<std::string, std::string> dir_of;
  std::vector<std::string> made;
  for (const char* controller : kV1Controllers) {
    auto dir = make_controller_dir(layout, controller, parent, name, &made);
    if (!dir) {
      (void)remove_dirs(made, layout.fake);
      return dir.take_error();
    }
    dir_of[controller] = *dir;
  }
  for (const char* controller : kV1Optional) {
    if (layout.v1_mounts.count(controller) == 0) continue;
    auto dir = make_controller_dir(layout, controller, parent, name, &made);
    if (!dir) {
      (void)remove_dirs(made, layout.fake);
      return dir.take_error();
    }
    dir_of[controller] = *dir;
  }
  return std::unique_ptr<Cgroup>(
      std::make_unique<CgroupV1>(std::move(dir_of), std::move(made), layout.fake, true));
}

}  // namespace rf::host::cgroup_internal
