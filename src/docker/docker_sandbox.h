// Host side: one docker sandbox — a container whose PID 1 is the tool runner,
// reached over the container's attach stream (docker/attach_channel.h).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "docker/attach_channel.h"
#include "docker/container_spec.h"
#include "docker_api/api_client.h"
#include "host/cgroup.h"
#include "host/egress_hub.h"
#include "host/idmapped_tree.h"
#include "host/runner_sandbox.h"
#include "host/uid_slots.h"

namespace rf::docker {

class DockerSandbox : public host::RunnerSandbox {
 public:
  DockerSandbox(SandboxSpec spec, std::shared_ptr<ApiClient> api, host::UidSlot slot,
                std::unique_ptr<host::EgressLease> egress)
      : host::RunnerSandbox(std::move(spec)),
        api_(std::move(api)),
        slot_(std::move(slot)),
        egress_(std::move(egress)) {}
  ~DockerSandbox() override;

  int init_pid() const override { return host_pid_; }
  Status destroy() override;
  // The Engine API's pause and unpause (the daemon's freezer).
  Status pause() override { return set_paused(true); }
  Status resume() override { return set_paused(false); }
  bool paused() const override { return paused_.load(); }

  // Set-up, called once by the backend: create, attach, start, handshake.
  // `cgroups`: the host's layout when the daemon is local (its containers'
  // cgroups are readable here), else null. On error the caller destroys it.
  Status start(const ContainerPlan& plan, std::vector<StepTiming> host_steps,
               const host::CgroupLayout* cgroups);
  const std::string& container_id() const { return container_id_; }
  // Its volumes' host trees (docker_backend.cc), let go when it is destroyed.
  void hold_volumes(std::vector<std::unique_ptr<host::AttachedTree>> trees) {
    volume_trees_ = std::move(trees);
  }
  std::string image_digest() const override { return image_id_; }

 private:
  // Why the container ended, once it has: "sandbox ended: container exited
  // with code 137 (OOM killed); tool runner said: ...".
  std::optional<Error> ended_reason() override;
  const host::Cgroup* usage_cgroup() const override { return cgroup_.get(); }
  Status with_egress(const std::function<Status(host::EgressLease&)>& fn) override;
  Status find_cgroup(const host::CgroupLayout& layout);
  Status set_paused(bool paused);

  std::shared_ptr<ApiClient> api_;
  host::UidSlot slot_;
  std::unique_ptr<host::EgressLease> egress_;
  std::string container_id_;
  std::vector<std::unique_ptr<host::AttachedTree>> volume_trees_;
  std::string image_id_;  // what the container was created from (sha256:...)
  int host_pid_ = 0;
  std::atomic<bool> paused_{false};
  std::unique_ptr<AttachChannel> channel_;
  // The daemon's: only read here, but for each call's own memory.peak
  // descriptor on v2, reset for that descriptor alone (Cgroup::start_call_peak).
  std::unique_ptr<host::Cgroup> cgroup_;
  std::mutex mu_;  // serialises destroy()
  bool destroyed_ = false;
};

}  // namespace rf::docker
