#include "core/helper_binary.h"

#include <unistd.h>

#include <cstdlib>
#include <vector>

namespace rf {

Result<std::string> find_helper_binary(const std::string& name, const char* env_var) {
  if (const char* env = std::getenv(env_var); env && *env) return std::string(env);
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  std::vector<std::string> candidates;
  if (n > 0) {
    std::string dir(self, static_cast<size_t>(n));
    dir.resize(dir.rfind('/'));
    candidates.push_back(dir + "/" + name);
  }
  candidates.push_back("/usr/libexec/ringfence/" + name);
  for (const auto& c : candidates) {
    if (::access(c.c_str(), X_OK) == 0) return c;
  }
  return make_error(name, "not found (looked in " + candidates[0] + "; set " + env_var + ")");
}

}  // namespace rf
