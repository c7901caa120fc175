// Density (issue 10): how many live per_run sandboxes one worker holds, and
// what each costs. A worker in this process (per_run, no warm pool, a long
// idle timeout) gets one call per run, `/bin/true`, from C client threads;
// each new run makes a sandbox that stays. At each checkpoint it reports:
//   - the worker's fds per sandbox (its /proc/self/fd growth);
//   - host memory per sandbox ("host"): the worker's RSS growth, the janitor's
//     PSS growth, the runners' PSS, the growth of the host's shared memory
//     (the sandboxes' tmpfs files) and of its kernel memory (slab, kernel
//     stacks, page tables, percpu, vmalloc, from /proc/meminfo: namespaces,
//     mounts, cgroups, sockets, whether a cgroup is charged for them or not).
//     Beside it, what the cgroups account ("acct"): the worker's own cgroup
//     growth (its kernel memory, "wcg-km", holds the namespaces made at clone,
//     before the child joins its cgroup) plus the sandboxes' cgroups
//     (memory.usage_in_bytes on v1, memory.current on v2; their kernel memory
//     apart, "sb-km"). Kernel memory no cgroup is charged for (each memory
//     cgroup's shrinker map, for one) is in "host" only. On a shared machine
//     others' work moves the host-wide figures a little;
//   - the first call of a run (create + exec + store round trip), p50/p99,
//     for the calls of the first checkpoint and of this one.
// And, with the clients paused, sandboxes created one at a time beside them
// (create time without the queue and the store, and its slowest steps).
// Then it stops the worker and checks nothing is left: its sandboxes'
// cgroups gone and their runner processes dead.
// Usage: rf_density_bench [--sandboxes N] [--clients C] [--probes K] [--slabs] [--steps]
//   --slabs: at the end, the slab caches that grew most (/proc/slabinfo).
//   --steps: every set-up step of the direct creates, not the slowest four.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.h"
#include "cli/backends.h"
#include "core/io.h"
#include "host/cgroup.h"
#include "native/native_backend.h"
#include "worker/worker.h"

using namespace std::chrono;

namespace {

constexpr double kKiB = 1024.0;

// Fields of a "Name:  N kB" file (/proc/meminfo, smaps_rollup), in KiB.
std::map<std::string, double> kib_fields(const std::string& path) {
  std::map<std::string, double> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    out[line.substr(0, colon)] = std::atof(line.c_str() + colon + 1);
  }
  return out;
}

std::string text_of(const std::string& path) {
  auto text = rf::read_file(path);
  return text ? *text : std::string();
}

double number_in(const std::string& path) {
  auto text = rf::read_file(path);
  return text ? std::atof(text->c_str()) : 0;
}

int count_fds() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (const dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
    ::closedir(d);
  }
  return n - 1;  // the directory itself
}

// The sandboxes' PID 1s still there, zombies included: children of this
// process that are PID 1 of their own PID namespace.
int runner_children() {
  const std::string self = std::to_string(::getpid());
  int n = 0;
  if (DIR* d = ::opendir("/proc")) {
    while (const dirent* e = ::readdir(d)) {
      if (std::atoi(e->d_name) <= 0) continue;
      const std::string status = text_of(std::string("/proc/") + e->d_name + "/status");
      const auto ppid = status.find("\nPPid:\t"), nspid = status.find("\nNSpid:");
      if (ppid == std::string::npos || nspid == std::string::npos) continue;
      const std::string parent = status.substr(ppid + 7, status.find('\n', ppid + 1) - ppid - 7);
      const std::string ns = status.substr(nspid, status.find('\n', nspid + 1) - nspid);
      n += parent == self && ns.ends_with("\t1");
    }
    ::closedir(d);
  }
  return n;
}

pid_t find_janitor() {
  const pid_t self = ::getpid();
  pid_t found = 0;
  if (DIR* d = ::opendir("/proc")) {
    while (const dirent* e = ::readdir(d)) {
      const pid_t pid = std::atoi(e->d_name);
      if (pid <= 0) continue;
      auto stat = rf::read_file("/proc/" + std::to_string(pid) + "/stat");
      if (!stat || stat->find("(rf-janitor)") == std::string::npos) continue;
      const auto close = stat->rfind(')');
      if (std::atoi(stat->c_str() + close + 4) == self) found = pid;
    }
    ::closedir(d);
  }
  return found;
}

// Bytes per slab cache (/proc/slabinfo: active objects times object size).
std::map<std::string, double> slab_bytes() {
  std::map<std::string, double> out;
  std::ifstream in("/proc/slabinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line.starts_with("slabinfo")) continue;
    std::istringstream f(line);
    std::string name;
    double active = 0, total = 0, size = 0;
    f >> name >> active >> total >> size;
    out[name] = total * size;
  }
  return out;
}

// The memory cgroup this process is in, as a directory ("" when unknown).
std::string own_memory_cgroup(const rf::host::CgroupLayout& layout) {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    const auto a = line.find(':'), b = line.find(':', a + 1);
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const std::string path = line.substr(b + 1);
    if (layout.version == rf::host::CgroupVersion::kV2 && controllers.empty())
      return layout.v2_root + path;
    if (layout.version == rf::host::CgroupVersion::kV1 && controllers == "memory")
      return layout.v1_mounts.at("memory") + path;
  }
  return "";
}

struct Snapshot {
  int fds = 0;
  double worker_rss = 0, janitor_pss = 0;
  double worker_cg = 0, worker_cg_kmem = 0;  // the worker's own memory cgroup
  double runner_pss = 0, runner_rss = 0;
  double sandbox_cg = 0, sandbox_cg_kmem = 0;  // sum over the sandboxes' cgroups
  double mem_used = 0;                         // MemTotal - MemAvailable
  std::map<std::string, double> meminfo;
  size_t runners = 0;
};

class Probe {
 public:
  Probe() {
    auto layout = rf::host::detect_cgroup_layout();
    if (!layout) {
      std::fprintf(stderr, "%s\n", layout.error().to_string().c_str());
      std::exit(1);
    }
    layout_ = *layout;
    own_cg_ = own_memory_cgroup(layout_);
    v1_ = layout_.version == rf::host::CgroupVersion::kV1;
  }
  const std::string& own_cgroup() const { return own_cg_; }

  Snapshot take(const std::vector<std::string>& sandbox_ids) const {
    Snapshot s;
    s.fds = count_fds();
    s.worker_rss = kib_fields("/proc/self/status")["VmRSS"];
    if (const pid_t j = find_janitor())
      s.janitor_pss = kib_fields("/proc/" + std::to_string(j) + "/smaps_rollup")["Pss"];
    if (!own_cg_.empty()) {
      if (v1_) {
        s.worker_cg = number_in(own_cg_ + "/memory.usage_in_bytes") / kKiB;
        s.worker_cg_kmem = number_in(own_cg_ + "/memory.kmem.usage_in_bytes") / kKiB;
      } else {
        s.worker_cg = number_in(own_cg_ + "/memory.current") / kKiB;
        s.worker_cg_kmem = v2_kernel(own_cg_);
      }
    }
    for (const auto& id : sandbox_ids) {
      const std::string dir = memory_dir(id);
      if (v1_) {
        s.sandbox_cg += number_in(dir + "/memory.usage_in_bytes") / kKiB;
        s.sandbox_cg_kmem += number_in(dir + "/memory.kmem.usage_in_bytes") / kKiB;
      } else {
        s.sandbox_cg += number_in(dir + "/memory.current") / kKiB;
        s.sandbox_cg_kmem += v2_kernel(dir);
      }
      std::istringstream procs(text_of(dir + "/cgroup.procs"));
      for (pid_t pid; procs >> pid;) {
        auto m = kib_fields("/proc/" + std::to_string(pid) + "/smaps_rollup");
        s.runner_pss += m["Pss"];
        s.runner_rss += m["Rss"];
        ++s.runners;
      }
    }
    s.meminfo = kib_fields("/proc/meminfo");
    s.mem_used = s.meminfo["MemTotal"] - s.meminfo["MemAvailable"];
    return s;
  }

  // Unreclaimable slab one more (empty) memory cgroup takes, from 64 made and
  // removed: mostly its shrinker map, which has a slot for every superblock
  // the host ever had at once (a high-water mark, kept until reboot).
  double empty_memcg_kib() const {
    constexpr int kCount = 64;
    const std::string parent =
        (v1_ ? layout_.v1_mounts.at("memory") : layout_.v2_root) + "/ringfence-density-probe";
    if (::mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST) return 0;
    const double before = kib_fields("/proc/meminfo")["SUnreclaim"];
    int made = 0;
    for (int i = 0; i < kCount; ++i)
      made += ::mkdir((parent + "/" + std::to_string(i)).c_str(), 0755) == 0;
    const double after = kib_fields("/proc/meminfo")["SUnreclaim"];
    for (int i = 0; i < kCount; ++i) ::rmdir((parent + "/" + std::to_string(i)).c_str());
    ::rmdir(parent.c_str());
    return made > 0 ? (after - before) / made : 0;
  }

  // Directories of these sandboxes' cgroups that still exist.
  int left_over(const std::vector<std::string>& ids) const {
    int n = 0;
    for (const auto& id : ids) {
      if (v1_) {
        for (const auto& [_, mount] : layout_.v1_mounts)
          n += ::access((mount + "/ringfence/" + id).c_str(), F_OK) == 0;
      } else {
        n += ::access(memory_dir(id).c_str(), F_OK) == 0;
      }
    }
    return n;
  }

 private:
  std::string memory_dir(const std::string& id) const {
    return (v1_ ? layout_.v1_mounts.at("memory") : layout_.v2_root) + "/ringfence/" + id;
  }
  static double v2_kernel(const std::string& dir) {
    std::istringstream in(text_of(dir + "/memory.stat"));
    std::string key;
    double v = 0;
    while (in >> key >> v) {
      if (key == "kernel") return v / kKiB;
    }
    return 0;
  }

  rf::host::CgroupLayout layout_;
  std::string own_cg_;
  bool v1_ = true;
};

// Runs calls [from, to) of runs "d-<i>" with `clients` threads; returns each
// call's latency in µs (enqueue to done), and counts failures.
std::vector<double> make_runs(const std::string& state, int from, int to, int clients,
                              std::atomic<int>* failed) {
  std::vector<double> us(static_cast<size_t>(to - from));
  std::atomic<int> next{from};
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      auto s = rf::store::Store::open(rf::worker::store_path(state));
      if (!s) std::abort();
      for (int i; (i = next++) < to;) {
        rf::store::NewCall call;
        call.project = "density";
        call.run = "d-" + std::to_string(i);
        call.argv = {"/bin/true"};
        const auto start = steady_clock::now();
        auto id = (*s)->enqueue_call(call);
        if (!id) std::abort();
        for (;;) {
          const uint32_t seen = (*s)->call_version(*id);
          auto v = (*s)->call(*id);
          if (v && v->state == rf::store::CallState::done) break;
          if (v && (v->state == rf::store::CallState::failed ||
                    v->state == rf::store::CallState::interrupted)) {
            if ((*failed)++ < 5)
              std::fprintf(stderr, "call %d failed: %s\n", i, v->error.value_or("?").c_str());
            break;
          }
          (*s)->wait_for_call(*id, seen, milliseconds(200));
        }
        us[static_cast<size_t>(i - from)] =
            duration<double, std::micro>(steady_clock::now() - start).count();
      }
    });
  }
  for (auto& t : threads) t.join();
  return us;
}

// Sandboxes created and destroyed one at a time by a backend in this process
// (so with the worker's fd table and the host's N live sandboxes around it):
// create time without the store and the worker's queue. Returns create µs,
// and adds each step's time to `steps`.
std::vector<double> probe_creates(rf::Backend& backend, int count,
                                  std::map<std::string, double>* steps) {
  std::vector<double> us;
  for (int i = 0; i < count; ++i) {
    const auto start = steady_clock::now();
    auto sb = backend.create(rf::SandboxSpec{});
    if (!sb) {
      std::fprintf(stderr, "probe create: %s\n", sb.error().to_string().c_str());
      continue;
    }
    us.push_back(duration<double, std::micro>(steady_clock::now() - start).count());
    for (const auto& t : (*sb)->setup_timings())
      (*steps)[t.step] += duration<double, std::micro>(t.duration).count() / count;
    (void)(*sb)->destroy();
  }
  return us;
}

std::string top_steps(const std::map<std::string, double>& steps, size_t count) {
  std::vector<std::pair<double, std::string>> by_time;
  for (const auto& [name, t] : steps) by_time.emplace_back(t, name);
  std::sort(by_time.rbegin(), by_time.rend());
  std::string out;
  for (size_t i = 0; i < by_time.size() && i < count; ++i) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "%s%s %.0f", out.empty() ? "" : ", ", by_time[i].second.c_str(),
                  by_time[i].first);
    out += buf;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int sandboxes = 2000, clients = 8, probes = 20;
  bool slabs = false, all_steps = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--sandboxes") && i + 1 < argc) sandboxes = std::atoi(argv[++i]);
    if (!std::strcmp(argv[i], "--clients") && i + 1 < argc) clients = std::atoi(argv[++i]);
    if (!std::strcmp(argv[i], "--probes") && i + 1 < argc) probes = std::atoi(argv[++i]);
    if (!std::strcmp(argv[i], "--slabs")) slabs = true;
    if (!std::strcmp(argv[i], "--steps")) all_steps = true;
  }
  ::setenv("RINGFENCE_TOOL_RUNNER", RF_RUNNER_PATH, 0);  // the runner is not next to this binary
  char tmpl[] = "/tmp/rf-density-XXXXXX";
  const std::string state = mkdtemp(tmpl);
  auto settings = rf::worker::default_settings("/nonexistent");
  settings.state_dir.value = state;
  settings.mode.value = rf::worker::SandboxMode::kPerRun;
  settings.pool_target.value = 0;  // every sandbox made on its run's first call, and timed there
  settings.idle_timeout.value = hours(1);
  auto placement = rf::cli::place_worker(settings);
  if (!placement) {
    std::fprintf(stderr, "%s\n", placement.error().to_string().c_str());
    return 1;
  }
  rf::worker::WorkerOptions options;
  options.settings = settings;
  options.concurrency = clients;
  auto worker = rf::worker::Worker::start(options, std::move(*placement));
  if (!worker) {
    std::fprintf(stderr, "%s\n", worker.error().to_string().c_str());
    return 1;
  }
  auto store = rf::store::Store::open(rf::worker::store_path(state));
  (void)(*store)->ensure_project("density", rf::store::Environment::development);
  const Probe probe;
  rf::native::NativeOptions native;
  native.runner_path = RF_RUNNER_PATH;
  auto direct = rf::native::make_native_backend(native);
  if (!direct) {
    std::fprintf(stderr, "%s\n", direct.error().to_string().c_str());
    return 1;
  }
  std::printf("worker cgroup: %s\n", probe.own_cgroup().c_str());
  const Snapshot base = probe.take({});
  const auto base_slabs = slab_bytes();

  std::vector<int> checkpoints;
  for (int c : {100, 250, 500, 1000, 1500, 2000, 3000, 4000}) {
    if (c < sandboxes) checkpoints.push_back(c);
  }
  checkpoints.push_back(sandboxes);
  std::printf("an empty memory cgroup costs %.0f KiB of unreclaimable kernel memory here now\n",
              probe.empty_memcg_kib());
  std::printf("%6s %6s %6s | %6s %6s %6s %6s %6s %6s | %6s %6s %6s %6s | %7s %7s %7s %7s\n", "live",
              "fds/sb", "failed", "host", "worker", "jan", "runner", "shmem", "kernel", "acct",
              "wcg-km", "sb-cg", "sb-km", "first50", "first99", "last50", "last99");
  std::printf("%6s %6s %6s | %41s | %27s | %31s\n", "", "", "",
              "host memory per sandbox, KiB (see top)", "cgroup-accounted, KiB/sb",
              "first call of a run, ms");
  std::atomic<int> failed{0};
  std::vector<double> first;
  int made = 0;
  std::vector<std::string> ids;
  for (int target : checkpoints) {
    const auto us = make_runs(state, made, target, clients, &failed);
    if (first.empty()) first = us;
    made = target;
    std::this_thread::sleep_for(milliseconds(500));  // the ledger writes the sandbox rows
    ids.clear();
    if (auto rows = (*store)->live_sandboxes()) {
      for (const auto& r : *rows) ids.push_back(r.id);
    }
    const Snapshot now = probe.take(ids);
    const double n = static_cast<double>(ids.size());
    const auto d = [&](double a, double b) { return n > 0 ? (a - b) / n : 0; };
    const auto dm = [&](const char* k) { return d(now.meminfo.at(k), base.meminfo.at(k)); };
    const double kernel = dm("SUnreclaim") + dm("SReclaimable") + dm("KernelStack") +
                          dm("PageTables") + dm("Percpu") + dm("VmallocUsed");
    const double worker_rss = d(now.worker_rss, base.worker_rss);
    const double janitor = d(now.janitor_pss, base.janitor_pss);
    const double host = worker_rss + janitor + now.runner_pss / n + dm("Shmem") + kernel;
    const double accounted = d(now.worker_cg, base.worker_cg) + now.sandbox_cg / n;
    const auto f = rf::bench::summarise(first), l = rf::bench::summarise(us);
    std::printf(
        "%6zu %6.2f %6d | %6.0f %6.0f %6.1f %6.0f %6.0f %6.0f | %6.0f %6.0f %6.0f %6.0f | %7.1f "
        "%7.1f %7.1f %7.1f\n",
        ids.size(), d(now.fds, base.fds), failed.load(), host, worker_rss, janitor,
        now.runner_pss / n, dm("Shmem"), kernel, accounted,
        d(now.worker_cg_kmem, base.worker_cg_kmem), now.sandbox_cg / n, now.sandbox_cg_kmem / n,
        f.p50 / 1000, f.p99 / 1000, l.p50 / 1000, l.p99 / 1000);
    std::printf("%6s kernel, KiB/sb:", "");
    for (const char* k :
         {"SUnreclaim", "SReclaimable", "KernelStack", "PageTables", "Percpu", "VmallocUsed"}) {
      std::printf(" %s %.0f", k, dm(k));
    }
    std::printf("; MemAvailable fell %.0f KiB/sb (noisy on a shared machine)\n",
                d(now.mem_used, base.mem_used));
    if (slabs && target == sandboxes) {
      std::vector<std::pair<double, std::string>> grew;
      for (const auto& [name, bytes] : slab_bytes()) {
        const auto was = base_slabs.find(name);
        grew.emplace_back((bytes - (was == base_slabs.end() ? 0 : was->second)) / kKiB / n, name);
      }
      std::sort(grew.rbegin(), grew.rend());
      std::printf("%6s slab caches that grew most, KiB per sandbox:", "");
      for (size_t i = 0; i < grew.size() && i < 16; ++i)
        std::printf(" %s %.1f", grew[i].second.c_str(), grew[i].first);
      std::printf("\n");
    }
    std::map<std::string, double> steps;
    const auto direct_us = probe_creates(**direct, probes, &steps);
    if (!direct_us.empty()) {
      const auto c = rf::bench::summarise(direct_us);
      std::printf(
          "%6s direct create at %zu live: p50 %.2f ms, p99 %.2f ms; slowest steps (µs): %s\n", "",
          ids.size(), c.p50 / 1000, c.p99 / 1000,
          top_steps(steps, all_steps ? steps.size() : 4).c_str());
    }
    std::fflush(stdout);
    if (static_cast<int>(ids.size()) != target) {
      std::fprintf(stderr, "expected %d live sandboxes, the store lists %zu\n", target, ids.size());
    }
  }
  const auto stop_start = steady_clock::now();
  (*worker)->stop();
  const double stop_s = duration<double>(steady_clock::now() - stop_start).count();
  worker->reset();
  const int runners_alive = runner_children();
  std::printf("stopped in %.2f s: of %zu sandboxes, %d cgroup dirs and %d runners left\n", stop_s,
              ids.size(), probe.left_over(ids), runners_alive);
  std::printf("an empty memory cgroup costs %.0f KiB of unreclaimable kernel memory here now\n",
              probe.empty_memcg_kib());
  store->reset();
  std::system(("rm -rf " + state).c_str());
  return failed.load() == 0 && runners_alive == 0 ? 0 : 1;
}
