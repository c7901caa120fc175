// Worker throughput: calls per second sustained through a worker (store,
// claim, sandbox, exec, output, result) with 1, 8 and 64 concurrent clients,
// in per_tool and per_run modes, running /bin/true.
// Usage: rf_worker_bench [--calls N] [--mode per_tool|per_run] [--clients C]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "cli/backends.h"
#include "worker/worker.h"

using namespace std::chrono;

namespace {

double run_clients(const std::string& state, int clients, int calls) {
  std::vector<std::thread> threads;
  std::atomic<int> next{0}, failed{0};
  const auto start = steady_clock::now();
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      auto s = rf::store::Store::open(rf::worker::store_path(state));
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
          if (v && v->state == rf::store::CallState::done) break;
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
  return calls / secs;
}

}  // namespace

int main(int argc, char** argv) {
  int calls = 300;
  std::vector<std::string> modes = {"per_tool", "per_run"};
  std::vector<int> client_counts = {1, 8, 64};
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--calls") && i + 1 < argc) calls = std::atoi(argv[++i]);
    if (!std::strcmp(argv[i], "--mode") && i + 1 < argc) modes = {argv[++i]};
    if (!std::strcmp(argv[i], "--clients") && i + 1 < argc) client_counts = {std::atoi(argv[++i])};
  }
  ::setenv("RINGFENCE_TOOL_RUNNER", RF_RUNNER_PATH, 0);  // the runner is not next to this binary
  std::printf("%-9s %8s %8s %10s\n", "mode", "clients", "calls", "calls/s");
  for (const auto& mode : modes) {
    for (int clients : client_counts) {
      char tmpl[] = "/tmp/rf-wbench-XXXXXX";
      const std::string state = mkdtemp(tmpl);
      auto s = rf::worker::default_settings("/nonexistent");
      s.state_dir.value = state;
      s.mode.value =
          mode == "per_tool" ? rf::worker::SandboxMode::kPerTool : rf::worker::SandboxMode::kPerRun;
      s.pool_target.value = 4;
      s.pool_max.value = 8;
      auto placement = rf::cli::place_worker(s);
      if (!placement) {
        std::fprintf(stderr, "%s\n", placement.error().to_string().c_str());
        return 1;
      }
      rf::worker::WorkerOptions o;
      o.settings = s;
      o.concurrency = std::min(clients, 16);
      auto w = rf::worker::Worker::start(o, std::move(*placement));
      if (!w) {
        std::fprintf(stderr, "%s\n", w.error().to_string().c_str());
        return 1;
      }
      {
        auto st = rf::store::Store::open(rf::worker::store_path(state));
        (void)(*st)->ensure_project("bench", rf::store::Environment::development);
      }
      std::this_thread::sleep_for(milliseconds(500));  // let the pool fill
      const double rate = run_clients(state, clients, calls);
      std::printf("%-9s %8d %8d %10.0f\n", mode.c_str(), clients, calls, rate);
      std::fflush(stdout);
      (*w)->stop();
      w->reset();
      if (!getenv("RF_KEEP"))
        std::system(("rm -rf " + state).c_str());
      else
        std::printf("kept %s\n", state.c_str());
    }
  }
  return 0;
}
