#include "native/native_backend.h"

#include <unistd.h>

#include <cstdlib>

#include "core/io.h"
#include "core/log.h"
#include "host/cgroup.h"
#include "host/exec_request.h"
#include "host/janitor.h"
#include "host/runner_binary.h"
#include "host/seccomp_profile.h"
#include "host/setup_step.h"
#include "host/uid_slots.h"
#include "native/child_setup.h"
#include "native/doctor.h"
#include "native/host_image.h"
#include "native/inventory.h"
#include "native/native_sandbox.h"

namespace rf::native {
namespace {

int read_cap_last_cap() {
  auto text = read_file("/proc/sys/kernel/cap_last_cap");
  return text ? std::atoi(text->c_str()) : 40;
}

class NativeBackend : public Backend {
 public:
  NativeBackend(NativeOptions options, host::CgroupLayout layout, host::SeccompFilters seccomp)
      : options_(std::move(options)),
        layout_(std::move(layout)),
        seccomp_(std::move(seccomp)),
        cap_last_cap_(read_cap_last_cap()),
        egress_(options_.egress) {}

  BackendKind kind() const override { return BackendKind::kNative; }
  Result<std::unique_ptr<Sandbox>> create(const SandboxSpec& spec) override;
  Result<std::vector<SandboxInfo>> list() override {
    return list_native_sandboxes(layout_, options_.cgroup_parent);
  }
  Result<std::vector<SandboxInfo>> reap(std::chrono::seconds older_than, bool dry_run) override {
    return reap_native_sandboxes(layout_, options_.cgroup_parent, older_than, dry_run);
  }
  std::vector<HealthCheck> health() override {
    return native_health(
        DoctorInputs{&layout_, "", options_.cgroup_parent, &seccomp_, options_.runner_path});
  }

 private:
  NativeOptions options_;
  host::CgroupLayout layout_;
  host::SeccompFilters seccomp_;
  int cap_last_cap_;
  host::EgressHub egress_;
};

Result<std::unique_ptr<Sandbox>> NativeBackend::create(const SandboxSpec& in) {
  SandboxSpec spec = in;
  if (spec.id.empty()) spec.id = generate_sandbox_id();
  RF_TRY(validate_spec(spec));
  std::vector<StepTiming> host_steps;
  host::StepTimer timer(&host_steps);

  auto slot = timer.run("allocate uid range", [] { return host::acquire_uid_slot(); });
  if (!slot) return host::setup_error("allocate uid range", slot.error());
  auto janitor = host::Janitor::get();
  if (!janitor) return host::setup_error("start janitor", janitor.error());
  auto cgroup = timer.run("create cgroup", [&]() -> Result<std::unique_ptr<host::Cgroup>> {
    auto cg = host::create_cgroup(layout_, options_.cgroup_parent, spec.id);
    if (!cg) return cg;
    for (const auto& dir : (*cg)->paths()) (*janitor)->track(dir);
    host::CgroupLimits limits{spec.limits.cpus, spec.limits.memory_bytes, spec.limits.pids};
    if (auto s = (*cg)->apply(limits); !s) {
      if (auto gone = (*cg)->remove(); !gone) {
        spdlog::warn("{}: removing the cgroup after a failed limit: {}", spec.id,
                     gone.error().to_string());
      }
      return s.take_error();
    }
    return cg;
  });
  if (!cgroup) return host::setup_error("create cgroup", cgroup.error());

  HostImageOptions image{"/", options_.runner_path, spec.id, ""};
  std::unique_ptr<host::EgressLease> egress;
  if (spec.network == NetworkPolicy::kProxy) {
    const uid_t user = slot->host_base() + host::kSandboxUid;
    auto lease = timer.run("listen at egress proxy", [&] { return egress_.add(spec, user, user); });
    if (!lease) return host::setup_error("listen at egress proxy", lease.error());
    egress = std::move(*lease);
    image.proxy_socket = egress->socket_path();
    if (const auto& trust = egress->trust()) image.trust_bundle = trust->bundle;
  }
  const MountPlan plan =
      timer.run("build mount plan", [&] { return build_host_image_plan(spec, image); });

  static char arg0[] = "ringfence-tool-runner";
  static char arg1[] = "--fd";
  static char arg2[] = "3";
  static char arg3[] = "--egress-bridge";
  static std::string bridge = std::string(kEgressListen) + "=" + kProxySocketInSandbox;
  ChildConfig config;
  config.seccomp = &seccomp_;
  config.uid = host::kSandboxUid;
  config.gid = host::kSandboxUid;
  config.cap_last_cap = cap_last_cap_;
  config.rlimit_nofile = spec.limits.nofile;
  config.rlimit_fsize = spec.limits.disk_bytes;
  static char arg5[] = "--cred-socket";
  static std::string cred = proto::kCredSocketName;
  config.runner_argv = {arg0, arg1, arg2};
  if (egress) config.runner_argv.insert(config.runner_argv.end(), {arg3, bridge.data()});
  // JIT requests (rf-cred): the abstract socket is private to a network
  // namespace of the sandbox's own, so not with the host's network.
  if (spec.network != NetworkPolicy::kHost) {
    config.runner_argv.insert(config.runner_argv.end(), {arg5, cred.data()});
  }
  // Alive until the runner is exec'd (in start(), below).
  std::vector<std::string> probe_args = host::start_probe_args(spec, kStartProbeInsideOnly);
  for (std::string& a : probe_args) config.runner_argv.push_back(a.data());
  config.runner_argv.push_back(nullptr);
  config.runner_envp = {nullptr};

  auto sandbox = std::make_unique<NativeSandbox>(spec, std::move(*slot), std::move(*cgroup),
                                                 std::move(egress));
  if (auto s = sandbox->start(config, plan, std::move(host_steps)); !s) {
    if (auto gone = sandbox->destroy(); !gone) {
      spdlog::warn("{}: cleaning up after a failed set-up: {}", spec.id, gone.error().to_string());
    }
    return s.take_error();
  }
  return std::unique_ptr<Sandbox>(std::move(sandbox));
}

}  // namespace

Result<std::unique_ptr<Backend>> make_native_backend(const NativeOptions& in) {
  NativeOptions options = in;
  auto runner = host::resolve_runner_binary(options.runner_path);
  if (!runner) return runner.take_error();
  options.runner_path = *runner;
  auto layout = host::detect_cgroup_layout();
  if (!layout) return make_error("native backend: cgroups", layout.error().to_string());
  auto seccomp = host::build_seccomp_profile("default");
  if (!seccomp) return make_error("native backend: seccomp", seccomp.error().to_string());
  if (options.test_seccomp_override) *seccomp = *options.test_seccomp_override;
  return std::unique_ptr<Backend>(
      std::make_unique<NativeBackend>(std::move(options), std::move(*layout), std::move(*seccomp)));
}

std::vector<HealthCheck> native_doctor(const NativeOptions& options) {
  DoctorInputs in;
  in.cgroup_parent = options.cgroup_parent;
  in.runner_path = options.runner_path;
  if (in.runner_path.empty()) {
    auto found = host::find_runner_binary();
    in.runner_path = found ? *found : found.error().to_string();
  }
  auto layout = host::detect_cgroup_layout();
  if (layout)
    in.layout = &*layout;
  else
    in.layout_error = layout.error().to_string();
  auto seccomp = host::build_seccomp_profile("default");
  if (seccomp) in.seccomp = &*seccomp;
  return native_health(in);
}

void register_native_backend(const NativeOptions& options) {
  register_backend(
      BackendKind::kNative, [options] { return make_native_backend(options); },
      [options] { return native_doctor(options); });
}

}  // namespace rf::native
