// Latency benchmark: p50/p99 over N iterations, all in one run so the peers
// see the same machine load.
//   cold        create a sandbox (all bounds on), exec /bin/true, destroy
//   exec        exec /bin/true in a live sandbox (the exec round trip)
//   probe       a protocol round trip with no process (the runner's floor)
//   pooled      take a warm sandbox from the pool, then its first round trip
//               (pooled: probe; pooled-exec: exec /bin/true), then destroy it
//               off the clock, as a worker does after the call
//   bwrap       bwrap --unshare-all with equivalent mounts, running /bin/true
//   fork+exec   /bin/true, no isolation: the floor
// Usage: rf_bench [--iterations N] [--only NAME] [--steps]
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.h"
#include "native/native_backend.h"
#include "worker/pool.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

using rf::bench::bwrap_args;
using rf::bench::NullSink;
using rf::bench::Stats;
using rf::bench::summarise;

std::vector<double> measure(int n, const std::function<bool()>& once) {
  std::vector<double> us;
  us.reserve(n);
  for (int i = 0; i < n + n / 10; ++i) {  // the first tenth warms up and is dropped
    const auto start = Clock::now();
    if (!once()) {
      std::fprintf(stderr, "iteration failed\n");
      std::exit(1);
    }
    const double d = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    if (i >= n / 10) us.push_back(d);
  }
  return us;
}

bool spawn_and_wait(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid;
  if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return false;
  int status;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  int n = 300;
  std::string only;
  bool steps = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--iterations") && i + 1 < argc)
      n = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--only") && i + 1 < argc)
      only = argv[++i];
    else if (!std::strcmp(argv[i], "--steps"))
      steps = true;
  }
  auto backend =
      rf::native::make_native_backend(rf::native::NativeOptions{RF_RUNNER_PATH, "ringfence-bench"});
  if (!backend) {
    std::fprintf(stderr, "%s\n", backend.error().to_string().c_str());
    return 1;
  }
  rf::SandboxSpec spec;
  rf::ExecCall call;
  call.argv = {"/bin/true"};
  NullSink sink;
  std::map<std::string, std::chrono::nanoseconds> step_total;

  std::vector<std::pair<std::string, std::function<bool()>>> cases;
  std::vector<double> pooled_us;
  // The cold case split in its three phases, to see which one to work on.
  std::vector<double> phase_create, phase_exec, phase_destroy;
  cases.emplace_back("cold", [&] {
    const auto t0 = Clock::now();
    auto sb = (*backend)->create(spec);
    if (!sb) {
      std::fprintf(stderr, "%s\n", sb.error().to_string().c_str());
      return false;
    }
    const auto t1 = Clock::now();
    auto r = (*sb)->exec(call, sink);
    const auto t2 = Clock::now();
    const bool destroyed = (*sb)->destroy().ok();
    const auto t3 = Clock::now();
    auto us = [](auto d) { return std::chrono::duration<double, std::micro>(d).count(); };
    phase_create.push_back(us(t1 - t0));
    phase_exec.push_back(us(t2 - t1));
    phase_destroy.push_back(us(t3 - t2));
    if (steps) {
      for (const auto& t : (*sb)->setup_timings()) step_total[t.step] += t.duration;
    }
    return r.ok() && r->exit_code == 0 && destroyed;
  });
  std::unique_ptr<rf::Sandbox> live;
  auto create_live = [&]() -> std::unique_ptr<rf::Sandbox> {
    auto sb = (*backend)->create(spec);
    if (!sb) return nullptr;
    return std::move(*sb);
  };
  cases.emplace_back("exec", [&] {
    if (!live && !(live = create_live())) return false;
    auto r = live->exec(call, sink);
    return r.ok() && r->exit_code == 0;
  });
  cases.emplace_back("probe", [&] {
    if (!live && !(live = create_live())) return false;
    return live->probe().ok();
  });
  // The pool refills in the background; each iteration waits (off the clock)
  // until a warm sandbox is ready, so this measures a hit, not a refill.
  std::unique_ptr<rf::worker::WarmPool> pool;
  std::vector<std::unique_ptr<rf::Sandbox>> used;
  auto pooled = [&](bool exec_true) {
    if (!pool) {
      pool = std::make_unique<rf::worker::WarmPool>(**backend, spec, 2, 4);
      pool->start();
    }
    for (auto& sb : used) (void)sb->destroy();
    used.clear();
    // A settled pool: full, and the kernel done tearing down the last one.
    if (!pool->wait_ready(2, std::chrono::seconds(10))) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const auto start = Clock::now();
    auto sb = pool->acquire();
    if (!sb) return false;
    const bool ok = exec_true ? (*sb)->exec(call, sink).ok() : (*sb)->probe().ok();
    pooled_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    used.push_back(std::move(*sb));
    return ok;
  };
  cases.emplace_back("pooled", [&] { return pooled(false); });
  cases.emplace_back("pooled-exec", [&] { return pooled(true); });
  const auto bwrap = bwrap_args();
  if (access("/usr/bin/bwrap", X_OK) == 0)
    cases.emplace_back("bwrap", [&] { return spawn_and_wait(bwrap); });
  cases.emplace_back("fork+exec", [&] { return spawn_and_wait({"/bin/true"}); });

  std::printf("%-12s %8s %10s %10s %10s\n", "case", "n", "p50_us", "p99_us", "mean_us");
  std::map<std::string, Stats> results;
  for (auto& [name, fn] : cases) {
    if (!only.empty() && only != name) continue;
    pooled_us.clear();
    auto samples = measure(n, fn);
    // Pooled cases time themselves: waiting for the refill is not the caller's cost.
    if (name.rfind("pooled", 0) == 0)
      samples.assign(pooled_us.end() - static_cast<long>(samples.size()), pooled_us.end());
    const Stats s = summarise(samples);
    results[name] = s;
    std::printf("%-12s %8d %10.0f %10.0f %10.0f\n", name.c_str(), n, s.p50, s.p99, s.mean);
    std::fflush(stdout);
  }
  if (!phase_create.empty()) {
    std::printf("cold phases p50 (us): create %.0f, exec %.0f, destroy %.0f\n",
                summarise(phase_create).p50, summarise(phase_exec).p50,
                summarise(phase_destroy).p50);
  }
  if (results.count("cold") && results.count("bwrap")) {
    std::printf("cold/bwrap p50 ratio: %.2f (target <= 0.60)\n",
                results["cold"].p50 / results["bwrap"].p50);
  }
  if (steps && !step_total.empty()) {
    std::vector<std::pair<double, std::string>> by_time;
    for (const auto& [step, total] : step_total) {
      by_time.emplace_back(std::chrono::duration<double, std::micro>(total).count() / (n + n / 10),
                           step);
    }
    std::sort(by_time.rbegin(), by_time.rend());
    std::printf("\nmean set-up time by step (us), slowest first:\n");
    for (size_t i = 0; i < by_time.size() && i < 25; ++i) {
      std::printf("  %8.1f  %s\n", by_time[i].first, by_time[i].second.c_str());
    }
  }
  return 0;
}
