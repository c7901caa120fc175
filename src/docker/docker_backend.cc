#include "docker/docker_backend.h"

#include <spdlog/spdlog.h>

#include <ctime>
#include <map>
#include <mutex>

#include "core/log.h"
#include "docker/container_spec.h"
#include "docker/docker_sandbox.h"
#include "docker/helper_container.h"
#include "docker/image_resolver.h"
#include "docker/inventory.h"
#include "docker/owner.h"
#include "docker/runner_volume.h"
#include "docker_api/api_client.h"
#include "docker_api/docker_host.h"
#include "host/cgroup.h"
#include "host/idmapped_tree.h"
#include "host/runner_binary.h"
#include "host/setup_step.h"
#include "host/uid_slots.h"

namespace rf::docker {
namespace {

// Where a container's volumes are attached on the host, by sandbox id.

Result<DockerHost> resolve_host(const DockerOptions& options) {
  auto host =
      options.host_url.empty() ? default_docker_host() : parse_docker_host(options.host_url);
  if (!host) return host.take_error();
  if (options.require_remote && host->kind == DockerHost::Kind::kUnix) {
    return make_error("remotedocker",
                      "needs a remote daemon: --docker-host tcp://HOST:PORT or "
                      "ssh://USER@HOST (got " +
                          host->url + ")");
  }
  return host;
}

Status check_docker_spec(const SandboxSpec& spec, const DockerHost& host) {
  if (!is_docker(spec.backend)) {
    return make_error("backend", "the spec asks for \"" + std::string(to_string(spec.backend)) +
                                     "\"; the docker backend makes only \"docker\" sandboxes");
  }
  if (spec.image.empty() || spec.image == "host") {
    return make_error("image",
                      "the docker backend needs a docker image (--image NAME, or "
                      "sandbox.image / sandbox_image in the worker's config); \"host\" "
                      "is the native backend's");
  }
  if (!spec.workspace_dir.empty()) {
    return make_error("workspace",
                      "not supported by the docker backend (its /workspace is a "
                      "tmpfs in the container); copy files in with write_file");
  }
  if (!spec.volumes.empty() && !host.is_local()) {
    return make_error("volumes",
                      "need a daemon on this host (a volume's file system is bound "
                      "into the container); " +
                          host.url + " is remote");
  }
  if (spec.network == NetworkPolicy::kProxy && !host.is_local()) {
    return make_error("network",
                      "proxy needs a daemon on this host (the proxy's socket is bound "
                      "into the container); " +
                          host.url + " is remote");
  }
  return ok_status();
}

class DockerBackend : public Backend {
 public:
  DockerBackend(DockerOptions options, std::shared_ptr<ApiClient> api, RunnerVolumeContents volume,
                std::optional<host::CgroupLayout> cgroups)
      : options_(std::move(options)),
        api_(std::move(api)),
        volume_(std::move(volume)),
        cgroups_(std::move(cgroups)),
        egress_(options_.egress) {}

  BackendKind kind() const override {
    return options_.require_remote ? BackendKind::kRemoteDocker : BackendKind::kDocker;
  }
  Result<std::unique_ptr<Sandbox>> create(const SandboxSpec& spec) override;
  Result<std::vector<SandboxInfo>> list() override { return list_docker_sandboxes(*api_); }
  Result<std::vector<SandboxInfo>> reap(std::chrono::seconds older_than, bool dry_run) override {
    return reap_docker_sandboxes(*api_, older_than, dry_run);
  }
  std::vector<HealthCheck> health() override { return docker_doctor(options_); }
  Result<ImageReport> prepare_image(const std::string& image) override;

 private:
  // The image's id and runner, resolved once per image name.
  Result<ImageInfo> image(const std::string& ref);
  Status runner_volume(const std::string& image_id);

  DockerOptions options_;
  std::shared_ptr<ApiClient> api_;
  RunnerVolumeContents volume_;
  std::optional<host::CgroupLayout> cgroups_;  // local daemons only
  host::EgressHub egress_;
  std::mutex mu_;
  std::map<std::string, ImageInfo> images_;
  bool volume_ready_ = false;
  std::mutex volume_mu_;  // one fill at a time
};

Result<ImageInfo> DockerBackend::image(const std::string& ref) {
  {
    std::lock_guard lock(mu_);
    if (auto it = images_.find(ref); it != images_.end()) return it->second;
  }
  auto info = inspect_image(*api_, ref, options_.allow_pull);
  if (!info) return info.take_error();
  RF_TRY(check_image_runner(*api_, *info));
  spdlog::info("docker: image {} is {}{}{} on {}", ref, info->digest(),
               info->repo_digest.empty() ? " (local, no registry digest)" : "",
               info->own_runner.empty() ? "" : "; it ships " + info->own_runner, api_->host().url);
  std::lock_guard lock(mu_);
  images_[ref] = *info;
  return *info;
}

Status DockerBackend::runner_volume(const std::string& image_id) {
  std::lock_guard lock(volume_mu_);
  if (volume_ready_) return ok_status();
  RF_TRY(ensure_runner_volume(*api_, volume_, image_id));
  volume_ready_ = true;
  return ok_status();
}

Result<ImageReport> DockerBackend::prepare_image(const std::string& ref) {
  // Present (or pulled) first, then its runner: a bad runner is not a missing image.
  auto info = inspect_image(*api_, ref, options_.allow_pull);
  if (!info) return info.take_error();
  ImageReport report;
  report.description = "digest " + info->digest();
  if (info->pulled) report.description += ", pulled";
  if (auto runner = check_image_runner(*api_, *info); !runner) {
    report.runner_problem = runner.error().to_string();
  }
  report.runner = info->own_runner.empty() ? "injected" : info->own_runner;
  // The image contract: a /workspace directory in the image itself (at run
  // time a tmpfs covers it, which would hide its absence).
  auto probe = create_helper(*api_, info->id, {"/bin/true"});
  if (!probe) return probe.take_error();
  auto st = stat_path(*api_, *probe, "/workspace");
  warn_unless_ok(remove_container(*api_, *probe), "docker: removing helper container " + *probe);
  if (!st) return st.take_error();
  report.has_workspace = st->exists && st->directory;
  return report;
}

Result<std::unique_ptr<Sandbox>> DockerBackend::create(const SandboxSpec& in) {
  SandboxSpec spec = in;
  if (spec.id.empty()) spec.id = generate_sandbox_id();
  RF_TRY(validate_spec(spec));
  RF_TRY(check_docker_spec(spec, api_->host()));
  std::vector<StepTiming> steps;
  host::StepTimer timer(&steps);
  auto info = timer.run("resolve image", [&] { return image(spec.image); });
  if (!info) return host::setup_error("resolve image", info.error());
  if (auto s = timer.run("runner volume", [&] { return runner_volume(info->id); }); !s) {
    return host::setup_error("runner volume", s.error());
  }
  // A host uid of the sandbox's own, from the same slots native sandboxes
  // use: no two sandboxes of this host, of either backend, share a uid.
  auto slot = timer.run("allocate uid range", [] { return host::acquire_uid_slot(); });
  if (!slot) return host::setup_error("allocate uid range", slot.error());
  const uid_t uid = slot->host_base() + host::kSandboxUid;
  std::unique_ptr<host::EgressLease> egress;
  if (spec.network == NetworkPolicy::kProxy) {
    auto lease = timer.run("listen at egress proxy", [&] { return egress_.add(spec, uid, uid); });
    if (!lease) return host::setup_error("listen at egress proxy", lease.error());
    egress = std::move(*lease);
  }
  ContainerPlan plan;
  plan.image = info->id;
  plan.runner_volume = volume_.volume_name();
  plan.runner_path = info->runner_path;
  plan.uid = uid;
  if (egress) plan.proxy_socket = egress->socket_path();
  if (egress && egress->trust()) plan.trust_bundle = egress->trust()->bundle;
  const Owner& me = self_owner();
  plan.owner_host = me.host;
  plan.owner_pid = me.pid;
  plan.owner_start = me.start;
  plan.created_unix = ::time(nullptr);
  // Volumes: idmapped to this container's user, attached on the host for it.
  std::vector<std::unique_ptr<host::AttachedTree>> volume_trees;
  for (size_t i = 0; i < spec.volumes.size(); ++i) {
    const VolumeMount& v = spec.volumes[i];
    auto tree = timer.run("attach volume", [&] {
      return host::AttachedTree::attach(
          v.host_dir, uid, uid, v.readonly,
          std::string(kVolumeAttachDir) + "/" + spec.id + "/" + std::to_string(i));
    });
    if (!tree) return host::setup_error("attach volume " + v.name, tree.error());
    plan.volumes.push_back({(*tree)->path(), v.path, v.readonly});
    volume_trees.push_back(std::move(*tree));
  }
  auto sandbox = std::make_unique<DockerSandbox>(spec, api_, std::move(*slot), std::move(egress));
  sandbox->hold_volumes(std::move(volume_trees));
  if (auto s = sandbox->start(plan, std::move(steps), cgroups_ ? &*cgroups_ : nullptr); !s) {
    warn_unless_ok(sandbox->destroy(), spec.id + ": cleaning up after a failed set-up");
    return s.take_error();
  }
  return std::unique_ptr<Sandbox>(std::move(sandbox));
}

}  // namespace

Result<std::unique_ptr<Backend>> make_docker_backend(const DockerOptions& in) {
  DockerOptions options = in;
  auto docker_host = resolve_host(options);
  if (!docker_host) return docker_host.take_error();
  auto runner = host::resolve_runner_binary(options.runner_path);
  if (!runner) return runner.take_error();
  options.runner_path = *runner;
  auto volume = load_runner_volume_contents(options.runner_path);
  if (!volume) return volume.take_error();
  auto api = ApiClient::connect(*docker_host, options.connect_timeout);
  if (!api) return make_error("docker backend", api.error().to_string());
  std::optional<host::CgroupLayout> cgroups;
  if (docker_host->is_local()) {
    if (auto layout = host::detect_cgroup_layout()) cgroups = *layout;
  }
  return std::unique_ptr<Backend>(std::make_unique<DockerBackend>(
      std::move(options), std::shared_ptr<ApiClient>(std::move(*api)), std::move(*volume),
      std::move(cgroups)));
}

void register_docker_backend(const DockerOptions& options) {
  DockerOptions remote = options;
  remote.require_remote = true;
  register_backend(
      BackendKind::kDocker, [options] { return make_docker_backend(options); },
      [options] { return docker_doctor(options); });
  register_backend(
      BackendKind::kRemoteDocker, [remote] { return make_docker_backend(remote); },
      [remote] { return docker_doctor(remote); });
}

}  // namespace rf::docker
