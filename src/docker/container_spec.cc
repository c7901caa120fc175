#include "docker/container_spec.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "host/exec_request.h"
#include "proto/messages.h"

namespace rf::docker {
namespace {

// nr_inodes from the disk limit, as on native (limits.h: tmpfs_inodes).
std::string tmpfs_options(uint64_t size_bytes, uint64_t disk_bytes, const std::string& extra) {
  // nosuid, nodev: nothing there can gain privileges or reach a device.
  return "rw,nosuid,nodev," + extra + "size=" + std::to_string(size_bytes) +
         ",nr_inodes=" + std::to_string(tmpfs_inodes(disk_bytes));
}

nlohmann::json mounts(const ContainerPlan& plan) {
  nlohmann::json out = nlohmann::json::array();
  // The runner and the seccomp filters: read-only, so nothing inside can swap them.
  out.push_back({{"Type", "volume"},
                 {"Source", plan.runner_volume},
                 {"Target", kRunnerDir},
                 {"ReadOnly", true},
                 {"VolumeOptions", {{"NoCopy", true}}}});
  if (!plan.proxy_socket.empty()) {
    out.push_back({{"Type", "bind"},
                   {"Source", plan.proxy_socket},
                   {"Target", kProxySocketInContainer},
                   {"ReadOnly", false}});
  }
  if (!plan.trust_bundle.empty()) {
    // Over the image's bundle (made if the image has none), as in native sandboxes.
    out.push_back({{"Type", "bind"},
                   {"Source", plan.trust_bundle},
                   {"Target", kTrustBundleInSandbox},
                   {"ReadOnly", true}});
  }
  for (const auto& v : plan.volumes) {
    out.push_back({{"Type", "bind"},
                   {"Source", v.host_path},
                   {"Target", v.target},
                   {"ReadOnly", v.readonly}});
  }
  return out;
}

nlohmann::json host_config(const SandboxSpec& spec, const ContainerPlan& plan) {
  const auto& l = spec.limits;
  const std::string user = std::to_string(plan.uid);
  nlohmann::json hc = {
      // network proxy has no route out either: the runner's bridge reaches the proxy.
      {"NetworkMode", spec.network == NetworkPolicy::kHost ? "host" : "none"},
      {"ReadonlyRootfs", true},
      {"Tmpfs",
       {{"/tmp", tmpfs_options(l.disk_bytes, l.disk_bytes, "mode=1777,")},
        // Docker's own /dev/shm (ShmSize) takes no inode cap: this one does,
        // and is the size native gives it.
        {"/dev/shm", tmpfs_options(std::min<uint64_t>(l.disk_bytes, 64ull << 20), l.disk_bytes,
                                   "noexec,mode=1777,")},
        // Nothing of the host's /sys (Docker's default is a read-only sysfs,
        // cgroupfs included): an empty read-only tmpfs covers it.
        {"/sys", "ro,nosuid,nodev,noexec,size=4k,mode=0555"},
        {"/workspace", tmpfs_options(l.disk_bytes, l.disk_bytes,
                                     "exec,mode=0755,uid=" + user + ",gid=" + user + ",")}}},
      {"CapDrop", {"ALL"}},
      {"SecurityOpt", {"no-new-privileges:true"}},
      {"Privileged", false},
      {"Memory", l.memory_bytes},
      {"MemorySwap", l.memory_bytes},  // equal: no swap on top
      {"NanoCpus", static_cast<int64_t>(std::llround(l.cpus * 1e9))},
      {"PidsLimit", l.pids},
      {"Ulimits",
       {{{"Name", "nofile"}, {"Soft", l.nofile}, {"Hard", l.nofile}},
        {{"Name", "core"}, {"Soft", 0}, {"Hard", 0}},
        // One file stops at the disk size (EFBIG), as in native sandboxes.
        {{"Name", "fsize"}, {"Soft", l.disk_bytes}, {"Hard", l.disk_bytes}}}},
      {"IpcMode", "private"},
      {"Mounts", mounts(plan)},
      // Nothing a sandbox writes (protocol frames, its output) goes to disk.
      {"LogConfig", {{"Type", "none"}, {"Config", nlohmann::json::object()}}},
      // When the runner ends (its stdin closed because the worker died), the
      // daemon removes the container: a killed worker leaves nothing behind.
      {"AutoRemove", true},
      {"Init", false},
      {"RestartPolicy", {{"Name", "no"}}},
  };
  return hc;
}

}  // namespace

std::string container_name(const SandboxSpec& spec) { return spec.id; }

std::vector<std::string> runner_entrypoint(const SandboxSpec& spec, const ContainerPlan& plan) {
  std::vector<std::string> argv = {plan.runner_path, "--stdio"};
  if (plan.seccomp_ours) {
    argv.push_back("--seccomp");
    argv.push_back(kSeccompFile);
  }
  if (spec.network == NetworkPolicy::kProxy) {
    argv.push_back("--egress-bridge");
    argv.push_back(std::string(kEgressListen) + "=" + kProxySocketInContainer);
  }
  if (serves_credentials(spec, plan)) {
    argv.push_back("--cred-socket");
    argv.push_back(proto::kCredSocketName);
  }
  // A remote daemon's PID 1 is out of the host's reach: the probe reads all.
  if (starts_probe(spec, plan)) {
    for (std::string& a : host::start_probe_args(spec, /*inside_only=*/false))
      argv.push_back(std::move(a));
  }
  return argv;
}

bool starts_probe(const SandboxSpec& spec, const ContainerPlan& plan) {
  return spec.probe_at_start && plan.runner_path == kInjectedRunner;
}

bool serves_credentials(const SandboxSpec& spec, const ContainerPlan& plan) {
  return plan.runner_path == kInjectedRunner && spec.network != NetworkPolicy::kHost;
}

std::map<std::string, std::string> container_labels(const SandboxSpec& spec,
                                                    const ContainerPlan& plan) {
  std::map<std::string, std::string> labels;
  for (const auto& [k, v] : spec.labels) labels[kLabelPrefix + k] = v;
  labels[kLabelSandbox] = spec.id;
  labels[kLabelCreated] = std::to_string(plan.created_unix);
  labels[kLabelWorker] = plan.owner_host + ":" + std::to_string(plan.owner_pid);
  labels[kLabelOwnerHost] = plan.owner_host;
  labels[kLabelOwnerPid] = std::to_string(plan.owner_pid);
  labels[kLabelOwnerStart] = std::to_string(plan.owner_start);
  return labels;
}

nlohmann::json container_create_body(const SandboxSpec& spec, const ContainerPlan& plan) {
  const std::string user = std::to_string(plan.uid) + ":" + std::to_string(plan.uid);
  return {
      {"Image", plan.image},
      {"Entrypoint", runner_entrypoint(spec, plan)},
      {"Cmd", nlohmann::json::array()},
      // The runner gives each call exactly the environment the spec names;
      // its own holds nothing of the host's either.
      {"Env", nlohmann::json::array()},
      {"User", user},
      {"WorkingDir", "/workspace"},
      {"Hostname", spec.id},
      // The protocol runs over the attach stream: our stdin, its stdout.
      // StdinOnce: when our attach connection closes, the runner sees EOF.
      {"AttachStdin", true},
      {"AttachStdout", true},
      {"AttachStderr", true},
      {"OpenStdin", true},
      {"StdinOnce", true},
      {"Tty", false},
      {"Labels", container_labels(spec, plan)},
      {"HostConfig", host_config(spec, plan)},
  };
}

}  // namespace rf::docker
