#include "host/runner_binary.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "proto/messages.h"

namespace rf::host {

Result<std::string> find_runner_binary() {
  if (const char* env = std::getenv("RINGFENCE_TOOL_RUNNER"); env && *env) return std::string(env);
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  std::vector<std::string> candidates;
  if (n > 0) {
    std::string dir(self, static_cast<size_t>(n));
    dir.resize(dir.rfind('/'));
    candidates.push_back(dir + "/ringfence-tool-runner");
  }
  candidates.push_back("/usr/libexec/ringfence/ringfence-tool-runner");
  for (const auto& c : candidates) {
    if (::access(c.c_str(), X_OK) == 0) return c;
  }
  return make_error("tool runner", "ringfence-tool-runner not found (looked in " + candidates[0] +
                                       "; set RINGFENCE_TOOL_RUNNER)");
}

Result<std::string> resolve_runner_binary(const std::string& given) {
  std::string path = given;
  if (path.empty()) {
    auto found = find_runner_binary();
    if (!found) return found.take_error();
    path = *found;
  }
  if (path[0] != '/') return make_error("tool runner", "path must be absolute: " + path);
  return path;
}

HealthCheck runner_health(const std::string& path) {
  HealthCheck c;
  c.name = "tool runner";
  std::string out;
  FILE* p = ::popen((path + " --version 2>&1").c_str(), "r");
  if (p) {
    char buf[256];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    if (::pclose(p) == -1) out += " (pclose failed)";
  }
  while (!out.empty() && out.back() == '\n') out.pop_back();
  const auto at = out.rfind("protocol ");
  if (at == std::string::npos) {
    c.detail = path + ": " + (out.empty() ? "does not run" : out);
    c.remedy =
        "rebuild (make build) or set RINGFENCE_TOOL_RUNNER to the ringfence-tool-runner binary";
    return c;
  }
  auto compatible = proto::check_compatible(out.substr(at + 9));
  c.ok = compatible.ok();
  c.detail = path + " → " + out + (c.ok ? " (compatible)" : "");
  if (!c.ok) c.remedy = compatible.error().to_string() + "; install the matching runner";
  return c;
}

}  // namespace rf::host
