// Worker throughput: calls per second sustained through a worker (store,
// claim, sandbox, exec, output, result) with 1, 8 and 64 concurrent clients,
// in per_tool and per_run modes, running /bin/true.
// --workers W runs W workers, each in a process of its own with a state dir
// of its own (as on W hosts: its own store connections and, on PostgreSQL,
// its own listening connection), sharing one store; the clients are threads
// of this process (as behind one `serve`); --store-engine postgres runs them on
// a PostgreSQL cluster the bench starts (tests/support/postgres_server.h), and
// both runs the two engines side by side (issue 16). Also the claim wait of
// each call (enqueued to claimed, the store's ms clock): p50, p99.
// Usage: rf_worker_bench [--calls N] [--mode per_tool|per_run] [--clients C]
//                        [--workers W] [--store-engine sqlite|postgres|both]
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "bench_support.h"
#include "cli/backends.h"
#include "store/postgres.h"
#include "support/postgres_server.h"
#include "worker/worker.h"

using namespace std::chrono;

namespace {

struct Figures {
  double calls_per_s = 0;
  // Enqueued to claimed by a worker, in ms of the store's clock (whole ms).
  rf::bench::Stats claim_wait_ms{};
};

// A worker in a child process: started, then stopped when `stop_fd` closes.
struct WorkerProcess {
  pid_t pid = -1;
  int stop_fd = -1;
};

// Forks before this process has threads of its own (the clients come after).
// `others`: the workers started before, whose stop pipes the child must not hold.
std::optional<WorkerProcess> start_worker_process(const rf::worker::WorkerSettings& s,
                                                  const rf::worker::WorkerOptions& o,
                                                  const std::vector<WorkerProcess>& others) {
  int ready[2], stop[2];
  if (::pipe2(ready, O_CLOEXEC) != 0 || ::pipe2(stop, O_CLOEXEC) != 0) return std::nullopt;
  const pid_t pid = ::fork();
  if (pid < 0) return std::nullopt;
  if (pid == 0) {
    ::close(ready[0]);
    ::close(stop[1]);
    for (const auto& other : others) ::close(other.stop_fd);
    auto placement = rf::cli::place_worker(s);
    if (!placement) {
      std::fprintf(stderr, "%s\n", placement.error().to_string().c_str());
      ::_exit(1);
    }
    auto w = rf::worker::Worker::start(o, std::move(*placement));
    if (!w) {
      std::fprintf(stderr, "%s\n", w.error().to_string().c_str());
      ::_exit(1);
    }
    const char up = 1;
    (void)!::write(ready[1], &up, 1);
    char b;
    while (::read(stop[0], &b, 1) < 0 && errno == EINTR) {
    }
    (*w)->stop();
    w->reset();
    ::_exit(0);
  }
  ::close(ready[1]);
  ::close(stop[0]);
  char b = 0;
  ssize_t n;
  while ((n = ::read(ready[0], &b, 1)) < 0 && errno == EINTR) {
  }
  ::close(ready[0]);
  if (n != 1) {
    ::close(stop[1]);
    ::waitpid(pid, nullptr, 0);
    return std::nullopt;
  }
  return WorkerProcess{pid, stop[1]};
}

void stop_worker_process(const WorkerProcess& w) {
  ::close(w.stop_fd);
  ::waitpid(w.pid, nullptr, 0);
}

Figures run_clients(const std::string& target, int clients, int calls) {
  std::vector<std::thread> threads;
  std::atomic<int> next{0}, failed{0};
  std::mutex mu;
  std::vector<double> waits;
  const auto start = steady_clock::now();
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      auto s = rf::store::Store::open(target);
      if (!s) std::abort();
      for (int i; (i = next++) < calls;) {
        rf::store::NewCall call;
        call.project = "bench";
        call.run = "run-" + std::to_string(c);  // per_run: each client its own run
        call.argv = {"/bin/true"};
        auto id = (*s)->enqueue_call(call);
        if (!id) std::abort();
        for (;;) {
          const uint32_t seen = (*s)->call_version(*id);
          auto v = (*s)->call(*id);
          if (v && v->state == rf::store::CallState::done) {
            std::lock_guard lock(mu);
            waits.push_back(
                static_cast<double>(v->claimed_at.value_or(v->enqueued_at) - v->enqueued_at));
            break;
          }
          if (v && (v->state == rf::store::CallState::failed ||
                    v->state == rf::store::CallState::interrupted)) {
            ++failed;
            break;
          }
          (*s)->wait_for_call(*id, seen, milliseconds(200));
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  const double secs = duration<double>(steady_clock::now() - start).count();
  if (failed) std::fprintf(stderr, "%d calls failed\n", failed.load());
  Figures f;
  f.calls_per_s = calls / secs;
  if (!waits.empty()) f.claim_wait_ms = rf::bench::summarise(waits);
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  int calls = 300, workers = 1;
  std::vector<std::string> modes = {"per_tool", "per_run"};
  std::vector<int> client_counts = {1, 8, 64};
  std::vector<std::string> engines = {"sqlite"};
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--calls") && i + 1 < argc) calls = std::atoi(argv[++i]);
    if (!std::strcmp(argv[i], "--mode") && i + 1 < argc) modes = {argv[++i]};
    if (!std::strcmp(argv[i], "--clients") && i + 1 < argc) client_counts = {std::atoi(argv[++i])};
    if (!std::strcmp(argv[i], "--workers") && i + 1 < argc) workers = std::atoi(argv[++i]);
    if (!std::strcmp(argv[i], "--store-engine") && i + 1 < argc) {
      const std::string e = argv[++i];
      engines = e == "both" ? std::vector<std::string>{"sqlite", "postgres"}
                            : std::vector<std::string>{e};
    }
  }
  ::setenv("RINGFENCE_TOOL_RUNNER", RF_RUNNER_PATH, 0);  // the runner is not next to this binary
  rf::store::enable_postgres();
  std::unique_ptr<rf::testing::PostgresServer> pg;
  std::printf("%-9s %-9s %8s %8s %8s %10s %14s %14s\n", "engine", "mode", "workers", "clients",
              "calls", "calls/s", "claim p50 ms", "claim p99 ms");
  for (const auto& engine : engines) {
    if (engine == "postgres" && !pg) {
      pg = std::make_unique<rf::testing::PostgresServer>();
      if (!pg->ok()) {
        std::fprintf(stderr, "PostgreSQL did not start: %s\n", pg->error().c_str());
        return 1;
      }
    }
    for (const auto& mode : modes) {
      for (int clients : client_counts) {
        char tmpl[] = "/tmp/rf-wbench-XXXXXX";
        const std::string state = mkdtemp(tmpl);
        const std::string target =
            engine == "postgres" ? pg->fresh_schema_uri() : state + "/w0/ringfence.db";
        std::vector<WorkerProcess> running;
        for (int n = 0; n < workers; ++n) {
          auto s = rf::worker::default_settings("/nonexistent");
          s.state_dir.value = state + "/w" + std::to_string(n);
          s.store.value = target;
          s.mode.value = mode == "per_tool" ? rf::worker::SandboxMode::kPerTool
                                            : rf::worker::SandboxMode::kPerRun;
          s.pool_target.value = 4;
          s.pool_max.value = 8;
          rf::worker::WorkerOptions o;
          o.settings = s;
          o.worker_id = "bench-w" + std::to_string(n);
          o.concurrency = std::min(clients, 16);
          auto w = start_worker_process(s, o, running);
          if (!w) {
            std::fprintf(stderr, "worker %d did not start\n", n);
            return 1;
          }
          running.push_back(*w);
        }
        {
          auto st = rf::store::Store::open(target);
          (void)(*st)->ensure_project("bench", rf::store::Environment::development);
        }
        std::this_thread::sleep_for(milliseconds(500));  // let the pools fill
        const Figures f = run_clients(target, clients, calls);
        std::printf("%-9s %-9s %8d %8d %8d %10.0f %14.0f %14.0f\n", engine.c_str(), mode.c_str(),
                    workers, clients, calls, f.calls_per_s, f.claim_wait_ms.p50,
                    f.claim_wait_ms.p99);
        std::fflush(stdout);
        for (const auto& w : running) stop_worker_process(w);
        running.clear();
        if (!getenv("RF_KEEP"))
          std::system(("rm -rf " + state).c_str());
        else
          std::printf("kept %s\n", state.c_str());
      }
    }
  }
  return 0;
}
