// Host side: the Docker container a SandboxSpec becomes, as the JSON body of
// POST /containers/create. Pure data in, JSON out, so every bound can be
// checked in a unit test without a daemon (docs/backends.md lists them):
// network none (or host), a read-only root, tmpfs /tmp and /workspace with
// sizes, CapDrop ALL, no-new-privileges, Docker's seccomp profile with ours
// stacked on top by the tool runner, a non-root user of the sandbox's own,
// memory/cpu/pids/nofile limits, no core dumps, no log driver (nothing a
// sandbox writes lands in the daemon's log files), and the labels that
// `sandbox list` and `sandbox reap` find it by.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sandbox/spec.h"

namespace rf::docker {

// Where the tool runner's volume is mounted (read-only) inside every sandbox,
// and the files in it.
inline constexpr const char* kRunnerDir = "/.ringfence";
inline constexpr const char* kInjectedRunner = "/.ringfence/tool-runner";  // as in native
inline constexpr const char* kSeccompFile = "/.ringfence/seccomp.bpf";
// An image may ship its own runner here (docs/images.md).
inline constexpr const char* kImageRunner = "/usr/local/bin/ringfence-tool-runner";
// network proxy: the host proxy's socket, bound in by a local daemon.
inline constexpr const char* kProxySocketInContainer = "/run/ringfence-proxy.sock";

// Label keys. Every sandbox container has kLabelSandbox.
inline constexpr const char* kLabelSandbox = "ringfence.sandbox";
inline constexpr const char* kLabelCreated = "ringfence.created";  // unix seconds
inline constexpr const char* kLabelWorker = "ringfence.worker";    // host:pid of the creator
inline constexpr const char* kLabelOwnerHost = "ringfence.owner.host";
inline constexpr const char* kLabelOwnerPid = "ringfence.owner.pid";
inline constexpr const char* kLabelOwnerStart = "ringfence.owner.start";  // /proc/pid/stat field 22
inline constexpr const char* kLabelPrefix = "ringfence.";                 // + the spec's labels

// What the backend decided besides the spec.
struct ContainerPlan {
  std::string image;                          // what to create from: the image id (sha256:...)
  std::string runner_volume;                  // the volume holding the runner and seccomp.bpf
  std::string runner_path = kInjectedRunner;  // or kImageRunner when the image ships one
  bool seccomp_ours = true;                   // stack our filters on Docker's default profile
  uid_t uid = 0;                              // the sandbox user (never 0)
  std::string proxy_socket;                   // network proxy: the host path of the proxy socket
  std::string trust_bundle;  // tls_intercept: host path of the bundle with the sandbox's CA
  // The spec's volumes, each an idmapped tree the host attached for this
  // container (host/idmapped_tree.h AttachedTree), bound at its path.
  struct VolumeBind {
    std::string host_path, target;
    bool readonly = false;
  };
  std::vector<VolumeBind> volumes;
  std::string owner_host;
  int owner_pid = 0;
  uint64_t owner_start = 0;
  int64_t created_unix = 0;
};

// The container name for a sandbox id (the id itself: "rf-0123456789ab").
std::string container_name(const SandboxSpec& spec);

// The runner's argv as the container's entrypoint.
std::vector<std::string> runner_entrypoint(const SandboxSpec& spec, const ContainerPlan& plan);
// Whether the container's runner serves JIT requests (--cred-socket): ours
// only (an image's own runner may predate it), and not on the host's network
// (the abstract socket is private only to a network namespace of its own).
bool serves_credentials(const SandboxSpec& spec, const ContainerPlan& plan);

// Whether the runner starts the self-probe with the container (spec.
// probe_at_start): only the runner ringfence injects, this build's. An
// image's own may be older than --self-probe-at-start; its report sends the
// probe as a call.
bool starts_probe(const SandboxSpec& spec, const ContainerPlan& plan);

// Every label the container carries: the owner's, and the spec's own labels
// (project, run, mode) under "ringfence.".
std::map<std::string, std::string> container_labels(const SandboxSpec& spec,
                                                    const ContainerPlan& plan);

// The body of POST /containers/create. `spec` must be valid (validate_spec).
nlohmann::json container_create_body(const SandboxSpec& spec, const ContainerPlan& plan);

}  // namespace rf::docker
