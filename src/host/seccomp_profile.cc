#include "host/seccomp_profile.h"

#include <linux/seccomp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "host/seccomp_prebuilt.h"
#include "proto/seccomp_blob.h"

namespace rf::host {
namespace {

// Async-signal-safe: one syscall, no allocation.
int install_filter(const std::vector<sock_filter>& prog) {
  if (prog.empty() || prog.size() > BPF_MAXINSNS) return EINVAL;
  const sock_fprog fprog{static_cast<unsigned short>(prog.size()),
                         const_cast<sock_filter*>(prog.data())};
  if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog) != 0) return errno;
  return 0;
}

}  // namespace

Result<SeccompFilters> build_seccomp_profile(const std::string& name) {
  if (name != "default") {
    return make_error("seccomp", "unknown profile \"" + name + "\" (available: default)");
  }
  using namespace prebuilt;
  return SeccompFilters{
      {kDefaultAllowlist, kDefaultAllowlist + kDefaultAllowlistLength},
      {kDefaultArgRules, kDefaultArgRules + kDefaultArgRulesLength},
  };
}

std::string encode_seccomp_filters(const SeccompFilters& filters) {
  return proto::encode_bpf_programs({filters.allowlist, filters.arg_rules});
}

int load_seccomp_filters(const SeccompFilters& filters) {
  // Allowlist first; the second seccomp() call passes it because seccomp is allowed.
  if (const int err = install_filter(filters.allowlist); err != 0) return err;
  return install_filter(filters.arg_rules);
}

}  // namespace rf::host
