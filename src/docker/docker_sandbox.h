// Host side: one docker sandbox — a container whose PID 1 is the tool runner,
// reached over the container's attach stream (docker/attach_channel.h).
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "docker/api_client.h"
#include "docker/attach_channel.h"
#include "docker/container_spec.h"
#include "native/call_usage.h"
#include "native/cgroup.h"
#include "native/egress.h"
#include "native/uid_slots.h"
#include "sandbox/runner_sandbox.h"

namespace rf::docker {

class DockerSandbox : public RunnerSandbox {
 public:
  DockerSandbox(SandboxSpec spec, std::shared_ptr<ApiClient> api, native::UidSlot slot,
                std::unique_ptr<native::EgressLease> egress)
      : RunnerSandbox(std::move(spec)),
        api_(std::move(api)),
        slot_(std::move(slot)),
        egress_(std::move(egress)) {}
  ~DockerSandbox() override { (void)destroy(); }

  int init_pid() const override { return host_pid_; }
  Result<ExecResult> exec(const ExecCall& call, OutputSink& sink) override;
  Status destroy() override;

  // Set-up, called once by the backend: create, attach, start, handshake.
  // `cgroups`: the host's layout when the daemon is local (its containers'
  // cgroups are readable here), else null. On error the caller destroys it.
  Status start(const ContainerPlan& plan, std::vector<StepTiming> host_steps,
               const native::CgroupLayout* cgroups);
  const std::string& container_id() const { return container_id_; }

 private:
  // Why the container ended, once it has: "sandbox ended: container exited
  // with code 137 (OOM killed); tool runner said: ...".
  std::optional<Error> ended_reason();
  Status find_cgroup(const native::CgroupLayout& layout);

  std::shared_ptr<ApiClient> api_;
  native::UidSlot slot_;
  std::unique_ptr<native::EgressLease> egress_;
  std::string container_id_;
  int host_pid_ = 0;
  std::unique_ptr<AttachChannel> channel_;
  std::unique_ptr<native::Cgroup> cgroup_;  // the daemon's; only read here
  std::mutex mu_;                           // serialises destroy()
  bool destroyed_ = false;
  native::CallUsage usage_;
};

}  // namespace rf::docker
