// The store's engines as real clients use them (issue 40): each call is a
// `ringfence call` process of its own, 16 at a time, against real `ringfence
// worker start` processes: SQLite with one worker, then PostgreSQL (a cluster
// the bench starts, tests/support/postgres_server.h) with three, in one run.
// The bar: PostgreSQL >= 0.7x SQLite's calls/s. Also how long `ringfence
// fleet status` takes on each (the bar: <= 50 ms), and how many connections
// one `call` process holds on PostgreSQL at once (pg_stat_activity).
// With --pooler, a third row: the same PostgreSQL through pgbouncer in session
// mode (clients then get a warm backend instead of forking one each).
// Usage: rf_fleet_bench [--calls N] [--clients C] [--mode per_tool|per_run|none] [--pooler]
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "store/db.h"
#include "store/postgres.h"
#include "store/store.h"
#include "support/postgres_server.h"

extern char** environ;
using namespace std::chrono;

namespace {

pid_t spawn(const std::vector<std::string>& args, const std::string& log = "/dev/null") {
  std::vector<char*> argv{const_cast<char*>(RF_CLI_PATH)};
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  pid_t pid = -1;
  if (posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

int wait_exit(pid_t pid) {
  int st = 0;
  if (::waitpid(pid, &st, 0) != pid) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

struct Figures {
  double calls_per_s = 0;
  int failed = 0;
  double status_ms = 0;  // median of `fleet status`
};

// The first line of a file that starts with `prefix` ("" when none).
std::string line_starting(const std::string& path, const std::string& prefix) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) return line;
  }
  return "";
}

// `serve` on the store, on a free loopback port, and a token of the project
// `bench` in RINGFENCE_TOKEN: the API URL the clients then call through.
std::string start_serve(const std::string& target, const std::string& dir, pid_t* pid) {
  const std::string token_file = dir + "/token";
  if (wait_exit(spawn({"token", "create", "--store", target, "--project", "bench"}, token_file)) !=
      0) {
    std::fprintf(stderr, "token create failed: %s\n", token_file.c_str());
    std::exit(1);
  }
  ::setenv("RINGFENCE_TOKEN", line_starting(token_file, "rft_").c_str(), 1);
  const std::string log = dir + "/serve.log";
  *pid = spawn(
      {"serve", "--store", target, "--state-dir", dir + "/serve", "--listen", "127.0.0.1:0"}, log);
  for (int i = 0; i < 400; ++i) {
    const std::string said = line_starting(log, "listening on http://");
    if (!said.empty()) return said.substr(std::strlen("listening on "));
    std::this_thread::sleep_for(milliseconds(25));
  }
  std::fprintf(stderr, "serve did not start: %s\n", log.c_str());
  std::exit(1);
}

// With `via_serve`, the clients are `call --api` processes through one
// `serve` on the same store.
Figures run(const std::string& target, const std::string& dir, int workers, int clients, int calls,
            const std::string& mode, bool via_serve = false) {
  Figures f;
  std::filesystem::create_directories(dir);
  std::vector<pid_t> worker_pids;
  for (int n = 0; n < workers; ++n) {
    const std::string id = "fb-w" + std::to_string(n);
    const pid_t pid =
        spawn({"worker", "start", "--store", target, "--state-dir", dir + "/" + id, "--worker-id",
               id, "--host-id", id, "--sandbox-mode", mode, "--concurrency", "16"},
              dir + "/" + id + ".log");
    if (pid < 0) {
      std::fprintf(stderr, "worker %s did not start\n", id.c_str());
      std::exit(1);
    }
    worker_pids.push_back(pid);
  }
  {
    auto st = rf::store::Store::open(target);
    if (!st) {
      std::fprintf(stderr, "%s\n", st.error().to_string().c_str());
      std::exit(1);
    }
    for (int i = 0; i < 300; ++i) {
      auto rows = (*st)->workers();
      int live = 0;
      if (rows) {
        for (const auto& w : *rows) live += w.state == rf::store::WorkerState::running;
      }
      if (live == workers) break;
      std::this_thread::sleep_for(milliseconds(50));
    }
  }
  pid_t serve_pid = -1;
  const std::string api = via_serve ? start_serve(target, dir, &serve_pid) : "";
  // Warm up: each client's run has its sandbox before the clock starts.
  auto one_call = [&](int client, int i) {
    const std::string run = "fb-r" + std::to_string(client);
    const pid_t pid =
        via_serve ? spawn({"call", "--api", api, "--run", run, "--", "true"}, dir + "/calls.log")
                  : spawn({"call", "--store", target, "--state-dir", dir + "/c", "--project",
                           "bench", "--run", run, "--wait-timeout", "60s", "--", "true"});
    (void)i;
    return pid > 0 ? wait_exit(pid) : -1;
  };
  {
    std::vector<std::thread> warm;
    for (int c = 0; c < clients; ++c) warm.emplace_back([&, c] { (void)one_call(c, -1); });
    for (auto& t : warm) t.join();
  }
  std::atomic<int> next{0}, failed{0};
  const auto start = steady_clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      while (next.fetch_add(1) < calls) {
        if (one_call(c, 0) != 0) ++failed;
      }
    });
  }
  for (auto& t : threads) t.join();
  f.calls_per_s = calls / duration<double>(steady_clock::now() - start).count();
  f.failed = failed;
  std::vector<double> status;
  for (int i = 0; i < 21; ++i) {
    const auto t0 = steady_clock::now();
    const pid_t pid = spawn({"fleet", "status", "--store", target});
    if (wait_exit(pid) != 0) ++f.failed;
    status.push_back(duration<double, std::milli>(steady_clock::now() - t0).count());
  }
  std::sort(status.begin(), status.end());
  f.status_ms = status[status.size() / 2];
  if (serve_pid > 0) {
    ::kill(serve_pid, SIGTERM);
    (void)wait_exit(serve_pid);
  }
  for (pid_t pid : worker_pids) ::kill(pid, SIGTERM);
  for (pid_t pid : worker_pids) (void)wait_exit(pid);
  return f;
}

// The most connections a `call` process held at once, seen in
// pg_stat_activity while one waits on a call that sleeps.
int connections_of_a_call(const std::string& target, const std::string& dir) {
  const pid_t worker = spawn({"worker", "start", "--store", target, "--state-dir", dir + "/cw",
                              "--worker-id", "fb-conn", "--sandbox-mode", "per_run"},
                             dir + "/cw.log");
  std::this_thread::sleep_for(milliseconds(1500));
  auto db = rf::store::Db::open(target);
  int before = 0, most = 0;
  auto count = [&]() {
    auto st = db->prepare(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND backend_type = 'client backend'");
    if (!st || !*st->step()) return -1;
    return static_cast<int>(st->int64(0));
  };
  before = count();
  const pid_t call = spawn({"call", "--store", target, "--state-dir", dir + "/c", "--project",
                            "bench", "--run", "fb-conn", "--", "sleep", "1.5"});
  for (int i = 0; i < 25; ++i) {
    std::this_thread::sleep_for(milliseconds(50));
    most = std::max(most, count() - before);
  }
  (void)wait_exit(call);
  ::kill(worker, SIGTERM);
  (void)wait_exit(worker);
  return most;
}

// pgbouncer (Debian's) in session mode in front of `pg`, on a unix socket of
// its own, as nobody; the database `bench` it serves. Returns the URI through
// it, or "" (and says why).
std::string start_pgbouncer(rf::testing::PostgresServer& pg, const std::string& dir, pid_t* pid) {
  auto db = rf::store::Db::open(pg.uri());
  if (!db.ok() || !db->exec("CREATE DATABASE bench").ok()) {
    std::fprintf(stderr, "CREATE DATABASE bench failed\n");
    return "";
  }
  (void)dir;
  char tmpl[] = "/tmp/rf-pgbouncer-XXXXXX";  // nobody's: the bench's dir is root's alone
  if (::mkdtemp(tmpl) == nullptr || ::chown(tmpl, 65534, 65534) != 0) return "";
  const std::string run = tmpl;
  const std::string ini = run + "/pgbouncer.ini";
  FILE* f = std::fopen(ini.c_str(), "w");
  if (f == nullptr) return "";
  std::fprintf(f,
               "[databases]\nbench = host=%s port=%d dbname=bench user=rf\n"
               "[pgbouncer]\nlisten_addr =\nlisten_port = 6543\nunix_socket_dir = %s\n"
               "auth_type = any\npool_mode = session\nmax_client_conn = 1000\n"
               "default_pool_size = 64\nserver_reset_query = DISCARD ALL\n"
               "logfile = %s/pgbouncer.log\n",
               pg.dir().c_str(), pg.port(), run.c_str(), run.c_str());
  std::fclose(f);
  std::vector<char*> argv{const_cast<char*>("/usr/sbin/pgbouncer"), const_cast<char*>("-u"),
                          const_cast<char*>("nobody"), const_cast<char*>(ini.c_str()), nullptr};
  if (posix_spawn(pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) {
    std::fprintf(stderr, "pgbouncer did not start (apt-get install pgbouncer)\n");
    return "";
  }
  const std::string uri = "postgresql://rf@/bench?host=" + run + "&port=6543";
  for (int i = 0; i < 200; ++i) {
    if (rf::store::Db::open(uri).ok()) return uri;
    std::this_thread::sleep_for(milliseconds(50));
  }
  std::fprintf(stderr, "pgbouncer did not accept within 10 s (%s/pgbouncer.log)\n", run.c_str());
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  int calls = 400, clients = 16;
  std::string mode = "per_tool";
  bool pooler = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--calls") && i + 1 < argc) calls = std::atoi(argv[++i]);
    if (!std::strcmp(argv[i], "--clients") && i + 1 < argc) clients = std::atoi(argv[++i]);
    if (!std::strcmp(argv[i], "--mode") && i + 1 < argc) mode = argv[++i];
    if (!std::strcmp(argv[i], "--pooler")) pooler = true;
  }
  rf::store::enable_postgres();
  rf::testing::PostgresServer pg;
  if (!pg.ok()) {
    std::fprintf(stderr, "PostgreSQL did not start: %s\n", pg.error().c_str());
    return 1;
  }
  char tmpl[] = "/tmp/rf-fleet-bench-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  std::printf("sandbox mode %s\n", mode.c_str());
  std::printf("%-10s %8s %8s %8s %10s %8s %16s\n", "engine", "workers", "clients", "calls",
              "calls/s", "failed", "fleet status ms");
  const Figures sqlite =
      run(dir + "/sqlite/ringfence.db", dir + "/sqlite", 1, clients, calls, mode);
  std::printf("%-10s %8d %8d %8d %10.1f %8d %16.1f\n", "sqlite", 1, clients, calls,
              sqlite.calls_per_s, sqlite.failed, sqlite.status_ms);
  std::fflush(stdout);
  const std::string pg_target = pg.fresh_schema_uri();
  const Figures postgres = run(pg_target, dir + "/pg", 3, clients, calls, mode);
  std::printf("%-10s %8d %8d %8d %10.1f %8d %16.1f\n", "postgres", 3, clients, calls,
              postgres.calls_per_s, postgres.failed, postgres.status_ms);
  std::printf("postgres / sqlite: %.2fx (bar: >= 0.7x)\n",
              postgres.calls_per_s / sqlite.calls_per_s);
  int failed = sqlite.failed + postgres.failed;
  // The same fleet with its clients through serve (`call --api`): one
  // process that keeps its connections warm, instead of libpq and a fresh
  // backend in every client.
  const Figures served = run(pg.fresh_schema_uri(), dir + "/pg-serve", 3, clients, calls, mode,
                             /*via_serve=*/true);
  std::printf("%-10s %8d %8d %8d %10.1f %8d %16.1f\n", "pg, serve", 3, clients, calls,
              served.calls_per_s, served.failed, served.status_ms);
  std::printf("postgres with clients through serve / sqlite: %.2fx (bar: >= 0.7x)\n",
              served.calls_per_s / sqlite.calls_per_s);
  failed += served.failed;
  if (pooler) {
    pid_t pgb = -1;
    const std::string through = start_pgbouncer(pg, dir, &pgb);
    if (through.empty()) return 1;
    const Figures pooled = run(through, dir + "/pgb", 3, clients, calls, mode);
    std::printf("%-10s %8d %8d %8d %10.1f %8d %16.1f\n", "pgbouncer", 3, clients, calls,
                pooled.calls_per_s, pooled.failed, pooled.status_ms);
    std::printf("postgres through pgbouncer / sqlite: %.2fx\n",
                pooled.calls_per_s / sqlite.calls_per_s);
    failed += pooled.failed;
    ::kill(pgb, SIGTERM);
    (void)wait_exit(pgb);
  }
  std::printf("connections one `call` process holds on PostgreSQL: %d (bar: 1)\n",
              connections_of_a_call(pg_target, dir + "/pg"));
  if (!getenv("RF_KEEP")) std::system(("rm -rf " + dir).c_str());
  return failed == 0 ? 0 : 1;
}
