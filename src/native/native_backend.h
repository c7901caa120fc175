// The native backend (host side): Linux namespaces, cgroups, seccomp and a
// read-only root, with the tool runner as PID 1. See docs/architecture.md.
#pragma once

#include <memory>
#include <string>

#include "native/egress.h"
#include "sandbox/sandbox.h"

namespace rf::native {

struct NativeOptions {
  std::string runner_path;  // empty: find_runner_binary()
  std::string cgroup_parent = "ringfence";
  EgressOptions egress;  // network proxy
};

Result<std::unique_ptr<Backend>> make_native_backend(const NativeOptions& options);

// $RINGFENCE_TOOL_RUNNER, else next to the running binary, else
// /usr/libexec/ringfence/ringfence-tool-runner.
Result<std::string> find_runner_binary();

// `sandbox doctor` for native: works even when the backend cannot be built,
// reporting what is missing as failed checks.
std::vector<HealthCheck> native_doctor(const NativeOptions& options);

// Adds "native" to the backend registry.
void register_native_backend();

}  // namespace rf::native
