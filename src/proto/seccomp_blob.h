// The seccomp filters the host hands a tool runner it cannot hand a loaded
// filter to (docker: the runner is started by the daemon): classic BPF
// programs in a small file the runner installs on itself before it serves
// (`ringfence-tool-runner --seccomp FILE`). Shared by both sides; no libseccomp.
//
//   "RFBPF1\n"  u32 LE count (1..4)  then per program: u32 LE n (1..4096), n * sock_filter
#pragma once

#include <linux/filter.h>

#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace rf::proto {

using BpfProgram = std::vector<sock_filter>;

std::string encode_bpf_programs(const std::vector<BpfProgram>& programs);

// Errors name the byte offset of what is wrong.
Result<std::vector<BpfProgram>> decode_bpf_programs(std::string_view bytes);

// Installs each program, in order, on the calling process (no_new_privs is
// set first). Returns 0 or the errno of the step that failed.
int install_bpf_programs(const std::vector<BpfProgram>& programs);

}  // namespace rf::proto
