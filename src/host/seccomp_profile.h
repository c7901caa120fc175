// The default seccomp profile (host side builds it, sandbox side loads it).
//
// Two stacked filters, because libseccomp cannot mix an unconditional allow with
// conditional denies on one syscall:
//   1. an allowlist, default action ERRNO(EPERM), at least as strict as Docker's
//      default profile;
//   2. argument rules, default ALLOW: ioctl TIOCSTI/TIOCLINUX (also with high
//      bits set), socket families AF_ALG/AF_VSOCK/AF_PACKET and others, clone
//      with namespace flags, personality with unsafe flags -> EPERM;
//      clone3 -> ENOSYS (so libc falls back to clone, which filter 2 checks).
// Non-native architectures (i386 via int 0x80, x32) kill the process (SIGSYS).
#pragma once

#include <linux/filter.h>

#include <string>
#include <vector>

#include "core/result.h"

namespace rf::host {

struct SeccompFilters {
  std::vector<sock_filter> allowlist;
  std::vector<sock_filter> arg_rules;
};

// The profile named `name` ("default") as BPF. It was compiled at build time
// (seccomp_prebuilt.h): libseccomp takes ~2 ms for it, which every
// `ringfence sandbox exec` paid at start. This only copies the programs.
Result<SeccompFilters> build_seccomp_profile(const std::string& name);

// The same profile compiled now, by libseccomp, from the rules in
// seccomp_compiler.cc: what rf-seccomp-gen writes out at build time, and what
// the tests compare the prebuilt programs with. Needs rf_seccomp_compiler.
Result<SeccompFilters> compile_seccomp_profile(const std::string& name);

// libseccomp's pseudo-filter-code text of both filters (for tests and audits).
// Needs rf_seccomp_compiler.
Result<std::string> seccomp_profile_text(const std::string& name);

// Installs both filters in the calling thread's process. Async-signal-safe:
// only the seccomp(2) syscall, no allocation. Needs no_new_privs (or
// CAP_SYS_ADMIN). Returns 0 or an errno.
int load_seccomp_filters(const SeccompFilters& filters);

// Both filters, in load order, as the file `ringfence-tool-runner --seccomp`
// installs (proto/seccomp_blob.h): how docker sandboxes get the same filters.
std::string encode_seccomp_filters(const SeccompFilters& filters);

}  // namespace rf::host
