// Shared by the benchmarks: an output sink that drops everything, and
// percentiles of a list of samples.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "sandbox/sandbox.h"

extern char** environ;

namespace rf::bench {

// This process's directory for run_cli's files: made at its first use,
// removed when the process exits (a forked child that uses it gets its own).
// Each bench run left one behind before.
inline std::string io_dir() {
  struct Dir {
    std::string path;
    pid_t owner = 0;
    ~Dir() {
      std::error_code ec;
      if (owner == ::getpid()) std::filesystem::remove_all(path, ec);
    }
  };
  static Dir dir;
  if (dir.owner != ::getpid()) {
    dir.owner = ::getpid();
    dir.path =
        std::filesystem::temp_directory_path() / ("rf-bench-io-" + std::to_string(dir.owner));
    std::filesystem::create_directories(dir.path);
  }
  return dir.path;
}

// Runs `cli` with `args` to its end, `in` on its stdin; its exit status (-1
// when it could not start or was killed), its stdout in *out.
inline int run_cli(const std::string& cli, const std::vector<std::string>& args, std::string* out,
                   const std::string& in = "") {
  const std::string dir = io_dir();
  const std::string in_path = dir + "/in", out_path = dir + "/out";
  std::ofstream(in_path) << in;
  std::vector<char*> argv{const_cast<char*>(cli.c_str())};
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, in_path.c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int st = 0;
  ::waitpid(pid, &st, 0);
  if (out) {
    std::ifstream f(out_path);
    std::stringstream ss;
    ss << f.rdbuf();
    *out = ss.str();
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// Starts `argv` in the background (a worker): stdout to /dev/null, stderr to
// `log`. Its pid, or -1.
inline pid_t start_background(const std::vector<std::string>& argv, const std::string& log) {
  std::vector<char*> v;
  for (const auto& a : argv) v.push_back(const_cast<char*>(a.c_str()));
  v.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = -1;
  if (posix_spawn(&pid, v[0], &fa, nullptr, v.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

struct NullSink : rf::OutputSink {
  void on_stdout(std::string_view) override {}
  void on_stderr(std::string_view) override {}
};

struct Stats {
  double p50, p99, mean;
};

inline Stats summarise(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  double sum = 0;
  for (double v : us) sum += v;
  auto pct = [&](double p) {
    return us[std::min(us.size() - 1, static_cast<size_t>(p * us.size()))];
  };
  return {pct(0.50), pct(0.99), sum / us.size()};
}

// The bubblewrap peer of a cold sandbox run, `/bin/true` in it: as close to
// our host image as bwrap's flags allow: read-only /usr and /etc pieces, new
// /proc and /dev, tmpfs /tmp and /workspace, every namespace.
inline std::vector<std::string> bwrap_args() {
  std::vector<std::string> a = {
      "/usr/bin/bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--ro-bind",
      "/usr",           "/usr"};
  for (const char* l : {"bin", "sbin", "lib", "lib64"}) {
    char target[256];
    const std::string path = std::string("/") + l;
    const ssize_t n = readlink(path.c_str(), target, sizeof target - 1);
    if (n > 0) a.insert(a.end(), {"--symlink", std::string(target, n), path});
  }
  a.insert(a.end(), {"--ro-bind",
                     "/etc/ld.so.cache",
                     "/etc/ld.so.cache",
                     "--ro-bind",
                     "/etc/ssl/certs",
                     "/etc/ssl/certs",
                     "--ro-bind",
                     "/etc/alternatives",
                     "/etc/alternatives",
                     "--proc",
                     "/proc",
                     "--dev",
                     "/dev",
                     "--tmpfs",
                     "/tmp",
                     "--tmpfs",
                     "/workspace",
                     "--chdir",
                     "/workspace",
                     "--hostname",
                     "bench",
                     "--clearenv",
                     "--setenv",
                     "PATH",
                     "/usr/bin:/bin",
                     "/bin/true"});
  return a;
}

}  // namespace rf::bench
