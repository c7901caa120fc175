#include "core/fd_limit.h"

namespace rf {

Result<rlim_t> raise_fd_limit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return sys_error("getrlimit RLIMIT_NOFILE");
  if (rl.rlim_cur == rl.rlim_max) return rl.rlim_cur;
  rl.rlim_cur = rl.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) return sys_error("setrlimit RLIMIT_NOFILE");
  return rl.rlim_cur;
}

}  // namespace rf
