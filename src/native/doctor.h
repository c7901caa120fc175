// `sandbox doctor` for the native backend (host side): every kernel feature the
// backend needs, tried for real in a throwaway child, not guessed from versions.
#pragma once

#include <string>
#include <vector>

#include "host/cgroup.h"
#include "host/seccomp_profile.h"
#include "sandbox/sandbox.h"

namespace rf::native {

struct DoctorInputs {
  const host::CgroupLayout* layout = nullptr;  // null: detection failed
  std::string layout_error;
  std::string cgroup_parent;
  const host::SeccompFilters* seccomp = nullptr;
  std::string runner_path;
};

std::vector<HealthCheck> native_health(const DoctorInputs& in);

}  // namespace rf::native
