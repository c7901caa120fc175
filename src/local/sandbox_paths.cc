#include "local/sandbox_paths.h"

#include <string_view>

#include "sandbox/spec.h"

namespace rf::local {
namespace {

constexpr std::string_view kWorkspace = "/workspace";

bool has_dotdot(std::string_view path) {
  size_t start = 0;
  while (start <= path.size()) {
    const size_t end = std::min(path.find('/', start), path.size());
    if (path.substr(start, end - start) == "..") return true;
    start = end + 1;
  }
  return false;
}

}  // namespace

Result<std::string> host_cwd(const std::string& scratch, const std::string& cwd) {
  const std::string_view rest =
      std::string_view(cwd).substr(std::min(cwd.size(), kWorkspace.size()));
  const bool under = cwd.starts_with(kWorkspace) && (rest.empty() || rest.front() == '/');
  if (!under || has_dotdot(rest)) {
    return make_error("exec",
                      "cwd must be under /workspace in a local sandbox, got \"" + cwd + "\"");
  }
  return scratch + cwd;
}

std::map<std::string, std::string> local_environment(const std::string& scratch, bool tty) {
  std::map<std::string, std::string> env = base_environment(tty);
  env["HOME"] = scratch + "/workspace";
  env["TMPDIR"] = scratch + "/tmp";
  return env;
}

}  // namespace rf::local
