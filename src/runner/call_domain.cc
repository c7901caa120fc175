#include "runner/call_domain.h"

#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace rf::runner {

namespace {

// The ruleset's descriptor and the ABI in use.
int ruleset_fd = -1;
int abi = 0;

constexpr __u64 kHandled = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_REFER;

int make_ruleset() {
  const landlock_ruleset_attr attr{.handled_access_fs = kHandled};
  // Always close-on-exec: no command inherits it.
  const int fd = static_cast<int>(::syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0));
  if (fd < 0) return -1;
  const int root = ::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  landlock_path_beneath_attr rule{.allowed_access = kHandled, .parent_fd = root};
  const bool added =
      root >= 0 && ::syscall(SYS_landlock_add_rule, fd, LANDLOCK_RULE_PATH_BENEATH, &rule, 0) == 0;
  if (root >= 0) ::close(root);
  if (!added) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

int prepare_call_domains() {
  if (ruleset_fd >= 0) return abi;
  const long version =
      ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (version < 2 || ::prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1) return 0;
  ruleset_fd = make_ruleset();
  abi = ruleset_fd >= 0 ? static_cast<int>(version) : 0;
  return abi;
}

int enter_call_domain() {
  if (ruleset_fd < 0) return 0;
  return ::syscall(SYS_landlock_restrict_self, ruleset_fd, 0) == 0 ? 0 : errno;
}

int call_domain_abi() { return abi; }

}  // namespace rf::runner
