// The store's two engines side by side in one run (issue 16): calls per
// second through SQLite and through PostgreSQL, with C clients and W workers
// each on a connection of its own (as separate hosts would be).
//
// A client enqueues a call (its own run, as per_run) and waits, on the
// doorbell, until the call is done; a worker claims queued calls
// (claim_running, up to 8 at a time), and finishes each at once: no sandbox,
// so what is measured is the store's share of a call, the part in which the
// engines differ (the sandbox's exec is the same on both). Also the latency
// of a claim that finds work (p50, p99) and of a whole call, enqueue to done.
//
// PostgreSQL: a cluster the bench starts itself (initdb into a temporary
// directory, tests/support/postgres_server.h), over its unix socket.
// Usage: rf_store_bench [--seconds S] [--clients C] [--workers W]
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.h"
#include "store/postgres.h"
#include "store/store.h"
#include "support/postgres_server.h"

using namespace std::chrono;
using rf::store::Store;

namespace {

struct Figures {
  double calls_per_s = 0;
  rf::bench::Stats claim_us{}, call_us{};
  int failed = 0;
};

std::unique_ptr<Store> open_or_die(const std::string& target) {
  auto s = Store::open(target);
  if (!s.ok()) {
    std::fprintf(stderr, "open %s: %s\n", target.c_str(), s.error().to_string().c_str());
    std::exit(1);
  }
  return std::move(*s);
}

Figures run(const std::string& target, int seconds, int clients, int workers) {
  {
    auto setup = open_or_die(target);
    if (!setup->ensure_project("bench", rf::store::Environment::development).ok()) std::exit(1);
    for (int w = 0; w < workers; ++w) {
      if (!setup->register_worker("w" + std::to_string(w), 1, "bench").ok()) std::exit(1);
    }
  }
  std::atomic<bool> stop{false};
  std::atomic<int> done{0}, failed{0};
  std::mutex mu;
  std::vector<double> claim_us, call_us;

  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      auto s = open_or_die(target);
      const std::string id = "w" + std::to_string(w);
      std::vector<double> mine;
      while (!stop) {
        const uint32_t seen = s->queue_version();
        const auto t0 = steady_clock::now();
        auto claimed = s->claim_running(id, milliseconds(60'000), 8);
        const auto t1 = steady_clock::now();
        if (!claimed.ok()) {
          ++failed;
          continue;
        }
        if (claimed->empty()) {
          s->wait_for_queue(seen, milliseconds(50));
          continue;
        }
        mine.push_back(duration<double, std::micro>(t1 - t0).count());
        for (const auto& c : *claimed) {
          if (!s->finish_call(c.id, id, 0, "{}").ok()) ++failed;
        }
      }
      std::lock_guard lock(mu);
      claim_us.insert(claim_us.end(), mine.begin(), mine.end());
    });
  }
  const auto start = steady_clock::now();
  const auto deadline = start + seconds * 1s;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      auto s = open_or_die(target);
      std::vector<double> mine;
      while (steady_clock::now() < deadline) {
        rf::store::NewCall call;
        call.project = "bench";
        call.run = "run-" + std::to_string(c);
        call.argv = {"/bin/true"};
        const auto t0 = steady_clock::now();
        auto id = s->enqueue_call(call);
        if (!id.ok()) {
          ++failed;
          continue;
        }
        for (;;) {
          const uint32_t seen = s->call_version(*id);
          auto v = s->call(*id);
          if (v.ok() && v->state == rf::store::CallState::done) break;
          if (!v.ok() || v->state == rf::store::CallState::failed ||
              v->state == rf::store::CallState::interrupted) {
            ++failed;
            break;
          }
          s->wait_for_call(*id, seen, milliseconds(200));
        }
        mine.push_back(duration<double, std::micro>(steady_clock::now() - t0).count());
        ++done;
      }
      std::lock_guard lock(mu);
      call_us.insert(call_us.end(), mine.begin(), mine.end());
    });
  }
  for (size_t i = workers; i < threads.size(); ++i) threads[i].join();
  const double secs = duration<double>(steady_clock::now() - start).count();
  stop = true;
  for (int w = 0; w < workers; ++w) threads[w].join();
  Figures f;
  f.calls_per_s = done / secs;
  if (!claim_us.empty()) f.claim_us = rf::bench::summarise(claim_us);
  if (!call_us.empty()) f.call_us = rf::bench::summarise(call_us);
  f.failed = failed;
  return f;
}

void print(const char* engine, const Figures& f) {
  std::printf("%-10s %9.0f %12.0f %12.0f %12.0f %12.0f %7d\n", engine, f.calls_per_s,
              f.claim_us.p50, f.claim_us.p99, f.call_us.p50, f.call_us.p99, f.failed);
}

}  // namespace

int main(int argc, char** argv) {
  int seconds = 10, clients = 16, workers = 3;
  for (int i = 1; i + 1 < argc; ++i) {
    if (!std::strcmp(argv[i], "--seconds")) seconds = std::atoi(argv[++i]);
    if (!std::strcmp(argv[i], "--clients")) clients = std::atoi(argv[++i]);
    if (!std::strcmp(argv[i], "--workers")) workers = std::atoi(argv[++i]);
  }
  rf::store::enable_postgres();
  rf::testing::PostgresServer pg;
  if (!pg.ok()) {
    std::fprintf(stderr, "PostgreSQL did not start: %s\n", pg.error().c_str());
    return 1;
  }
  char tmpl[] = "/tmp/rf-store-bench-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);

  std::printf("%d clients, %d workers, %d s each; latencies in microseconds\n", clients, workers,
              seconds);
  std::printf("%-10s %9s %12s %12s %12s %12s %7s\n", "engine", "calls/s", "claim p50", "claim p99",
              "call p50", "call p99", "failed");
  const Figures sqlite = run(dir + "/ringfence.db", seconds, clients, workers);
  print("sqlite", sqlite);
  const Figures postgres = run(pg.fresh_schema_uri(), seconds, clients, workers);
  print("postgres", postgres);
  std::printf("postgres / sqlite: %.2fx\n", postgres.calls_per_s / sqlite.calls_per_s);
  std::filesystem::remove_all(dir);
  return sqlite.failed + postgres.failed == 0 ? 0 : 1;
}
