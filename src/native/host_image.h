// The built-in `host` image (host side): read-only binds of the host's /usr and
// friends, a curated /etc, a masked /proc, a minimal /dev, and size-limited
// /tmp and /workspace. Only the plan is built here; nothing is mounted.
#pragma once

#include <string>

#include "native/mount_plan.h"
#include "sandbox/spec.h"

namespace rf::native {

struct HostImageOptions {
  std::string host_root = "/";  // where the host's file system is inspected (tests: a fake)
  std::string runner_path;      // host path of ringfence-tool-runner
  std::string sandbox_id;
  std::string proxy_socket;  // network proxy: host path of the egress proxy's socket
  // tls_intercept: host path of the trust bundle with the sandbox's CA added,
  // bound over the image's (host/egress_hub.h).
  std::string trust_bundle;
};

// Where a sandbox with network proxy sees the proxy's socket (the runner relays to it).
inline constexpr const char* kProxySocketInSandbox = "/.ringfence/proxy.sock";

MountPlan build_host_image_plan(const SandboxSpec& spec, const HostImageOptions& options);

// /etc files from the host that a sandbox may read. Everything else in /etc
// (shadow, gshadow, sudoers, ssh keys, machine-id, ssl/private, ...) stays out.
const std::vector<std::string>& curated_etc_paths();

}  // namespace rf::native
