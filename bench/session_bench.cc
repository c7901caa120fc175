// rf_session_bench: background processes through `ringfence serve` (issue
// 41 item 2), the real binaries on loopback, one worker whose door holds the
// sandboxes.
//  1. start: POST .../processes {"argv": ["echo", "ready"]} into a warm
//     sandbox, then GET .../output?from=0&wait_ms=... until "ready" came
//     (bar: 2 ms p50). Peer: a fresh bubblewrap sandbox running the same
//     echo, its line read from its stdout.
//  2. follow: a process prints the wall clock (`date +%s%N`) every 20 ms; a
//     client follows its output as server-sent events and, for each line,
//     takes its own clock minus the printed one: how long a line takes from
//     the process to the client. Floor: the same command in a native sandbox
//     of this process, its output to a sink here (no worker, no serve, no
//     HTTP); what serve and the door add is follow minus floor (bar: 1 ms).
//  3. watch: a file made in the sandbox (its name the clock just before),
//     its event at a client following a watch of its directory (bar: 5 ms
//     p50); floor: the same watch of a native sandbox in this process.
//  4. port: a GET through serve to a server a process runs inside (bar: 1
//     ms added), against the same server on the host's loopback, asked
//     directly (a fresh connection each, as the relay makes one).
//  4b. stream: --stream-mib MiB (1024) from a server inside to a client of
//     serve, read as it comes (bar: 1 GB/s), against the same server on
//     the host's loopback read directly.
//  4c. pause and resume: POST .../{id}:pause and :resume of a sandbox with
//     10 processes (bar: 5 ms p50 each; issue 42).
//  5. idle: --idle-sandboxes sandboxes with --idle-per-sandbox `sleep`
//     processes each; the worker's CPU over --quiet-seconds with them and
//     without them (bar: none, no polling), and its resident memory per
//     process (bar: 64 KiB beyond their buffers, which hold nothing yet).
//
//   build/bench/rf_session_bench [--iterations N] [--idle-sandboxes S]
//                                [--idle-per-sandbox P] [--quiet-seconds Q]
//                                [--stream-mib M]
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
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

int64_t wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A process's CPU (user + system) so far, in ms, from /proc/PID/stat.
double cpu_ms(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(text.substr(close + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stod(field);
    if (i == 15) stime = std::stod(field);
  }
  return (utime + stime) * 1000.0 / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// "VmRSS" or "Threads" of /proc/PID/status (kB for VmRSS).
long status_field(pid_t pid, const std::string& name) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(name + ":", 0) == 0) return std::stol(line.substr(name.size() + 1));
  }
  return -1;
}

// Lines of `date +%s%N` arriving on a server-sent event stream: each one's
// delay from the process's clock to ours, in µs.
std::vector<double> follow_delays(HttpProbe& p, int lines,
                                  const std::string& marker = "\"data\":\"") {
  std::vector<double> out;
  std::string buf;
  while (static_cast<int>(out.size()) < lines) {
    pollfd pf{p.fd(), POLLIN, 0};
    if (::poll(&pf, 1, 5000) <= 0) break;
    char chunk[4096];
    const ssize_t n = ::recv(p.fd(), chunk, sizeof chunk, 0);
    if (n <= 0) break;
    const int64_t now = wall_ns();
    buf.append(chunk, static_cast<size_t>(n));
    size_t at;
    while ((at = buf.find(marker)) != std::string::npos) {
      // A line ends with its escaped newline; a path with its closing quote.
      const size_t end = buf.find_first_of("\\\"", at + marker.size());
      if (end == std::string::npos) break;
      const std::string stamp = buf.substr(at + marker.size(), end - at - marker.size());
      buf.erase(0, end);
      if (!stamp.empty() && stamp.find_first_not_of("0123456789") == std::string::npos)
        out.push_back(static_cast<double>(now - std::stoll(stamp)) / 1000.0);
    }
  }
  return out;
}

// The floor of 2: the same lines from a native sandbox of this process.
class StampSink : public OutputSink {
 public:
  void on_stdout(std::string_view d) override {
    const int64_t now = wall_ns();
    std::lock_guard lock(mu_);
    partial_.append(d);
    size_t nl;
    while ((nl = partial_.find('\n')) != std::string::npos) {
      const std::string stamp = partial_.substr(0, nl);
      partial_.erase(0, nl + 1);
      if (!stamp.empty() && stamp.find_first_not_of("0123456789") == std::string::npos)
        delays.push_back(static_cast<double>(now - std::stoll(stamp)) / 1000.0);
    }
  }
  void on_stderr(std::string_view) override {}
  std::vector<double> delays;

 private:
  std::mutex mu_;
  std::string partial_;
};

const char* kStampLoop = "i=0; while [ $i -lt %d ]; do date +%%s%%N; sleep 0.02; i=$((i+1)); done";

std::string stamp_loop(int lines) {
  char cmd[160];
  std::snprintf(cmd, sizeof cmd, kStampLoop, lines);
  return cmd;
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = 300, idle_sandboxes = 100, idle_per = 10, quiet = 10, stream_mib = 1024;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--iterations")) iterations = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--idle-sandboxes")) idle_sandboxes = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--idle-per-sandbox")) idle_per = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--quiet-seconds")) quiet = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--stream-mib")) stream_mib = std::atoi(argv[i + 1]);
  }
  rlimit nofile{65536, 65536};
  ::setrlimit(RLIMIT_NOFILE, &nofile);
  ::signal(SIGPIPE, SIG_IGN);
  char tmpl[] = "/tmp/rf-session-bench-XXXXXX";
  if (!::mkdtemp(tmpl)) return 1;
  const std::string dir = tmpl;
  // One project per 50 sandboxes: a worker holds at most 64 of one project.
  std::vector<std::string> tokens;
  for (int p = 0; p < std::max(1, (idle_sandboxes + 49) / 50); ++p) {
    std::string tok;
    if (bench::run_cli(
            RF_CLI_PATH,
            {"token", "create", "--project", "bench" + std::to_string(p), "--state-dir", dir},
            &tok) != 0) {
      std::fprintf(stderr, "token create failed\n");
      return 1;
    }
    while (!tok.empty() && tok.back() == '\n') tok.pop_back();
    tokens.push_back(tok);
  }
  const std::string& tok = tokens[0];
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
    const std::string procs = "/v1/sandboxes/" + id + "/processes";

    // 1. Start and first line, against a fresh bubblewrap echo.
    HttpProbe api(server.port);
    std::vector<double> start_us, bwrap_us;
    auto peer = bench::bwrap_args();
    peer.back() = "/bin/echo";  // in place of /bin/true
    peer.push_back("ready");
    for (int i = 0; i < iterations + 20; ++i) {
      const auto t0 = Clock::now();
      auto made = api.request("POST", procs, tok, R"({"argv": ["echo", "ready"]})");
      if (made.status != 201) {
        std::fprintf(stderr, "start: %d %s\n", made.status, made.body.c_str());
        return 1;
      }
      const std::string out = procs + "/" + std::to_string(json::parse(made.body).value("pid", 0)) +
                              "/output?from=0&wait_ms=2000";
      for (;;) {
        auto r = api.request("GET", out, tok);
        if (r.status != 200) {
          std::fprintf(stderr, "output: %d %s\n", r.status, r.body.c_str());
          return 1;
        }
        const json j = json::parse(r.body);
        if (j["stdout"].is_string() && j["stdout"].get<std::string>() == "ready\n") break;
      }
      if (i >= 20) start_us.push_back(us_since(t0));
      const auto b0 = Clock::now();
      std::string line;
      if (bench::run_cli(peer[0], std::vector<std::string>(peer.begin() + 1, peer.end()), &line) !=
              0 ||
          line != "ready\n") {
        std::fprintf(stderr, "bwrap: %s\n", line.c_str());
        return 1;
      }
      if (i >= 20) bwrap_us.push_back(us_since(b0));
    }
    const auto s = bench::summarise(start_us), b = bench::summarise(bwrap_us);
    std::printf("start a background process, first line  p50 %7.0f us  p99 %7.0f us  (bar 2000)\n",
                s.p50, s.p99);
    std::printf("  peer: fresh bwrap, echo, its line      p50 %7.0f us  p99 %7.0f us  (%.1fx)\n",
                b.p50, b.p99, b.p50 / s.p50);

    // 2. Follow: a line's way from the process to a client, against the floor.
    const int lines = std::max(50, iterations / 2);
    auto stamper = api.request("POST", procs, tok, json{{"cmd", stamp_loop(lines)}}.dump());
    const int stamp_pid = json::parse(stamper.body).value("pid", 0);
    HttpProbe follower(server.port);
    follower.send_raw("GET " + procs + "/" + std::to_string(stamp_pid) +
                      "/output?from=now HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n"
                      "Authorization: Bearer " +
                      tok + "\r\n\r\n");
    auto followed = follow_delays(follower, lines - 5);
    auto backend =
        native::make_native_backend(native::NativeOptions{RF_RUNNER_PATH, "rf-session-bench"});
    if (!backend) return 1;
    auto direct = (*backend)->create(SandboxSpec{});
    if (!direct) return 1;
    StampSink floor;
    ExecCall c;
    c.argv = {"/bin/sh", "-c", stamp_loop(lines)};
    (void)(*direct)->exec(c, floor);
    (void)(*direct)->destroy();
    if (followed.size() < 10 || floor.delays.size() < 10) {
      std::fprintf(stderr, "follow: %zu lines through serve, %zu direct\n", followed.size(),
                   floor.delays.size());
      return 1;
    }
    const auto f = bench::summarise(followed), fl = bench::summarise(floor.delays);
    std::printf("follow: a line, process to client         p50 %7.0f us  p99 %7.0f us\n", f.p50,
                f.p99);
    std::printf("  floor: to a sink in this process        p50 %7.0f us  p99 %7.0f us\n", fl.p50,
                fl.p99);
    std::printf("  added by the door and serve             p50 %7.0f us  (bar 1000)\n",
                f.p50 - fl.p50);

    // 3. Watch: a file made in the sandbox, its event at a following client.
    // The file's name is the clock read just before it was made (`touch
    // /workspace/w/$(date +%s%N)`: the name is taken first), so each delay
    // includes a `touch` starting; the floor has it too.
    const std::string touch_loop = "mkdir -p /workspace/w; i=0; while [ $i -lt " +
                                   std::to_string(lines) +
                                   " ]; do touch /workspace/w/$(date +%s%N); sleep 0.02; "
                                   "i=$((i+1)); done";
    (void)api.request("POST", "/v1/sandboxes/" + id + "/files:mkdir?path=/workspace/w", tok);
    HttpProbe watcher(server.port);
    watcher.send_raw("GET /v1/sandboxes/" + id +
                     "/files:watch?path=/workspace/w HTTP/1.1\r\nHost: x\r\nAccept: "
                     "text/event-stream\r\nAuthorization: Bearer " +
                     tok + "\r\n\r\n");
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the watch runs
    (void)api.request("POST", procs, tok, json{{"cmd", touch_loop}}.dump());
    auto watched = follow_delays(watcher, lines - 5, "\"path\":\"/workspace/w/");
    auto direct_w = (*backend)->create(SandboxSpec{});
    if (!direct_w) return 1;
    std::vector<double> watch_floor;
    std::mutex wmu;
    uint32_t wid = 0;
    (void)(*direct_w)->make_dir("/workspace/w", true);
    std::thread wt([&] {
      (void)(*direct_w)->watch(
          "/workspace/w", false,
          [&](uint32_t got) {
            std::lock_guard lock(wmu);
            wid = got;
          },
          [&](std::vector<proto::FileEvent>&& events) {
            const int64_t now = wall_ns();
            std::lock_guard lock(wmu);
            for (const auto& e : events) {
              const std::string stamp = e.path.substr(e.path.rfind('/') + 1);
              if (e.type == "create" && !stamp.empty() &&
                  stamp.find_first_not_of("0123456789") == std::string::npos)
                watch_floor.push_back(static_cast<double>(now - std::stoll(stamp)) / 1000.0);
            }
          });
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ExecCall tc;
    tc.argv = {"/bin/sh", "-c", touch_loop};
    bench::NullSink null_sink;
    (void)(*direct_w)->exec(tc, null_sink);
    {
      std::lock_guard lock(wmu);
      (void)(*direct_w)->unwatch(wid);
    }
    wt.join();
    (void)(*direct_w)->destroy();
    if (watched.size() < 10 || watch_floor.size() < 10) {
      std::fprintf(stderr, "watch: %zu events through serve, %zu direct\n", watched.size(),
                   watch_floor.size());
      return 1;
    }
    const auto w = bench::summarise(watched), wf = bench::summarise(watch_floor);
    std::printf(
        "watch: a file made, its event at a client  p50 %7.0f us  p99 %7.0f us  (bar 5000)\n",
        w.p50, w.p99);
    std::printf("  floor: the same watch in this process      p50 %7.0f us  p99 %7.0f us\n", wf.p50,
                wf.p99);

    // 4. Ports: a GET to a server inside through serve, door and runner,
    // against the same server on the host's loopback, asked directly.
    const std::string server_py =
        "import http.server, sys\n"
        "class H(http.server.BaseHTTPRequestHandler):\n"
        "    protocol_version = 'HTTP/1.1'\n"
        "    def do_GET(self):\n"
        "        self.send_response(200)\n"
        "        self.send_header('Content-Length', '2')\n"
        "        self.end_headers()\n"
        "        self.wfile.write(b'ok')\n"
        "    def log_message(self, *a): pass\n"
        "http.server.ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()\n";
    (void)api.request("PUT", "/v1/sandboxes/" + id + "/files?path=/workspace/s.py", tok, server_py);
    (void)api.request("POST", procs, tok,
                      json{{"argv", {"python3", "/workspace/s.py", "8000"}}}.dump());
    const std::string host_py = dir + "/s.py";
    std::ofstream(host_py) << server_py;
    const int host_port = 20000 + static_cast<int>(::getpid() % 20000);
    bench::Server host_server;
    host_server.pid =
        bench::spawn_shell("/usr/bin/python3 " + host_py + " " + std::to_string(host_port));
    const std::string via = "/v1/sandboxes/" + id + "/ports/8000/";
    for (int i = 0; i < 200; ++i) {
      HttpProbe host_probe(host_port);
      if (api.request("GET", via, tok).status == 200 &&
          host_probe.request("GET", "/", "").status == 200)
        break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::vector<double> port_us, direct_us;
    for (int i = 0; i < iterations + 20; ++i) {
      const auto t0 = Clock::now();
      auto r = api.request("GET", via, tok);
      if (r.status != 200) {
        std::fprintf(stderr, "port: %d %s\n", r.status, r.body.c_str());
        return 1;
      }
      if (i >= 20) port_us.push_back(us_since(t0));
      const auto d0 = Clock::now();
      HttpProbe direct_probe(host_port);
      auto d = direct_probe.request("GET", "/", "");
      if (d.status != 200) {
        std::fprintf(stderr, "direct: %d\n", d.status);
        return 1;
      }
      if (i >= 20) direct_us.push_back(us_since(d0));
    }
    const auto pt = bench::summarise(port_us), dt = bench::summarise(direct_us);
    std::printf("port: a GET through serve to a server inside p50 %7.0f us  p99 %7.0f us\n", pt.p50,
                pt.p99);
    std::printf("  the same server on the host, asked directly p50 %7.0f us  p99 %7.0f us\n",
                dt.p50, dt.p99);
    std::printf("  added by serve, the door and the runner     p50 %7.0f us  (bar 1000)\n",
                pt.p50 - dt.p50);

    // 4b. A long answer streamed: MiB from a server inside, read as it comes.
    const std::string stream_py =
        "import socket, sys\n"
        "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        "s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(8)\n"
        "block = b'x' * (1 << 20)\n"
        "while True:\n"
        "    c, _ = s.accept(); c.recv(65536)\n"
        "    c.sendall(b'HTTP/1.0 200 OK\\r\\nContent-Type: "
        "application/octet-stream\\r\\n\\r\\n')\n"
        "    for _ in range(int(sys.argv[2])): c.sendall(block)\n"
        "    c.close()\n";
    (void)api.request("PUT", "/v1/sandboxes/" + id + "/files?path=/workspace/stream.py", tok,
                      stream_py);
    (void)api.request(
        "POST", procs, tok,
        json{{"argv", {"python3", "/workspace/stream.py", "8001", std::to_string(stream_mib)}}}
            .dump());
    std::ofstream(dir + "/stream.py") << stream_py;
    bench::Server host_streamer;
    host_streamer.pid =
        bench::spawn_shell("/usr/bin/python3 " + dir + "/stream.py " +
                           std::to_string(host_port + 1) + " " + std::to_string(stream_mib));
    // Reads an answer to its close; how many bytes came, and in how long.
    auto drain = [](int port, const std::string& request, double* seconds) -> size_t {
      HttpProbe p(port);
      if (!p.connected() || !p.send_raw(request)) return 0;
      static std::vector<char> buf(4u << 20);
      size_t got = 0;
      const auto t0 = Clock::now();
      for (;;) {
        const ssize_t n = ::recv(p.fd(), buf.data(), buf.size(), 0);
        if (n <= 0) break;
        got += static_cast<size_t>(n);
      }
      *seconds = std::chrono::duration<double>(Clock::now() - t0).count();
      return got;
    };
    const std::string stream_via = "GET /v1/sandboxes/" + id +
                                   "/ports/8001/ HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                                   tok + "\r\nConnection: close\r\n\r\n";
    double via_s = 0, direct_s = 0;
    size_t via_bytes = 0;
    for (int i = 0; i < 200 && via_bytes < (static_cast<size_t>(stream_mib) << 20); ++i) {
      via_bytes = drain(server.port, stream_via, &via_s);
      if (via_bytes < (static_cast<size_t>(stream_mib) << 20))
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    size_t direct_bytes = 0;
    for (int i = 0; i < 200 && direct_bytes < (static_cast<size_t>(stream_mib) << 20); ++i) {
      direct_bytes = drain(host_port + 1, "GET / HTTP/1.0\r\n\r\n", &direct_s);
      if (direct_bytes < (static_cast<size_t>(stream_mib) << 20))
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (via_bytes < (static_cast<size_t>(stream_mib) << 20)) {
      std::fprintf(stderr, "stream: only %zu bytes came through serve\n", via_bytes);
      return 1;
    }
    std::printf("stream: %d MiB through serve, the door and the runner  %6.2f GB/s  (bar 1.00)\n",
                stream_mib, static_cast<double>(via_bytes) / via_s / 1e9);
    std::printf("  the same server on the host, read directly        %6.2f GB/s\n",
                static_cast<double>(direct_bytes) / direct_s / 1e9);

    // 4c. Pause and resume (issue 42): a sandbox with 10 processes, each
    // request through serve and the door to the cgroup freezer.
    {
      const std::string sb = bench::create_sandbox(server.port, tok, "{}");
      if (sb.empty()) return 1;
      for (int k = 0; k < 10; ++k) {
        (void)api.request("POST", "/v1/sandboxes/" + sb + "/processes", tok,
                          R"({"argv": ["sleep", "100000"]})");
      }
      std::vector<double> pause_us, resume_us;
      for (int i = 0; i < iterations / 2 + 10; ++i) {
        const auto t0 = Clock::now();
        auto pr = api.request("POST", "/v1/sandboxes/" + sb + ":pause", tok);
        const double p_us = us_since(t0);
        const auto t1 = Clock::now();
        auto rr = api.request("POST", "/v1/sandboxes/" + sb + ":resume", tok);
        const double r_us = us_since(t1);
        if (pr.status != 200 || rr.status != 200) {
          std::fprintf(stderr, "pause: %d %s / %d %s\n", pr.status, pr.body.c_str(), rr.status,
                       rr.body.c_str());
          return 1;
        }
        if (i >= 10) {
          pause_us.push_back(p_us);
          resume_us.push_back(r_us);
        }
      }
      const auto ps = bench::summarise(pause_us), rs = bench::summarise(resume_us);
      std::printf("pause: 10 processes, through serve    p50 %7.0f us  p99 %7.0f us  (bar 5000)\n",
                  ps.p50, ps.p99);
      std::printf("resume: the same                      p50 %7.0f us  p99 %7.0f us  (bar 5000)\n",
                  rs.p50, rs.p99);
      (void)api.request("DELETE", "/v1/sandboxes/" + sb, tok);
    }

    // 5. Idle processes: the worker's CPU and memory.
    std::vector<std::pair<std::string, std::string>> idle;  // sandbox, token
    for (int i = 0; i < idle_sandboxes; ++i) {
      const std::string& t = tokens[static_cast<size_t>(i / 50)];
      const std::string sb = bench::create_sandbox(server.port, t, "{}");
      if (sb.empty()) return 1;
      idle.emplace_back(sb, t);
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const long rss0 = status_field(worker.pid, "VmRSS");
    const double quiet0 = cpu_ms(worker.pid);
    std::this_thread::sleep_for(std::chrono::seconds(quiet));
    const double base_cpu = cpu_ms(worker.pid) - quiet0;
    for (const auto& [sb, t] : idle) {
      HttpProbe p(server.port);
      for (int k = 0; k < idle_per; ++k) {
        auto r = p.request("POST", "/v1/sandboxes/" + sb + "/processes", t,
                           R"({"argv": ["sleep", "100000"]})");
        if (r.status != 201) {
          std::fprintf(stderr, "idle start: %d %s\n", r.status, r.body.c_str());
          return 1;
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const long rss1 = status_field(worker.pid, "VmRSS");
    const long threads = status_field(worker.pid, "Threads");
    const double quiet1 = cpu_ms(worker.pid);
    std::this_thread::sleep_for(std::chrono::seconds(quiet));
    const double idle_cpu = cpu_ms(worker.pid) - quiet1;
    const int n = idle_sandboxes * idle_per;
    std::printf(
        "idle: %d processes in %d sandboxes; worker CPU over %d s: %.0f ms (%.0f ms "
        "without them)\n",
        n, idle_sandboxes, quiet, idle_cpu, base_cpu);
    std::printf("  worker memory: +%ld KiB, %.1f KiB a process (bar 64), %ld threads\n",
                rss1 - rss0, static_cast<double>(rss1 - rss0) / n, threads);
    for (const auto& [sb, t] : idle) {
      HttpProbe p(server.port);
      (void)p.request("DELETE", "/v1/sandboxes/" + sb, t);
    }
    if (s.p50 > 2000 || f.p50 - fl.p50 > 1000 || w.p50 > 5000) rc = 2;
  }
  std::filesystem::remove_all(dir);
  return rc;
}
