// CLI start benchmark (issue 10): what a user pays per call of the `ringfence`
// process, end to end (spawn to exit), against peers in the same run.
//   version  ringfence --version    vs runc --version, bwrap --version, and the
//            static tool runner's --version (the floor of a process start here)
//   exec     ringfence sandbox exec -- /bin/true    vs the bwrap peer of rf_bench
//   call     ringfence call -- true to a warm per_run worker the bench starts
//            itself (its own state dir and HOME, stopped by pid at the end)
// The cases of a group run in turn, one iteration each, so a change in the
// machine's load reaches all of them alike. Percentiles of wall time.
// --baseline PATH adds the same commands run by another `ringfence` binary (an
// older build, with its tool runner beside it) to each group: before and after
// in one run.
// Usage: rf_cli_bench [--iterations N] [--only version|exec|call] [--baseline PATH]
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.h"
#include "host/seccomp_profile.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

struct Case {
  std::string name;
  std::vector<std::string> argv;
  std::vector<double> us;
  std::vector<std::pair<int, std::string>> opens = {};  // fd -> file opened for it in the child
};

// Spawns argv with stdin at EOF (/dev/null, as agents call the CLI), stdout
// and stderr on /dev/null (or stdout on `out_fd`), and env `env` (null:
// ours); `opens` are opened read-only at their fds in the child. Returns the
// pid, or -1.
pid_t spawn(const std::vector<std::string>& args, char** env, int out_fd = -1,
            const std::vector<std::pair<int, std::string>>& opens = {}) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  for (const auto& [fd, path] : opens) {
    posix_spawn_file_actions_addopen(&fa, fd, path.c_str(), O_RDONLY, 0);
  }
  if (out_fd >= 0) {
    posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
  } else {
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  }
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int rc =
      posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), env != nullptr ? env : environ);
  posix_spawn_file_actions_destroy(&fa);
  return rc == 0 ? pid : -1;
}

// Microseconds from spawn to the exit of a process that must exit 0.
double run_once(const Case& c, char** env) {
  const auto start = Clock::now();
  const pid_t pid = spawn(c.argv, env, -1, c.opens);
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "rf_cli_bench: %s failed (status %d)\n", c.name.c_str(), status);
    std::exit(1);
  }
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

// One group: every case once per iteration, in turn; the first tenth warms up.
void run_group(std::vector<Case>& cases, int n, char** env = nullptr) {
  for (int i = 0; i < n + n / 10; ++i) {
    for (Case& c : cases) {
      const double us = run_once(c, env);
      if (i >= n / 10) c.us.push_back(us);
    }
  }
}

rf::bench::Stats report(const std::string& group, const Case& c) {
  const rf::bench::Stats s = rf::bench::summarise(c.us);
  std::printf("%-8s %-44s %8.2f %8.2f %8.2f\n", group.c_str(), c.name.c_str(), s.p50 / 1000,
              s.p99 / 1000, s.mean / 1000);
  return s;
}

// A per_run worker of our own: a fresh state dir and HOME (no worker.yaml of
// the user's), started once and stopped by its pid.
class BenchWorker {
 public:
  explicit BenchWorker(const std::string& cli) : cli_(cli) {
    char tmpl[] = "/tmp/rf-cli-bench-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
      std::perror("rf_cli_bench: mkdtemp");
      std::exit(1);
    }
    dir_ = tmpl;
    home_ = "HOME=" + dir_;
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::strncmp(*e, "HOME=", 5) != 0) env_.push_back(*e);
    }
    env_.push_back(home_.data());
    env_.push_back(nullptr);
  }
  ~BenchWorker() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  const std::string& state_dir() const { return dir_; }
  char** env() { return env_.data(); }

  // Starts the worker and waits until it says it serves.
  bool start() {
    const std::string log = dir_ + "/worker.log";
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return false;
    pid_ = spawn({cli_, "worker", "start", "--state-dir", dir_ + "/state", "--sandbox-mode",
                  "per_run", "--project-environment", "development"},
                 env(), fd);
    close(fd);
    if (pid_ < 0) return false;
    for (int i = 0; i < 200; ++i) {  // 10 s
      std::ifstream in(log);
      std::stringstream text;
      text << in.rdbuf();
      if (text.str().find(" serving: ") != std::string::npos) return true;
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

 private:
  std::string cli_, dir_, home_;
  std::vector<char*> env_;
  pid_t pid_ = -1;
};

bool executable(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

// ringfence's default seccomp programs, one file each, for bwrap's
// --add-seccomp-fd (raw struct sock_filter arrays, as bwrap reads them).
std::vector<std::string> seccomp_files() {
  auto filters = rf::host::build_seccomp_profile("default");
  if (!filters) return {};
  char tmpl[] = "/tmp/rf-cli-bench-bpf-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return {};
  std::vector<std::string> out;
  for (const auto* prog : {&filters->allowlist, &filters->arg_rules}) {
    const std::string path = std::string(tmpl) + "/" + std::to_string(out.size()) + ".bpf";
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(prog->data()),
            static_cast<std::streamsize>(prog->size() * sizeof(sock_filter)));
    out.push_back(path);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int n = 300;
  std::string only, baseline;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--iterations") && i + 1 < argc) {
      n = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--only") && i + 1 < argc) {
      only = argv[++i];
    } else if (!std::strcmp(argv[i], "--baseline") && i + 1 < argc) {
      baseline = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: rf_cli_bench [--iterations N] [--only version|exec|call] "
                   "[--baseline PATH]\n");
      return 2;
    }
  }
  if (!baseline.empty() && !executable(baseline)) {
    std::fprintf(stderr, "rf_cli_bench: --baseline %s: not executable\n", baseline.c_str());
    return 2;
  }
  const std::string cli = RF_CLI_PATH;
  const std::string runner = RF_RUNNER_PATH;
  std::printf(
      "rf_cli_bench: %d iterations per case after %d warm-up, the cases of a group in "
      "turn; wall time from spawn to exit, ms\n",
      n, n / 10);
  std::printf("%-8s %-44s %8s %8s %8s\n", "group", "case", "p50", "p99", "mean");

  if (only.empty() || only == "version") {
    std::vector<Case> cases = {{"ringfence --version", {cli, "--version"}, {}}};
    for (const char* runc : {"/usr/sbin/runc", "/usr/bin/runc"}) {
      if (!executable(runc)) continue;
      cases.push_back({"runc --version", {runc, "--version"}, {}});
      break;
    }
    if (executable("/usr/bin/bwrap"))
      cases.push_back({"bwrap --version", {"/usr/bin/bwrap", "--version"}, {}});
    cases.push_back({"ringfence-tool-runner --version (static floor)", {runner, "--version"}, {}});
    if (!baseline.empty())
      cases.push_back({"baseline: ringfence --version", {baseline, "--version"}, {}});
    run_group(cases, n);
    const auto rf = report("version", cases[0]);
    for (size_t i = 1; i < cases.size(); ++i) report("version", cases[i]);
    std::printf("version: ringfence p50 %.2f ms (target <= 1.00 ms)\n", rf.p50 / 1000);
  }

  if (only.empty() || only == "exec") {
    std::vector<Case> cases = {
        {"ringfence sandbox exec -- /bin/true", {cli, "sandbox", "exec", "--", "/bin/true"}, {}}};
    const bool bwrap = executable("/usr/bin/bwrap");
    if (bwrap) cases.push_back({"bwrap (rf_bench's peer) /bin/true", rf::bench::bwrap_args(), {}});
    // The same peer with ringfence's own two seccomp filters stacked
    // (--add-seccomp-fd): one bound of ours that bwrap's peer lacks, priced.
    if (bwrap) {
      if (auto files = seccomp_files(); !files.empty()) {
        Case c{"bwrap + ringfence's seccomp filters /bin/true", rf::bench::bwrap_args(), {}};
        c.argv.insert(c.argv.end() - 1, {"--add-seccomp-fd", "10", "--add-seccomp-fd", "11"});
        c.opens = {{10, files[0]}, {11, files[1]}};
        cases.push_back(std::move(c));
      }
    }
    if (!baseline.empty()) {
      cases.push_back({"baseline: ringfence sandbox exec -- /bin/true",
                       {baseline, "sandbox", "exec", "--", "/bin/true"},
                       {}});
    }
    run_group(cases, n);
    const auto rf = report("exec", cases[0]);
    for (size_t i = 1; i < cases.size(); ++i) {
      const auto s = report("exec", cases[i]);
      if (bwrap && i == 1)
        std::printf("exec: ringfence/bwrap p50 ratio %.2f (target <= 1.00)\n", rf.p50 / s.p50);
    }
  }

  if (only.empty() || only == "call") {
    BenchWorker worker(cli);
    if (!worker.start()) {
      std::fprintf(stderr, "rf_cli_bench: the worker did not start (log in %s)\n",
                   worker.state_dir().c_str());
      return 1;
    }
    const std::string state = worker.state_dir() + "/state";
    std::vector<Case> cases = {
        {"ringfence call -- true (warm per_run worker)",
         {cli, "call", "--state-dir", state, "--project", "bench", "--run", "bench", "--", "true"},
         {}},
        {"ringfence --version (process start)", {cli, "--version"}, {}}};
    if (!baseline.empty()) {
      cases.push_back({"baseline: ringfence call -- true",
                       {baseline, "call", "--state-dir", state, "--project", "bench", "--run",
                        "bench", "--", "true"},
                       {}});
    }
    run_once(cases[0], worker.env());  // creates the run's sandbox: every call after is warm
    run_group(cases, n, worker.env());
    const auto call = report("call", cases[0]);
    for (size_t i = 1; i < cases.size(); ++i) report("call", cases[i]);
    std::printf("call: p50 %.2f ms (target <= 3.00 ms)\n", call.p50 / 1000);
  }
  return 0;
}
