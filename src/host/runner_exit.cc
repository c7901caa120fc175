#include "host/runner_exit.h"

#include <sys/wait.h>

#include <cstring>

namespace rf::host {

std::string describe_wait_status(const siginfo_t& si) {
  if (si.si_code == CLD_EXITED) return "exited with status " + std::to_string(si.si_status);
  return std::string("killed by signal ") + std::to_string(si.si_status) + " (" +
         strsignal(si.si_status) + ")";
}

Error runner_ended_error(pid_t pid, const siginfo_t& si) {
  return make_error("sandbox ended",
                    "tool runner (pid " + std::to_string(pid) + ") " + describe_wait_status(si));
}

}  // namespace rf::host
