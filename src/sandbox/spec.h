// SandboxSpec: plain data describing one sandbox. Built from CLI flags or parsed
// from JSON, then validated; every error names the field (for example
// `limits.memory: must be at least 8m, got 1m`).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"
#include "sandbox/limits.h"

namespace rf {

// Where sandboxes come from. Typed, so a backend is never a string compared
// in many places; to_string() gives the name flags and configs use.
enum class BackendKind {
  kNative,        // our own Linux namespaces engine
  kDocker,        // a Docker daemon's containers (local or remote)
  kRemoteDocker,  // docker, insisting on a remote daemon (tcp:// or ssh://)
  kLocal,         // no isolation: a scratch dir and a scrubbed env (sandbox mode none)
};
std::string_view to_string(BackendKind kind);
// "native", "docker", "remotedocker", "local"; the error has only a message
// (`unknown backend "podman" (allowed: native, docker, remotedocker, local)`).
Result<BackendKind> parse_backend_kind(std::string_view text);
std::span<const BackendKind> all_backend_kinds();
inline bool is_docker(BackendKind k) {
  return k == BackendKind::kDocker || k == BackendKind::kRemoteDocker;
}

// What a sandbox may reach. Weaker than none only when spelled out.
enum class NetworkPolicy {
  kNone,   // loopback only
  kProxy,  // loopback, plus egress to the allow rules through the host's proxy (docs/network.md)
  kHost,   // the host's network: trusted steps only
};
std::string_view to_string(NetworkPolicy policy);
Result<NetworkPolicy> parse_network_policy(std::string_view text);  // message-only error

// A project's named volume mounted in a sandbox (issue 41): set by the
// server (a worker's door resolves the volume to its file system on the
// host), never by a client's spec, and not part of the spec's JSON: a
// tenant sees the name and the path, never the host directory.
struct VolumeMount {
  std::string name;
  std::string host_dir;  // where its file system is mounted on the host
  std::string path;      // where it appears in the sandbox: absolute, normalized
  bool readonly = false;
};
inline constexpr size_t kMaxVolumeMounts = 8;

// A volume's path in a sandbox: absolute and normalized (no "." or ".."
// components, no doubled or trailing '/'), not "/", and not in what the
// sandbox's image provides (/usr, /etc, /bin, /sbin, /lib*, /proc, /sys,
// /dev, /.ringfence): `field` names it in the error.
Status check_volume_path(const std::string& path, const std::string& field);

struct SandboxSpec {
  std::string id;  // empty: generated ("rf-" + 12 hex digits)
  BackendKind backend = BackendKind::kNative;
  std::string image = "host";
  std::string workspace_dir;               // host directory bound at /workspace; empty: tmpfs
  std::map<std::string, std::string> env;  // added to PATH, HOME, LANG
  Limits limits;
  NetworkPolicy network = NetworkPolicy::kNone;
  std::vector<std::string> allow;  // rules of src/net/egress_policy.h; network proxy only
  std::string seccomp = "default";
  // Network proxy only: the sandbox trusts a CA of its own, made at start,
  // whose key lives in the host's memory only, so that the egress proxy may
  // terminate TLS to the hosts bound to a proxy-delivered credential and swap
  // its placeholder for the value (net/edge_credential.h). The CA is bound
  // over the image's trust bundle and named by trust_environment().
  bool tls_intercept = false;
  // Who the sandbox serves ("project", "run", "mode"): the docker backend puts
  // them on its container as "ringfence.<key>" labels. Keys [a-z0-9._-]{1,64},
  // values up to 256 printable characters.
  std::map<std::string, std::string> labels;
  // Not part of the spec's JSON (a way of reading the bounds, not one):
  // the runner starts the self-probe before its hello (runner/self_probe.h,
  // "At the start"), for a boundary report ready before the first call ends
  // (Sandbox::take_start_probe). Set by whoever will make the report.
  bool probe_at_start = false;
  // Not part of the spec's JSON either: volumes (above).
  std::vector<VolumeMount> volumes;
};

// Where a sandbox with network proxy finds the proxy: the tool runner listens
// here inside and relays to the host's proxy.
inline constexpr const char* kEgressListen = "127.0.0.1:3128";

// Rejects bad values with the field's name; never modifies the spec.
Status validate_spec(const SandboxSpec& spec);

// Parses a JSON object with the fields above ("limits": {"memory": "512m", ...}).
// Unknown keys are errors.
Result<SandboxSpec> parse_spec_json(const std::string& text);
// The document parse_spec_json reads, as a value (callers that embed it in
// their own JSON) and as text.
nlohmann::json spec_json(const SandboxSpec& spec);
std::string spec_to_json(const SandboxSpec& spec);

// The environment a command sees: exactly PATH, HOME, LANG, the spec's env,
// then the call's env (later wins). TERM only when `tty`.
std::map<std::string, std::string> base_environment(bool tty);

// HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, NO_PROXY and their lower-case forms, for
// a sandbox with network proxy.
std::map<std::string, std::string> proxy_environment();

// Where a sandbox with tls_intercept finds its trust: the image's bundle with
// the sandbox's CA added, bound over the image's own.
inline constexpr const char* kTrustBundleInSandbox = "/etc/ssl/certs/ca-certificates.crt";

// The variables runtimes read their trust from (SSL_CERT_FILE,
// REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE, GIT_SSL_CAINFO, PIP_CERT, AWS_CA_BUNDLE,
// NODE_EXTRA_CA_CERTS), all naming the bundle, for a sandbox with tls_intercept.
std::map<std::string, std::string> trust_environment();

std::string generate_sandbox_id();

}  // namespace rf
