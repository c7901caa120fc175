// rf_docker_bench: the docker backend against `docker run --rm` of the same
// image, in one run (docs/PERFORMANCE.md, issue 5).
//
//   cold        create + exec /bin/true + destroy, through the Engine API
//   docker-run  `docker -H URL run --rm --network none --read-only IMAGE true`
//   exec        one call's round trip in a live sandbox
//   probe       a protocol round trip that starts no process
//   pooled-exec take a warm sandbox from the pool + one call's round trip
//
// Usage: rf_docker_bench --docker-host URL --image IMAGE [--iterations N]
//                        [--only NAME] [--docker-cli PATH] [--steps]
#include <fcntl.h>
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
#include "docker/docker_backend.h"
#include "worker/pool.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

using rf::bench::NullSink;
using rf::bench::Stats;
using rf::bench::summarise;

bool spawn_and_wait(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return false;
  int status;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  int n = 50;
  std::string only, host, image, cli = "/usr/bin/docker";
  bool steps = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--iterations") && i + 1 < argc)
      n = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--only") && i + 1 < argc)
      only = argv[++i];
    else if (!std::strcmp(argv[i], "--docker-host") && i + 1 < argc)
      host = argv[++i];
    else if (!std::strcmp(argv[i], "--image") && i + 1 < argc)
      image = argv[++i];
    else if (!std::strcmp(argv[i], "--docker-cli") && i + 1 < argc)
      cli = argv[++i];
    else if (!std::strcmp(argv[i], "--steps"))
      steps = true;
    else {
      std::fprintf(stderr,
                   "usage: rf_docker_bench --docker-host URL --image IMAGE "
                   "[--iterations N] [--only NAME] [--docker-cli PATH] [--steps]\n");
      return 2;
    }
  }
  if (host.empty() || image.empty()) {
    std::fprintf(stderr, "rf_docker_bench: --docker-host and --image are required\n");
    return 2;
  }
  rf::docker::DockerOptions options;
  options.host_url = host;
  options.runner_path = RF_RUNNER_PATH;
  options.allow_pull = false;
  auto backend = rf::docker::make_docker_backend(options);
  if (!backend) {
    std::fprintf(stderr, "%s\n", backend.error().to_string().c_str());
    return 1;
  }
  rf::SandboxSpec spec;
  spec.backend = rf::BackendKind::kDocker;
  spec.image = image;
  rf::ExecCall call;
  call.argv = {"/bin/true"};
  NullSink sink;
  std::map<std::string, std::chrono::nanoseconds> step_total;
  std::vector<double> timed;  // cases that time themselves put their figure here
  struct Case {
    std::string name;
    std::function<bool()> fn;
  };
  std::vector<Case> cases;

  cases.push_back({"cold", [&] {
                     auto sb = (*backend)->create(spec);
                     if (!sb) {
                       std::fprintf(stderr, "%s\n", sb.error().to_string().c_str());
                       return false;
                     }
                     auto r = (*sb)->exec(call, sink);
                     if (steps) {
                       for (const auto& t : (*sb)->setup_timings())
                         step_total[t.step] += t.duration;
                     }
                     return r.ok() && r->exit_code == 0 && (*sb)->destroy().ok();
                   }});
  const std::vector<std::string> docker_run = {
      cli, "-H", host, "run", "--rm", "--network", "none", "--read-only", image, "/bin/true"};
  cases.push_back({"docker-run", [&] { return spawn_and_wait(docker_run); }});
  std::unique_ptr<rf::Sandbox> live;
  cases.push_back({"exec", [&] {
                     if (!live) {
                       auto sb = (*backend)->create(spec);
                       if (!sb) return false;
                       live = std::move(*sb);
                     }
                     auto r = live->exec(call, sink);
                     return r.ok() && r->exit_code == 0;
                   }});
  cases.push_back({"probe", [&] {
                     if (!live) {
                       auto sb = (*backend)->create(spec);
                       if (!sb) return false;
                       live = std::move(*sb);
                     }
                     return live->probe().ok();
                   }});
  std::unique_ptr<rf::worker::WarmPool> pool;
  std::vector<std::unique_ptr<rf::Sandbox>> used;
  cases.push_back({"pooled-exec", [&] {
                     if (!pool) {
                       pool = std::make_unique<rf::worker::WarmPool>(**backend, spec, 2, 4);
                       pool->start();
                     }
                     for (auto& sb : used) (void)sb->destroy();
                     used.clear();
                     // A hit, not a refill: wait off the clock until the pool is full.
                     if (!pool->wait_ready(2, std::chrono::seconds(30))) return false;
                     const auto start = Clock::now();
                     auto sb = pool->acquire();
                     if (!sb) return false;
                     auto r = (*sb)->exec(call, sink);
                     timed.push_back(
                         std::chrono::duration<double, std::micro>(Clock::now() - start).count());
                     used.push_back(std::move(*sb));
                     return r.ok() && r->exit_code == 0;
                   }});

  std::printf("%-12s %8s %10s %10s %10s\n", "case", "n", "p50_us", "p99_us", "mean_us");
  std::map<std::string, Stats> results;
  for (auto& [name, fn] : cases) {
    if (!only.empty() && only != name) continue;
    timed.clear();
    std::vector<double> us;
    for (int i = 0; i < n + n / 10; ++i) {  // the first tenth warms up and is dropped
      const auto start = Clock::now();
      if (!fn()) {
        std::fprintf(stderr, "%s: iteration failed\n", name.c_str());
        return 1;
      }
      const double d = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
      if (i >= n / 10) us.push_back(d);
    }
    if (!timed.empty()) us.assign(timed.end() - static_cast<long>(us.size()), timed.end());
    const Stats s = summarise(us);
    results[name] = s;
    std::printf("%-12s %8d %10.0f %10.0f %10.0f\n", name.c_str(), n, s.p50, s.p99, s.mean);
    std::fflush(stdout);
  }
  if (live) (void)live->destroy();
  for (auto& sb : used) (void)sb->destroy();
  pool.reset();
  if (results.count("cold") && results.count("docker-run")) {
    std::printf("cold/docker-run p50 ratio: %.2f (target <= 1.00)\n",
                results["cold"].p50 / results["docker-run"].p50);
  }
  if (results.count("pooled-exec")) {
    std::printf("pooled-exec p50: %.1f ms (target <= 15 ms)\n", results["pooled-exec"].p50 / 1000);
  }
  if (steps && !step_total.empty()) {
    std::vector<std::pair<double, std::string>> by_time;
    for (const auto& [step, total] : step_total) {
      by_time.emplace_back(std::chrono::duration<double, std::micro>(total).count() / (n + n / 10),
                           step);
    }
    std::sort(by_time.rbegin(), by_time.rend());
    std::printf("\nmean set-up time by step (us), slowest first:\n");
    for (const auto& [us, step] : by_time) std::printf("  %8.1f  %s\n", us, step.c_str());
  }
  return 0;
}
