#include "host/runner_binary.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/helper_binary.h"
#include "proto/messages.h"

namespace rf::host {

Result<std::string> find_runner_binary() {
  auto found = find_helper_binary("ringfence-tool-runner", "RINGFENCE_TOOL_RUNNER");
  if (!found) return make_error("tool runner", found.error().message);
  return found;
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
