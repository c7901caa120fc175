// rf_api_bench: `ringfence serve` (issue 14), the real binary, on loopback,
// with one worker whose door holds the sandboxes (issue 39: serve forwards).
//  1. Round trips, interleaved so they share the machine's noise, each on a
//     kept-alive connection into one warm native sandbox:
//       api   POST /v1/sandboxes/ID/exec {"argv": ["true"]}   (bar: 2 ms p50)
//       mcp   POST /mcp tools/call sandbox_exec, 2026-07-28    (bar: 3 ms p50)
//       bwrap the peer: a fresh bubblewrap sandbox running /bin/true
//       floor the same exec into a warm native sandbox of this process,
//             no HTTP: what serve adds is api minus floor
//  2. Throughput: 16 kept-alive clients over 4 sandboxes for --seconds
//     (bar: 2,000 exec calls/s on 2 cores); then the same with a command
//     that starts without libc, and the floor (the same execs, no HTTP).
//  3. Streams: --streams server-sent-event execs (`sleep`) held at once by
//     the one server, spread over sandboxes (bar: 1,000); every one must
//     see its `started` event while all are open, then its `exit`.
//
//   build/bench/rf_api_bench [--iterations N] [--seconds S] [--streams N] [--rounds R]
//
// --rounds R runs the `true` throughput phase R times in a row and prints
// their median, least and most: this host's speed swings by ±20% from one
// minute to the next, so one round says little about the bar.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.h"
#include "http_probe.h"
#include "native/native_backend.h"
#include "serve_support.h"

using namespace rf;
using Clock = std::chrono::steady_clock;
using json = nlohmann::json;
using rf::testing::HttpProbe;

namespace {

double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

// The whole machine's busy CPU time so far, in µs (/proc/stat: user, nice,
// system, irq, softirq; not steal): divided by the calls of a throughput
// phase it is what a call cost everything running, which this host's speed
// swings move far less than the calls/s themselves.
double busy_us() {
  std::ifstream stat("/proc/stat");
  std::string cpu;
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0;
  stat >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq;
  return (user + nice + system + irq + softirq) * 1e6 / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// This process's own CPU so far, in µs: the clients' share of a call.
double self_us() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

// The machine's busy CPU and this process's own over one throughput phase.
struct CpuMeter {
  double busy0 = busy_us(), self0 = self_us();
  // "busy CPU 1034 us a call, 95 of it this bench's (at most 1934 calls/s on 2 cores)".
  std::string per_call(uint64_t calls) const;
};

std::string CpuMeter::per_call(uint64_t calls) const {
  const double busy = busy_us() - busy0, self = self_us() - self0;
  if (calls == 0) return "no calls";
  const double per = busy / static_cast<double>(calls);
  const long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
  char out[160];
  std::snprintf(out, sizeof out,
                "busy CPU %.0f us a call, %.0f of it this bench's (at most %.0f calls/s on %ld "
                "cores)",
                per, self / static_cast<double>(calls), 1e6 * static_cast<double>(cores) / per,
                cores);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = 500, seconds = 10, streams = 1000, rounds = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--rounds")) rounds = std::max(1, std::atoi(argv[i + 1]));
    if (!std::strcmp(argv[i], "--iterations")) iterations = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--seconds")) seconds = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--streams")) streams = std::atoi(argv[i + 1]);
  }
  // Thousands of connections: the bench's and the server's descriptors.
  rlimit nofile{65536, 65536};
  ::setrlimit(RLIMIT_NOFILE, &nofile);
  ::signal(SIGPIPE, SIG_IGN);
  char tmpl[] = "/tmp/rf-api-bench-XXXXXX";
  if (!::mkdtemp(tmpl)) return 1;
  const std::string dir = tmpl;
  std::string tok;
  if (bench::run_cli(RF_CLI_PATH, {"token", "create", "--project", "bench", "--state-dir", dir},
                     &tok) != 0) {
    std::fprintf(stderr, "token create failed\n");
    return 1;
  }
  while (!tok.empty() && tok.back() == '\n') tok.pop_back();
  int rc = 0;
  {
    bench::Server worker;
    if (!bench::start_worker(RF_CLI_PATH, dir, &worker)) return 1;
    bench::Server server;
    if (!bench::start_server(RF_CLI_PATH, dir, &server)) {
      std::fprintf(stderr, "serve did not start (see %s/serve.err)\n", dir.c_str());
      return 1;
    }
    const std::string id = bench::create_sandbox(server.port, tok);
    if (id.empty()) return 1;

    // 1. Round trips.
    HttpProbe api(server.port), mcp(server.port);
    const std::string exec_path = "/v1/sandboxes/" + id + "/exec";
    const std::string exec_body = R"({"argv": ["true"]})";
    const json call = {{"jsonrpc", "2.0"},
                       {"id", 1},
                       {"method", "tools/call"},
                       {"params",
                        {{"name", "sandbox_exec"},
                         {"arguments", {{"sandbox_id", id}, {"argv", {"true"}}}},
                         {"_meta", {{"io.modelcontextprotocol/protocolVersion", "2026-07-28"}}}}}};
    const std::map<std::string, std::string> mcp_headers = {
        {"Content-Type", "application/json"}, {"Accept", "application/json, text/event-stream"}};
    std::vector<double> api_us, mcp_us, bwrap_us, floor_us;
    const auto peer = bench::bwrap_args();
    auto backend =
        native::make_native_backend(native::NativeOptions{RF_RUNNER_PATH, "ringfence-api-bench"});
    if (!backend) {
      std::fprintf(stderr, "%s\n", backend.error().to_string().c_str());
      return 1;
    }
    auto direct = (*backend)->create(SandboxSpec{});
    if (!direct) {
      std::fprintf(stderr, "%s\n", direct.error().to_string().c_str());
      return 1;
    }
    ExecCall direct_call;
    direct_call.argv = {"true"};
    bench::NullSink null_sink;
    for (int i = 0; i < 20; ++i) {  // warm both paths
      api.request("POST", exec_path, tok, exec_body);
      mcp.request("POST", "/mcp", tok, call.dump(), mcp_headers);
    }
    for (int i = 0; i < iterations; ++i) {
      auto t0 = Clock::now();
      auto r = api.request("POST", exec_path, tok, exec_body);
      api_us.push_back(us_since(t0));
      if (r.status != 200) {
        std::fprintf(stderr, "api exec: %d %s\n", r.status, r.body.c_str());
        return 1;
      }
      t0 = Clock::now();
      r = mcp.request("POST", "/mcp", tok, call.dump(), mcp_headers);
      mcp_us.push_back(us_since(t0));
      if (r.status != 200 || r.body.find("\"isError\":false") == std::string::npos) {
        std::fprintf(stderr, "mcp exec: %d %s\n", r.status, r.body.c_str());
        return 1;
      }
      t0 = Clock::now();
      if (!(*direct)->exec(direct_call, null_sink)) {
        std::fprintf(stderr, "direct exec failed\n");
        return 1;
      }
      floor_us.push_back(us_since(t0));
      if (i % 5 == 0) {  // the peer is slow: a fifth as many samples
        t0 = Clock::now();
        if (bench::run_cli(peer[0], {peer.begin() + 1, peer.end()}, nullptr) != 0) {
          std::fprintf(stderr, "bwrap failed\n");
          return 1;
        }
        bwrap_us.push_back(us_since(t0));
      }
    }
    auto show = [](const char* name, const std::vector<double>& v) {
      const auto s = bench::summarise(v);
      std::printf("%-34s p50 %8.3f ms  p99 %8.3f ms  (n=%zu)\n", name, s.p50 / 1000, s.p99 / 1000,
                  v.size());
    };
    std::printf("round trips into one warm sandbox, kept-alive connection:\n");
    show("  api exec (argv true)", api_us);
    show("  mcp tools/call sandbox_exec", mcp_us);
    show("  floor: same exec, no HTTP", floor_us);
    show("  peer: bwrap fresh sandbox, true", bwrap_us);

    {  // Create to first command: a new sandbox over the API, `true` in it, then deleted.
      std::vector<double> first_us;
      HttpProbe c(server.port);
      for (int i = 0; i < std::max(10, iterations / 10); ++i) {
        const auto t0 = Clock::now();
        auto made = c.request("POST", "/v1/sandboxes", tok, "{}");
        if (made.status != 201) {
          std::fprintf(stderr, "create: %d %s\n", made.status, made.body.c_str());
          return 1;
        }
        const std::string fresh = json::parse(made.body)["id"];
        auto r = c.request("POST", "/v1/sandboxes/" + fresh + "/exec", tok, exec_body);
        first_us.push_back(us_since(t0));
        if (r.status != 200 || c.request("DELETE", "/v1/sandboxes/" + fresh, tok).status != 204) {
          std::fprintf(stderr, "first exec or delete failed: %d %s\n", r.status, r.body.c_str());
          return 1;
        }
      }
      show("  create + first exec (new sandbox)", first_us);
    }

    // 2. Throughput: 16 clients over 4 sandboxes.
    std::vector<std::string> ids = {id};
    for (int i = 0; i < 3; ++i) ids.push_back(bench::create_sandbox(server.port, tok));
    // `what` names the command in the line printed; false if a call failed.
    // The calls a second go to *rate when it is given.
    auto throughput = [&](const std::string& body, const char* what, double* rate = nullptr) {
      std::atomic<uint64_t> done{0}, failed{0};
      std::atomic<bool> stop{false};
      std::vector<std::thread> clients;
      for (int c = 0; c < 16; ++c) {
        clients.emplace_back([&, c] {
          HttpProbe p(server.port);
          const std::string path = "/v1/sandboxes/" + ids[c % 4] + "/exec";
          while (!stop.load()) {
            auto r = p.request("POST", path, tok, body);
            (r.status == 200 ? done : failed)++;
          }
        });
      }
      const auto t0 = Clock::now();
      const CpuMeter cpu;
      std::this_thread::sleep_for(std::chrono::seconds(seconds));
      stop = true;
      const std::string cost = cpu.per_call(done.load());
      for (auto& t : clients) t.join();
      const double secs = us_since(t0) / 1e6;
      std::printf(
          "throughput%s: 16 clients, 4 sandboxes, %d s: %.0f exec calls/s (%llu failed), %s\n",
          what, seconds, done.load() / secs, static_cast<unsigned long long>(failed.load()),
          cost.c_str());
      if (rate != nullptr) *rate = done.load() / secs;
      return failed.load() == 0;
    };
    std::vector<double> rates;
    for (int round = 0; round < rounds; ++round) {
      double rate = 0;
      if (!throughput(exec_body, "", &rate)) rc = 1;
      rates.push_back(rate);
    }
    if (rounds > 1) {
      std::sort(rates.begin(), rates.end());
      const auto at_bar =
          std::count_if(rates.begin(), rates.end(), [](double r) { return r >= 2000; });
      std::printf(
          "throughput over %d rounds: median %.0f exec calls/s (least %.0f, most %.0f), %ld "
          "of %d at 2,000 or more\n",
          rounds, (rates[(rates.size() - 1) / 2] + rates[rates.size() / 2]) / 2, rates.front(),
          rates.back(), static_cast<long>(at_bar), rounds);
    }
    // The same with a command that starts without libc (bench/exit0.c): what
    // a call costs beyond its command. glibc's start-up alone executes cpuid
    // 68 times, and on a virtual machine each one exits to the hypervisor
    // (5.6 us each on this project's machines): most of what `true` costs.
    {
      std::ifstream in(RF_EXIT0_PATH, std::ios::binary);
      const std::string exit0((std::istreambuf_iterator<char>(in)), {});
      bool uploaded = !exit0.empty();
      HttpProbe up(server.port);
      for (const auto& sandbox : ids) {
        uploaded =
            uploaded &&
            up.request("PUT", "/v1/sandboxes/" + sandbox + "/files?path=/workspace/exit0&mode=0755",
                       tok, exit0)
                    .status == 201;
      }
      if (!uploaded) {
        std::fprintf(stderr, "could not upload %s\n", RF_EXIT0_PATH);
        return 1;
      }
      if (!throughput(R"({"argv": ["/workspace/exit0"]})", " (a command without libc)")) rc = 1;
    }
    {  // The floor: the same execs from 16 threads of this process, no HTTP.
      std::vector<std::unique_ptr<Sandbox>> direct_sbs;
      for (int i = 0; i < 4; ++i) {
        auto sb = (*backend)->create(SandboxSpec{});
        if (!sb) {
          std::fprintf(stderr, "%s\n", sb.error().to_string().c_str());
          return 1;
        }
        direct_sbs.push_back(std::move(*sb));
      }
      std::atomic<uint64_t> floor_done{0};
      std::atomic<bool> floor_stop{false};
      std::vector<std::thread> threads;
      for (int c = 0; c < 16; ++c) {
        threads.emplace_back([&, c] {
          bench::NullSink sink;
          while (!floor_stop.load()) {
            if ((*direct_sbs[c % 4]).exec(direct_call, sink)) floor_done++;
          }
        });
      }
      const auto f0 = Clock::now();
      const CpuMeter cpu;
      std::this_thread::sleep_for(std::chrono::seconds(seconds));
      floor_stop = true;
      const std::string cost = cpu.per_call(floor_done.load());
      for (auto& t : threads) t.join();
      std::printf("floor: the same from 16 threads, no HTTP: %.0f exec calls/s, %s\n",
                  floor_done.load() / (us_since(f0) / 1e6), cost.c_str());
    }

    // 3. Streams held at once.
    if (streams > 0) {
      std::vector<std::string> stream_ids;
      const int per = 200;
      for (int i = 0; i < (streams + per - 1) / per; ++i)
        stream_ids.push_back(bench::create_sandbox(server.port, tok));
      std::vector<std::unique_ptr<HttpProbe>> open;
      // Long enough that the first is still running when the last has started.
      const std::string body = R"({"argv": ["sleep", "40"]})";
      const auto s0 = Clock::now();
      for (int i = 0; i < streams; ++i) {
        open.push_back(std::make_unique<HttpProbe>(server.port));
        open.back()->send_raw("POST /v1/sandboxes/" + stream_ids[i / per] +
                              "/exec HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n"
                              "Authorization: Bearer " +
                              tok + "\r\nContent-Length: " + std::to_string(body.size()) +
                              "\r\n\r\n" + body);
      }
      // Each stream's head and `started` event.
      int started = 0;
      for (auto& p : open) {
        const auto deadline = Clock::now() + std::chrono::seconds(30);
        while (p->buffered().find("event: started") == std::string::npos &&
               Clock::now() < deadline) {
          p->read_some(std::chrono::milliseconds(50));
        }
        started += p->buffered().find("event: started") != std::string::npos;
      }
      const double open_s = us_since(s0) / 1e6;
      // Held at once: started, and not one has ended yet.
      int held = 0;
      for (auto& p : open) {
        while (p->read_some(std::chrono::milliseconds(0))) {
        }
        held += p->buffered().find("event: started") != std::string::npos &&
                p->buffered().find("event: exit") == std::string::npos;
      }
      int exited = 0;
      for (auto& p : open) {
        const auto deadline = Clock::now() + std::chrono::seconds(90);
        while (p->buffered().find("event: exit") == std::string::npos && Clock::now() < deadline) {
          p->read_some(std::chrono::milliseconds(100));
        }
        exited += p->buffered().find("event: exit") != std::string::npos;
      }
      std::printf(
          "streams: %d of %d started within %.1f s, %d held open at once, %d ended with exit\n",
          started, streams, open_s, held, exited);
      if (started != streams || exited != streams) rc = 1;
    }
  }
  std::filesystem::remove_all(dir);
  return rc;
}
