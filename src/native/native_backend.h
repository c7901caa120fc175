// The native backend (host side): Linux namespaces, cgroups, seccomp and a
// read-only root, with the tool runner as PID 1. See docs/architecture.md.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "host/egress_hub.h"
#include "host/seccomp_profile.h"
#include "sandbox/sandbox.h"

namespace rf::native {

struct NativeOptions {
  std::string runner_path;  // empty: find_runner_binary()
  std::string cgroup_parent = "ringfence";
  host::EgressOptions egress;  // network proxy
  // Tests only (never set by a command): the programs every sandbox loads
  // instead of the "default" profile's, so that a test can make a sandbox
  // whose filter was swapped and see its boundary report catch it.
  std::optional<host::SeccompFilters> test_seccomp_override;
};

Result<std::unique_ptr<Backend>> make_native_backend(const NativeOptions& options);

// `sandbox doctor` for native: works even when the backend cannot be built,
// reporting what is missing as failed checks.
std::vector<HealthCheck> native_doctor(const NativeOptions& options);

// Adds "native" to the backend registry, made with `options`.
void register_native_backend(const NativeOptions& options = {});

}  // namespace rf::native
