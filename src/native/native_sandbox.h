// Host side: one native sandbox, from its clone to its destroy. The backend
// (native_backend.cc) makes its uid slot, cgroup and mount plan; start() then
// runs the host's half of set-up as a list of named steps, with the child's own
// steps (child_setup.h) in the middle, and ends with the runner's handshake.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "host/cgroup.h"
#include "host/egress_hub.h"
#include "host/runner_sandbox.h"
#include "host/uid_slots.h"
#include "native/child_setup.h"
#include "native/mount_plan.h"

namespace rf::native {

// The host reads a native sandbox's PID 1 itself (its /proc is on this
// kernel): the self-probe started with it leaves that out (runner/
// self_probe.h, "Inside only"), in the runner's arguments and in what the
// host expects of it alike.
inline constexpr bool kStartProbeInsideOnly = true;

class NativeSandbox : public host::RunnerSandbox {
 public:
  NativeSandbox(SandboxSpec spec, host::UidSlot slot, std::unique_ptr<host::Cgroup> cgroup,
                std::unique_ptr<host::EgressLease> egress);
  ~NativeSandbox() override;

  // Ends every process (PID 1 first: the kernel then kills its namespace),
  // removes the cgroup, closes the egress socket, frees the uid slot. Idempotent.
  Status destroy() override;
  Status pause() override;
  Status resume() override;
  bool paused() const override { return paused_.load(); }
  const StartReadback* start_readback() const override { return readback_ ? &*readback_ : nullptr; }

  // Set-up, called once by the backend with the config every sandbox of the
  // backend shares and this sandbox's mount plan; `host_steps` are the
  // backend's timings so far. On error the caller destroys the sandbox.
  Status start(const ChildConfig& base, const MountPlan& plan, std::vector<StepTiming> host_steps);

 private:
  struct Launch;  // what one start() holds: the child's config, both ends of its sockets

  // The steps of start(), in order.
  Status open_channels(Launch& l);
  Status prepare_workspace(Launch& l);
  Status open_cgroup_join_files(Launch& l);
  Status clone(Launch& l);
  Status move_child_into_cgroup(Launch& l);
  Status write_id_maps(Launch& l);
  Status release_child(Launch& l);
  Status wait_for_child_setup(Launch& l);
  void read_back_pid1(Launch& l);
  Status handshake(Launch& l);

  // SIGKILL and reap: set-up failed, and the child must not run on past it.
  void kill_child_now();
  const host::Cgroup* usage_cgroup() const override { return cgroup_.get(); }
  Status with_egress(const std::function<Status(host::EgressLease&)>& fn) override;

  host::UidSlot slot_;
  std::unique_ptr<host::Cgroup> cgroup_;
  std::mutex pause_mu_;  // one pause or resume at a time
  std::atomic<bool> paused_{false};
  std::unique_ptr<host::EgressLease> egress_;  // network proxy: its socket at the proxy
  std::mutex mu_;                              // serialises destroy()
  bool destroyed_ = false;
  std::optional<StartReadback> readback_;  // spec.probe_at_start: read_back_pid1's
};

}  // namespace rf::native
