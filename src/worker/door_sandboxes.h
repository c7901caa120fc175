// The sandboxes front doors make on this worker (issue 39): `serve`'s API
// and MCP clients' sandboxes live here, not in serve, and are used through
// the worker's door (worker/door.h). Each is recorded in the store (mode
// api, its project and spec: `sandbox list` and every serve of the fleet
// see it), its creation and end audited with who asked, and every call in
// it goes through the guarded call path (calls/guarded_call.h): recorded,
// redacted, receipted, ended when its client leaves. What a tenant asks for
// is checked again here against its project's operator policy.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <variant>

#include "calls/abandon_watch.h"
#include "calls/guarded_call.h"
#include "host/volume_disk.h"
#include "policy/operator_policy.h"
#include "sandbox/process_request.h"
#include "sandbox/process_table.h"
#include "sandbox/sandbox.h"
#include "sandbox/volume_request.h"
#include "store/store.h"
#include "worker/sandbox_ledger.h"
#include "worker/serving.h"

namespace rf::worker {

struct DoorSandbox {
  std::string project;
  std::chrono::system_clock::time_point created;
  std::chrono::microseconds setup{0};
  std::shared_ptr<Sandbox> sandbox;
  std::atomic<int> running{0};  // calls in flight
  // Its lifetime (issue 41; sandbox/lifetime_request.h): ms since the epoch.
  std::string name;
  std::map<std::string, std::string> metadata;
  std::string cwd;                     // where its calls run when they do not say ("" = /workspace)
  std::atomic<int64_t> expires_at{0};  // 0 = never
  int64_t idle_timeout_ms = 0;         // 0 = no idle expiry
  std::atomic<int64_t> last_active{0};      // when its last call ended (or it was made)
  std::atomic<const char*> ended{nullptr};  // "timeout" or "idle" once it expired
  // Its background processes (issue 41; sandbox/process_table.h), and the
  // clients following one's output now (a sandbox followed is not idle).
  std::unique_ptr<ProcessTable> processes;
  std::atomic<int> attached{0};
  // The project's volumes it mounts (in its spec too, with their host dirs).
  std::vector<VolumeMount> volumes;
  const std::string& id() const { return sandbox->id(); }
};

// Why a request was not done, with the HTTP status the door answers.
struct DoorRefusal {
  int status = 400;
  std::string field;
  std::string message;
};
template <class T>
using DoorOutcome = std::variant<T, DoorRefusal>;

class DoorSandboxes {
 public:
  struct Services {
    store::Store* store = nullptr;
    std::string worker_id;
    std::chrono::milliseconds lease{30'000};
    std::function<std::shared_ptr<Serving>()> serving;
    SandboxLedger* ledger = nullptr;
    calls::CallPath path;
    size_t max_per_project = 64;
    // Volumes (host/volume_disk.h): this worker's host, and the state dir
    // their disks live under ("": volumes are refused).
    std::string host_id;
    std::string state_dir;
  };
  explicit DoorSandboxes(Services services);
  ~DoorSandboxes();  // destroy_all()

  // `spec`: the spec object a client sent (sandbox/spec.h), checked by its
  // door and again here: id, workspace, labels and tls_intercept are the
  // server's; limits above the policy's ceilings, networks and egress rules
  // it does not allow are refused (403), defaults lowered to the ceilings.
  DoorOutcome<std::shared_ptr<DoorSandbox>> create(const std::string& project,
                                                   const std::string& actor,
                                                   const nlohmann::json& spec);
  // nullptr when unknown or another project's.
  std::shared_ptr<DoorSandbox> find(const std::string& project, const std::string& id) const;
  // false when unknown or another project's.
  // `reason`: why it ends when not its client's asking ("timeout", "idle").
  Result<bool> destroy(const std::string& project, const std::string& id, const std::string& actor,
                       const std::string& reason = "");
  // One call, through the guarded path; `client_gone` is asked every 100 ms
  // while it runs, and once it says so the call is killed and recorded as
  // ended by its client leaving.
  // `on_result`, when given, hears how the call ended before its record is
  // written (the door answers its client first).
  DoorOutcome<ExecResult> exec(
      DoorSandbox& sandbox, ExecCall call, bool timeout_given, OutputSink& sink,
      const std::function<bool()>& client_gone,
      const std::function<void(const Result<ExecResult>&)>& on_result = {});
  // A new lifetime from now (PUT .../timeout), bounded by the policy's
  // sandbox_timeout_max; the new expiry in ms since the epoch.
  DoorOutcome<int64_t> set_timeout(DoorSandbox& sandbox, std::chrono::milliseconds timeout);
  // Pause and resume (issue 42; Sandbox::pause): audited (sandbox.pause,
  // sandbox.resume with `why`: "asked", or "auto" when a request to it
  // resumed it). Idempotent.
  DoorOutcome<bool> pause(DoorSandbox& sandbox, const std::string& actor);
  DoorOutcome<bool> resume(DoorSandbox& sandbox, const std::string& actor, const std::string& why);
  // A background process (sandbox/process_request.h), through the guarded
  // path as an exec is (recorded, redacted, audited); its buffer and how
  // many may run are the project's policy (process_buffer, processes_max).
  DoorOutcome<ProcessInfo> start_process(DoorSandbox& sandbox, ProcessStart start);
  // A client follows a process's output (`on` true) or stopped (false).
  void attach(DoorSandbox& sandbox, bool on);
  void destroy_all();
  size_t live() const;
  // Removes a project's volume's disk from this host: refused (409) while a
  // live sandbox mounts it.
  DoorOutcome<bool> remove_volume(const std::string& project, const std::string& name);

 private:
  void forget(const std::string& id, const std::string& project, const std::string& actor,
              const std::string& reason = "");
  // Ends every sandbox whose timeout or idle timeout ran out, each with an
  // audit event saying which; sleeps until the next one is due.
  void expire_loop();
  // When the next sandbox is due to expire (ms since the epoch; 0 = none). Under mu_.
  int64_t next_expiry() const;

  // The spec's volumes from what the client asked: each the project's, on
  // this host (its disk made and mounted on first use).
  DoorOutcome<std::vector<VolumeMount>> resolve_volumes(const std::string& project,
                                                        const std::vector<VolumeAsk>& asked);
  // One background process's call, through the guarded path.
  Result<ExecResult> run_process(const std::string& project,
                                 const std::shared_ptr<Sandbox>& sandbox, ExecCall call,
                                 OutputSink& sink);
  // The project's operator policy, read again at most once a second.
  Result<policy::OperatorPolicy> policy_of(const std::string& project);

  Services s_;
  std::unique_ptr<host::VolumeDisks> disks_;  // null without a state dir
  calls::ClientWatcher watcher_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<DoorSandbox>> sandboxes_;  // by id
  struct CachedPolicy {
    std::shared_ptr<const policy::OperatorPolicy> policy;
    std::chrono::steady_clock::time_point fetched;
  };
  std::map<std::string, CachedPolicy> policies_;  // under mu_
  std::condition_variable expiry_changed_;
  bool stopping_ = false;  // under mu_
  std::thread expirer_;
};

}  // namespace rf::worker
