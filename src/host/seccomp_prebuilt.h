// The default seccomp profile as BPF, compiled at build time: rf-seccomp-gen
// (seccomp_gen.cc) runs the rules of seccomp_compiler.cc through libseccomp
// and writes these arrays into a generated source of rf_host. Read them through
// build_seccomp_profile (seccomp_profile.h).
#pragma once

#include <linux/filter.h>

#include <cstddef>

namespace rf::host::prebuilt {

extern const sock_filter kDefaultAllowlist[];
extern const size_t kDefaultAllowlistLength;
extern const sock_filter kDefaultArgRules[];
extern const size_t kDefaultArgRulesLength;

}  // namespace rf::host::prebuilt
