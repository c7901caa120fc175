// A throwaway PostgreSQL cluster of the test process's own: Debian's
// postgresql-15, `initdb` into a temporary directory, then `postgres` on a unix
// socket in that directory and 127.0.0.1:<free port>. Never a system cluster.
//
// PostgreSQL refuses to run as root, so initdb and the server run as nobody
// (the directory is nobody's). The server gets SIGQUIT (immediate shutdown)
// when the thread that started it ends (PR_SET_PDEATHSIG), so a test process
// that crashes leaves no server behind; the directory is removed by stop().
//
// Tests get a fresh schema each (fresh_schema_uri): the same cluster and
// database, an empty namespace on the connection's search_path. (Benchmarks
// start one too: bench/store_bench.cc.)
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "store/db.h"
#include "store/postgres.h"

namespace rf::testing {

class PostgresServer {
 public:
  static constexpr const char* kBin = "/usr/lib/postgresql/15/bin";
  static constexpr uid_t kNobody = 65534;
  static constexpr gid_t kNogroup = 65534;

  // Starts a cluster; on failure, error() says why (and the server's log).
  // `also_listen`: an address besides 127.0.0.1 (one the test gave a veth of
  // its own) that the server listens on and trusts clients from. `netns`:
  // the network namespace the server runs in (/run/netns/NAME, one the test
  // made); its unix socket is reached from any.
  explicit PostgresServer(std::string also_listen = "", std::string netns = "")
      : also_listen_(std::move(also_listen)), netns_(std::move(netns)) {
    store::enable_postgres();
    std::string tmpl = (std::filesystem::temp_directory_path() / "rf-pg-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      error_ = "mkdtemp failed";
      return;
    }
    dir_ = tmpl;
    if (::chown(dir_.c_str(), kNobody, kNogroup) != 0) {
      error_ = "chown " + dir_ + " to nobody failed (the tests run as root)";
      return;
    }
    port_ = free_port();
    const std::string data = dir_ + "/data";
    int rc = run_as_nobody({std::string(kBin) + "/initdb", "-D", data, "-A", "trust", "-U", "rf",
                            "-E", "UTF8", "--locale=C", "--no-sync"},
                           dir_ + "/initdb.log");
    if (rc != 0) {
      error_ = "initdb exited " + std::to_string(rc) + ": " + slurp(dir_ + "/initdb.log");
      return;
    }
    if (!also_listen_.empty()) {
      std::ofstream hba(data + "/pg_hba.conf", std::ios::app);
      hba << "host all all " << also_listen_ << "/24 trust\n";
    }
    start();
  }

  ~PostgresServer() { stop(); }
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  const std::string& error() const { return error_; }
  bool ok() const { return error_.empty() && pid_ > 0; }
  const std::string& dir() const { return dir_; }
  int port() const { return port_; }

  // The cluster's database `postgres`, over the unix socket.
  std::string uri() const {
    return "postgresql://rf@/postgres?host=" + dir_ + "&port=" + std::to_string(port_);
  }
  // The same over TCP on 127.0.0.1 (or `address`).
  std::string tcp_uri(const std::string& address = "127.0.0.1") const {
    return "postgresql://rf@" + address + ":" + std::to_string(port_) + "/postgres";
  }

  // A new, empty schema, and a URI whose connections use it.
  std::string fresh_schema_uri() {
    const std::string schema = "t" + std::to_string(++schemas_);
    auto db = store::Db::open(uri());
    if (!db.ok() || !db->exec("CREATE SCHEMA " + schema).ok()) return "";
    return uri() + "&options=-csearch_path%3D" + schema;
  }

  // Starts the server (again, after stop_server()); waits until it accepts.
  void start() {
    if (pid_ > 0) return;
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
      const int log = ::open((dir_ + "/server.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
      if (log >= 0) {
        ::dup2(log, 1);
        ::dup2(log, 2);
      }
      if (!netns_.empty()) {
        const int ns = ::open(("/run/netns/" + netns_).c_str(), O_RDONLY | O_CLOEXEC);
        if (ns < 0 || ::setns(ns, CLONE_NEWNET) != 0) ::_exit(125);
        ::close(ns);
      }
      become_nobody();
      // After setuid, which clears it: the server ends with the test's thread.
      ::prctl(PR_SET_PDEATHSIG, SIGQUIT);
      if (::getppid() != parent) ::_exit(1);
      const std::string port = std::to_string(port_);
      const std::string data = dir_ + "/data";
      const std::string postgres = std::string(kBin) + "/postgres";
      std::vector<std::string> argv = {
          postgres, "-D", data, "-k", dir_, "-p", port, "-c",
          "listen_addresses=127.0.0.1" + (also_listen_.empty() ? "" : "," + also_listen_),
          // A commit is in the WAL when it returns (the
          // tests crash the server and count calls), but
          // never waits for the disk: the OS keeps it.
          "-c", "fsync=off", "-c", "full_page_writes=off", "-c", "max_connections=300"};
      // RF_TEST_PG_OPTIONS: more settings, for a profile (space-separated
      // name=value: shared_preload_libraries=pg_stat_statements).
      if (const char* extra = std::getenv("RF_TEST_PG_OPTIONS")) {
        std::istringstream words(extra);
        for (std::string w; words >> w;) {
          argv.push_back("-c");
          argv.push_back(w);
        }
      }
      exec(argv);
    }
    if (pid_ < 0) {
      error_ = "fork failed";
      return;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      if (store::Db::open(uri()).ok()) return;
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        error_ = "postgres exited: " + slurp(dir_ + "/server.log");
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    error_ = "postgres did not accept connections within 60 s: " + slurp(dir_ + "/server.log");
  }

  // Ends the server at once (SIGQUIT: immediate shutdown), keeping its data.
  void stop_server() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGQUIT);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  void stop() {
    stop_server();
    if (!dir_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
      dir_.clear();
    }
  }

 private:
  static int free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int port = 0;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
      port = ntohs(a.sin_port);
    }
    ::close(fd);
    return port;
  }

  static void become_nobody() {
    if (::setgroups(0, nullptr) != 0 || ::setgid(kNogroup) != 0 || ::setuid(kNobody) != 0) {
      ::_exit(126);
    }
  }

  [[noreturn]] static void exec(const std::vector<std::string>& argv) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    char path[] = "PATH=/usr/bin:/bin";
    char lang[] = "LC_ALL=C";
    char* env[] = {path, lang, nullptr};
    ::execve(args[0], args.data(), env);
    ::_exit(127);
  }

  int run_as_nobody(const std::vector<std::string>& argv, const std::string& log_path) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (log >= 0) {
        ::dup2(log, 1);
        ::dup2(log, 2);
      }
      if (::chdir(dir_.c_str()) != 0) ::_exit(125);
      become_nobody();
      exec(argv);
    }
    int status = 0;
    if (pid < 0 || ::waitpid(pid, &status, 0) != pid) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  static std::string slurp(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  std::string also_listen_, netns_;
  std::string dir_;
  std::string error_;
  int port_ = 0;
  pid_t pid_ = -1;
  std::atomic<int> schemas_{0};
};

}  // namespace rf::testing
