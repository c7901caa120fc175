// `sandbox doctor` for the native backend (host side): every kernel feature the
// backend needs, tried for real in a throwaway child, not guessed from versions.
#pragma once

#include <string>
#include <vector>

#include "native/cgroup.h"
#include "native/seccomp_profile.h"
#include "sandbox/sandbox.h"

namespace rf::native {

struct DoctorInputs {
  const CgroupLayout* layout = nullptr;  // null: detection failed
  std::string layout_error;
  std::string cgroup_parent;
  const SeccompFilters* seccomp = nullptr;
  std::string runner_path;
};

std::vector<HealthCheck> native_health(const DoctorInputs& in);

// "tool runner": `path --version` runs and speaks a protocol version we speak.
// Shared with the local backend, which runs the same runner.
HealthCheck tool_runner(const std::string& path);

}  // namespace rf::native
