// The worker (host side): claims tool calls from the store, runs each in the
// sandbox its mode says, streams the output into the store, and reports how it
// ended. Heartbeats keep its leases; a call whose worker died is marked
// interrupted, never re-run. Stops by draining: no new claims, in-flight calls
// get a grace period, then are cancelled, then every sandbox is destroyed.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "calls/call_output.h"
#include "calls/guarded_call.h"
#include "calls/identity_calls.h"
#include "calls/jit_broker.h"
#include "calls/proof_recorder.h"
#include "sandbox/sandbox.h"
#include "store/store.h"
#include "worker/door.h"
#include "worker/door_sandboxes.h"
#include "worker/pool.h"
#include "worker/sandbox_router.h"
#include "worker/serving.h"
#include "worker/settings.h"
#include "worker/workflow_runs.h"

namespace rf::worker {

struct WorkerOptions {
  WorkerSettings settings;
  std::string worker_id;  // empty: "<hostname>-<pid>"
  int concurrency = 8;
  // A held call outlives the last heartbeat this long, then is interrupted.
  // `worker start --lease` defaults to 10 s; embedders (and the tests that
  // drive a Worker under ThreadSanitizer, where a heartbeat can lag) get 30 s.
  std::chrono::milliseconds lease{30'000};
  std::chrono::milliseconds grace{10'000};
  // How long an idle worker sleeps between looks at the queue when nobody
  // rings the store's doorbell (another process that does not ring).
  std::chrono::milliseconds idle_poll{100};
  // Sandbox creations failing this many times in a row make the worker check
  // its backend's health and fall back (or, for production, stop).
  int failures_before_fallback = 3;
  // While fallen back, how often the configured backend and mode are tried again.
  std::chrono::milliseconds recovery_interval{30'000};
  // per_worker: a call of another project that no other worker took within
  // this long is failed with a clear error instead of waiting forever.
  std::chrono::milliseconds unserved_after{5'000};
  // Output is held back up to this long, then written (see call_output.h).
  std::chrono::milliseconds output_delay{20};
  // How often the sandboxes made and destroyed are written to the store.
  std::chrono::milliseconds ledger_period{200};
  // Where identity-scoped calls read Vault secrets (null: vault secrets fail closed).
  identity::VaultAccess* vault = nullptr;
  // How often hard revocations are looked for (they end sandboxes within it).
  std::chrono::milliseconds revocation_period{200};
  // Workflow runs (issue 12): how many run at once, where `local` artifacts
  // go (--artifact-root; "" refuses them), where the agent adapters are.
  int max_workflow_runs = 4;
  std::string artifact_root;
  std::string agents_dir;
  // Its door (worker/door.h): front doors reach its API sandboxes there. On
  // a unix socket in the state dir unless `door_listen` (HOST:PORT) is given.
  bool door = true;
  std::string door_listen;
  // Its build's version, shown by `fleet status` and /metrics.
  std::string version = RF_VERSION;
};

// Tries the configured backend, then each fallback backend (keeping the mode);
// then, for non-production projects only, one mode at a time down to none.
// Production never falls back in mode: the error says why the worker cannot start.
// The same check runs while the worker serves (at_start false), when sandbox
// creations keep failing: then production's error says "stopping".
Result<Placement> place(const WorkerSettings& settings, bool at_start = true);

class Worker {
 public:
  static Result<std::unique_ptr<Worker>> start(WorkerOptions options, Placement placement);
  ~Worker();
  // Stops claiming, lets in-flight calls finish within the grace period,
  // cancels the rest, destroys every sandbox, marks the worker stopped.
  void stop();
  const std::string& id() const { return id_; }
  // What it serves with now (it changes on fallback and recovery).
  SandboxMode mode() const { return serving()->placement.mode; }
  std::string backend_name() const { return serving()->placement.backend->name(); }
  store::Store& store() { return *store_; }
  SandboxRouter& router() { return *serving()->router; }
  // Set when a production worker's backend turned unhealthy while running: it
  // stopped claiming, and its process should drain and exit non-zero.
  std::optional<std::string> fatal() const;
  // `fleet drain` reached this worker and it holds nothing any more: no call,
  // no workflow run. Its process stops and exits 0.
  bool drained();

 private:
  Worker(WorkerOptions options, Placement placement)
      : options_(std::move(options)), first_placement_(std::move(placement)) {}
  Status init();
  Status open_door();
  std::shared_ptr<Serving> serving() const;
  // The warm pool's hook: each pooled sandbox's boundary report, made as it
  // warms up, off every call's path.
  WarmPool::OnWarm report_at_warm_up();
  // Looks at the backend's health when creations keep failing, and while
  // fallen back, whether the configured backend and mode work again.
  void watch_health();
  // Executors take turns leading (leader/followers): the leader claims as many
  // calls as executors are idle, in one transaction, runs the first itself and
  // hands the rest to the followers.
  void executor_loop();
  void housekeeping_loop();
  // Heartbeats on a thread and a store connection of its own, so neither
  // the calls, the claims nor housekeeping delay it (a worker starved of CPU
  // keeps its leases); a refused heartbeat that says "fenced" ends the
  // worker (fatal()).
  void lease_loop();
  // Stops claiming; the process exits non-zero with `why` (fatal()).
  void give_up(const std::string& why);
  // What the heartbeat sends for /metrics (store::WorkerRow::metrics_json),
  // with `sandboxes`: what each of its sandboxes uses now (sandbox_usage.h).
  std::string metrics_json(const nlohmann::json& sandboxes) const;
  void run_call(const store::ClaimedCall& call);
  calls::CallPath call_path() const;
  // The one project a per_worker worker serves (what it claims, and what the
  // store says it serves); nullopt for every other mode.
  std::optional<std::string> pinned_project(SandboxMode mode) const;

  WorkerOptions options_;
  Placement first_placement_;  // moved into serving_ by init()
  std::string id_;
  std::string host_id_;  // its host in the fleet (settings.host_id, or the hostname)
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<store::Store> lease_store_;  // lease_loop()'s own connection
  // Ends of calls the store could not take yet (calls/result_spool.h).
  std::unique_ptr<calls::ResultSpool> spool_;
  std::atomic<bool> fenced_{false};  // another process registered this id: never stop it
  // When this worker's heartbeat last failed for the store (steady ms; 0:
  // never): its sweeps wait a lease past it (housekeeping_loop).
  std::atomic<int64_t> store_failed_at_{0};
  std::unique_ptr<SandboxLedger> ledger_;  // before serving_, which reports to it
  // Reports and receipts (issue 15): after store_, which it uses; before
  // serving_, whose pool's refill thread makes reports through it.
  std::unique_ptr<calls::ProofRecorder> proof_;
  mutable std::mutex serving_mu_;
  std::shared_ptr<Serving> serving_;
  std::vector<std::weak_ptr<Serving>> retired_;  // replaced, still lent to calls
  std::optional<std::string> fatal_;
  std::chrono::steady_clock::time_point last_recovery_try_{};
  std::unique_ptr<calls::OutputFlusher> flusher_;
  std::unique_ptr<calls::IdentityCalls> identity_;  // after store_: it uses it
  std::unique_ptr<calls::JitBroker> jit_;           // after identity_: it uses it
  std::unique_ptr<WorkflowRuns> workflows_;         // after identity_ and ledger_: it uses them
  SandboxMode first_serving_mode_ = SandboxMode::kNone;
  std::unique_ptr<DoorSandboxes> door_sandboxes_;  // after the call path's parts: it uses them
  std::unique_ptr<Door> door_;                     // after door_sandboxes_: it serves them
  std::atomic<bool> claiming_{true};
  // What the operator says of it (`fleet cordon | drain`), as its last
  // heartbeat read it: not none, it looks for no new work (the store would
  // give it none either).
  std::atomic<store::WorkerAdmin> admin_{store::WorkerAdmin::none};
  std::atomic<bool> stopped_{false};
  std::atomic<bool> cancelling_{false};  // the grace period passed
  std::atomic<int> in_flight_{0};        // claimed and not yet finished, handed over or not
  std::mutex mu_;
  std::condition_variable claimed_cv_;  // followers wait for calls or for the lead
  std::deque<store::ClaimedCall> claimed_;
  bool leader_ = false;  // an executor is looking at the queue
  std::vector<std::thread> threads_;
};

// Where the store lives under a state dir.
std::string store_path(const std::string& state_dir);

}  // namespace rf::worker
