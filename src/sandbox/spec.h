// SandboxSpec: plain data describing one sandbox. Built from CLI flags or parsed
// from JSON, then validated; every error names the field (for example
// `limits.memory: must be at least 8m, got 1m`).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/result.h"

namespace rf {

struct Limits {
  double cpus = 1.0;                          // cpu time per wall second
  uint64_t memory_bytes = 512ull << 20;       // cgroup memory limit
  uint64_t pids = 256;                        // cgroup pids limit
  uint64_t disk_bytes = 1ull << 30;           // size of /workspace and of /tmp (each)
  std::chrono::milliseconds timeout{30'000};  // per call
  uint64_t output_bytes = 16ull << 20;        // stdout+stderr per call
  uint64_t nofile = 1024;                     // RLIMIT_NOFILE
  // network proxy: connections open at once through the proxy, and bytes the
  // sandbox may send through it over its life (0: unlimited).
  uint64_t egress_connections = 64;
  uint64_t egress_bytes = 0;
};

struct SandboxSpec {
  std::string id;  // empty: generated ("rf-" + 12 hex digits)
  std::string backend = "native";
  std::string image = "host";
  std::string workspace_dir;               // host directory bound at /workspace; empty: tmpfs
  std::map<std::string, std::string> env;  // added to PATH, HOME, LANG
  Limits limits;
  // none: loopback only. proxy: loopback only, plus egress to the `allow`
  // rules through the host's proxy (docs/network.md). host: the host's network
  // (trusted steps only).
  std::string network = "none";
  std::vector<std::string> allow;  // rules of src/net/egress_policy.h; network proxy only
  std::string seccomp = "default";
  // Who the sandbox serves ("project", "run", "mode"): the docker backend puts
  // them on its container as "ringfence.<key>" labels. Keys [a-z0-9._-]{1,64},
  // values up to 256 printable characters.
  std::map<std::string, std::string> labels;
};

// Where a sandbox with network proxy finds the proxy: the tool runner listens
// here inside and relays to the host's proxy.
inline constexpr const char* kEgressListen = "127.0.0.1:3128";

// Rejects bad values with the field's name; never modifies the spec.
Status validate_spec(const SandboxSpec& spec);

// Parses a JSON object with the fields above ("limits": {"memory": "512m", ...}).
// Unknown keys are errors.
Result<SandboxSpec> parse_spec_json(const std::string& text);
std::string spec_to_json(const SandboxSpec& spec);

// The environment a command sees: exactly PATH, HOME, LANG, the spec's env,
// then the call's env (later wins). TERM only when `tty`.
std::map<std::string, std::string> base_environment(bool tty);

// HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, NO_PROXY and their lower-case forms, for
// a sandbox with network proxy.
std::map<std::string, std::string> proxy_environment();

std::string generate_sandbox_id();

}  // namespace rf
