// Shared by the benchmarks: an output sink that drops everything, and
// percentiles of a list of samples.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "sandbox/sandbox.h"

namespace rf::bench {

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
