// The embedded store of the worker: projects, runs, tool calls (their queue,
// leases, streamed output and result), sandboxes, workers and events in one
// SQLite file that several worker and client processes on a host share.
//
// Threads: a Store is one connection guarded by its own mutex, so threads may
// share it (they then take turns); give a thread its own Store to read in
// parallel. Writers always take turns: every write is one BEGIN IMMEDIATE
// transaction, which is also why two claimers never get the same call. Processes
// open their own Store; never use one across fork().
//
// Every write is all-or-nothing: an error leaves the file as it was. Errors read
// "<operation>: <what is wrong>", e.g. "enqueue call in run R: run R has ended".
// Times are milliseconds since the epoch.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "store/db.h"
#include "store/doorbell.h"
#include "store/labels.h"

namespace rf::store {

enum class Environment { production, staging, development };
enum class RunState { open, ended };
// cancelled: the client gave up before any worker claimed it (call
// --wait-timeout); like failed and interrupted it never runs. revoked: a
// secret the call received was hard-revoked while it ran, which ended it.
enum class CallState { queued, claimed, running, done, interrupted, failed, cancelled, revoked };
enum class Stream : int { out = 1, err = 2 };
enum class SandboxState { pooled, active, destroyed };
enum class WorkerState { running, stopped };
// What an operator said of a worker (`fleet cordon | drain | uncordon`):
// cordoned, it takes no new work; draining, it also finishes what it holds
// and exits. A worker that registers again is no longer draining; a cordon
// stays until uncordoned.
enum class WorkerAdmin { none, cordoned, draining };

std::string_view to_string(Environment e);
std::string_view to_string(RunState s);
std::string_view to_string(CallState s);
std::string_view to_string(SandboxState s);
std::string_view to_string(WorkerState s);
std::string_view to_string(WorkerAdmin a);  // "", "cordoned", "draining"
Result<Environment> parse_environment(std::string_view text);

int64_t now_ms();

// A worker is live while it is registered running and has heartbeat within
// this long (workers beat at least once a second).
inline constexpr std::chrono::milliseconds kLiveWorkerWindow{10'000};

struct Project {
  std::string id;
  Environment environment = Environment::development;
  int64_t created_at = 0;
};

// An identity-scoped call: the cascade is resolved for its project and these
// (empty: that level is not used) when its sandbox starts (issue 11).
struct IdentityScope {
  std::string workflow;
  std::string user;
  bool operator==(const IdentityScope&) const = default;
};

// A tool call as a client submits it.
struct NewCall {
  std::string project;
  std::string run;  // created (open) on first use
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
  std::string cwd;  // "" = the sandbox's default
  std::string stdin_bytes;
  std::chrono::milliseconds timeout{30'000};
  // The image of the sandbox this call runs in (an agent's own); "" = the
  // worker's. Per run, the first call's image holds for the whole run.
  std::string sandbox_image;
  // Set: the call runs identity-scoped (`call --identity`).
  std::optional<IdentityScope> identity;
  // `call --jit` (with identity): the sandbox may ask for credentials (rf-cred).
  bool jit = false;
  // `call --require k=v`: only a worker with every one of these labels takes it.
  Labels requires_labels;
  // `call --wait-timeout`: how long its client waits for a worker. A call
  // requiring labels no live worker has waits this long (not the sweep's
  // few seconds) before it fails: a worker with them may be restarting.
  std::optional<std::chrono::milliseconds> wait_for_worker;
};

// Which queued calls a worker may take.
struct ClaimFilter {
  std::optional<std::string> project;  // per_worker workers serve one project
  Labels labels;                       // the worker's: calls requiring others are left
};

// Output a worker held back, written with the next write of the call.
struct PendingChunk {
  Stream stream = Stream::out;
  std::string data;
};

struct ClaimedCall {
  int64_t id = 0;
  NewCall call;
  int64_t lease_expires_at = 0;
};

struct CallView {
  int64_t id = 0;
  std::string run_id;
  std::string project_id;
  std::vector<std::string> argv;
  CallState state = CallState::queued;
  std::optional<std::string> worker_id;
  std::optional<int64_t> exit_code;
  std::optional<std::string> result_json;
  std::optional<std::string> error;
  int64_t enqueued_at = 0;
  std::optional<int64_t> claimed_at;
  std::optional<int64_t> finished_at;
  Labels requires_labels;
};

struct OutputChunk {
  int64_t seq = 0;  // 1, 2, 3... per call
  Stream stream = Stream::out;
  std::string data;
};

struct RunView {
  std::string id;
  std::string project_id;
  RunState state = RunState::open;
  int64_t created_at = 0;
  std::optional<int64_t> ended_at;
  std::vector<CallView> calls;  // in enqueue order
};

struct WorkerRow {
  std::string id;
  int64_t pid = 0;
  std::string hostname;
  int64_t started_at = 0;
  int64_t heartbeat_at = 0;
  WorkerState state = WorkerState::running;
  // The one project it serves (a per_worker worker); empty: every project.
  std::optional<std::string> project;
  // Its figures at its last heartbeat: {"counters": {series: n}, "gauges":
  // {series: x}} (core/counters.h names).
  std::string metrics_json = "{}";
  // Where it runs and what it offers (issue 16). host_id: its host in the
  // fleet (`--host-id`; the hostname by default, and for rows from before).
  std::string host_id;
  Labels labels;
  // Its fencing token: one more at each registration of the id.
  int64_t epoch = 0;
  // Where front doors reach its sandboxes (worker/door.h), and the key they
  // present; nullopt: it has no door.
  std::optional<std::string> door, door_key;
  WorkerAdmin admin = WorkerAdmin::none;
  std::string version;  // its build's (`ringfence --version`); "" before schema v14
};

// A worker's place in a fleet, given at registration.
struct WorkerSite {
  std::string host_id;  // "" = the hostname
  Labels labels;
  std::string version;  // the build's
};

// Why none of `live` may take work of `project` that requires `labels`: "no
// live worker has the labels this <what> requires (zone=b): worker w1 (host
// h1) lacks zone=b; ..."; nullopt when one may, or when none of them serves the
// project (the work then waits for a worker, as any other).
std::optional<std::string> unmatched_reason(const std::vector<WorkerRow>& live,
                                            const std::string& project, const Labels& labels,
                                            std::string_view what);

// What the fleet looks like to `fleet status` and GET /v1/fleet: each worker
// with the calls it holds and the sandboxes it has live.
struct FleetWorker {
  WorkerRow worker;
  int64_t held_calls = 0;
  int64_t live_sandboxes = 0;
};

struct SandboxRow {
  std::string id;
  std::string backend;  // native, docker, local...
  std::optional<std::string> project_id;
  std::optional<std::string> run_id;
  std::string mode;  // none, per_tool, per_run, per_worker, api
  std::optional<std::string> worker_id;
  std::optional<int64_t> host_pid;
  SandboxState state = SandboxState::active;
  int64_t created_at = 0;  // 0: now
  std::optional<int64_t> destroyed_at;
  std::optional<std::string> spec_json;  // mode api: the spec it was made with
};

struct Event {
  int64_t id = 0;  // assigned by append_event
  int64_t at = 0;  // 0: now
  std::string kind;
  std::optional<std::string> project_id;
  std::optional<std::string> run_id;
  std::optional<int64_t> call_id;
  std::optional<std::string> sandbox_id;
  std::optional<std::string> worker_id;
  std::optional<std::string> detail_json;  // must be valid JSON when set
};

struct EventFilter {
  std::optional<std::string> run_id;
  std::optional<int64_t> call_id;
  int64_t after_id = 0;  // for polling: events with a larger id
  int limit = 1000;
};

class Store {
 public:
  // `target`: a postgres:// URI, or a SQLite file (PATH or sqlite:PATH).
  // SQLite: creates the file and its parent directories if missing, then WAL,
  // foreign keys, a 5 s busy timeout. Both: the schema migrations.
  static Result<std::unique_ptr<Store>> open(const std::string& target);
  // On PostgreSQL, each Store this process opens from now on holds one
  // connection and nothing else: it LISTENs and NOTIFYs on it, with no
  // relay (no listening or sending connection of its own). For a client
  // process (`call`, `run show`, `fleet status`...), which opens one Store:
  // one connection per process (issue 40: three each exhausted
  // max_connections at about 30 clients). Workers and `serve`, which open
  // several, keep the relay their Stores share.
  static void use_one_connection_each(bool on);

  // The clock for every time the store writes (tests move it).
  void set_clock(std::function<int64_t()> clock);

  // ---- projects
  // Creates the project; when it exists with another environment: "project P is
  // production, not staging".
  Status ensure_project(const std::string& id, Environment environment);
  Result<Project> project(const std::string& id);

  // ---- tool calls, client side
  // Queues a call (creating its run, open, if missing) and returns its id.
  // Refused, writing nothing: empty argv, argv/env/cwd not UTF-8, timeout <= 0,
  // unknown project, a run of another project, a run that has ended.
  Result<int64_t> enqueue_call(const NewCall& call);
  // enqueue_call's checks of `call` alone, for a client to make before it
  // writes anything (a new project, say) for a call that would be refused.
  static Status check_new_call(const NewCall& call);
  // The state of a call, its exit code, result and error.
  Result<CallView> call(int64_t call_id);
  // A project's latest calls, newest first (at most `limit`): the console's.
  Result<std::vector<CallView>> recent_calls(const std::string& project, int limit);
  // The output chunks with seq > after_seq, in order (at most `limit`).
  Result<std::vector<OutputChunk>> output(int64_t call_id, int64_t after_seq = 0, int limit = 1000);
  // Cancels the call if it is still queued: it becomes cancelled with `error`
  // and never runs. Returns false, changing nothing, when a worker claimed it
  // first (or it already ended). Claims and cancels take the write lock in
  // turn, and each acts only on a call still queued, so exactly one wins.
  Result<bool> cancel_queued_call(int64_t call_id, const std::string& error);

  // ---- waiting without polling (see doorbell.h). Read the version, look at
  // the store, then wait with that version: a change in between is not missed.
  // Waits never exceed `timeout`, and may end early for nothing.
  // Which queue: the calls', or the workflow runs' (a worker's run claimer
  // sleeps on that one, so queued calls do not wake it).
  enum class Queue { calls, runs };
  uint32_t queue_version(Queue queue = Queue::calls) const;
  void wait_for_queue(uint32_t seen, std::chrono::microseconds timeout,
                      Queue queue = Queue::calls) const;
  uint32_t call_version(int64_t call_id) const;
  void wait_for_call(int64_t call_id, uint32_t seen, std::chrono::microseconds timeout) const;
  // Wakes every process waiting on the queue (a worker stopping its claimer).
  void wake_queue_waiters() {
    ring_queue();
    ring_run_queue();
  }
  // A workflow run was queued, handed off or requeued.
  void ring_run_queue();
  // A run's slot: rung by every event of the run and every change of a
  // workflow run (workflow_store.h), so `workflow run --follow` sleeps too.
  uint32_t run_version(const std::string& run_id) const;
  void wait_for_run(const std::string& run_id, uint32_t seen,
                    std::chrono::microseconds timeout) const;
  void ring_run(const std::string& run_id);

  // ---- tool calls, worker side. "Held" = claimed or running by that worker,
  // its lease not expired; a call not held is refused ("lease lost").
  // Takes the oldest queued call that `filter` allows: claimed by the worker
  // (which must be registered and running) until now + lease.
  Result<std::optional<ClaimedCall>> claim_next(const std::string& worker_id,
                                                std::chrono::milliseconds lease,
                                                const ClaimFilter& filter = {});
  // Takes up to `max` of the oldest queued calls in one transaction, straight
  // to running (a worker that starts them at once): one write per batch.
  Result<std::vector<ClaimedCall>> claim_running(const std::string& worker_id,
                                                 std::chrono::milliseconds lease, size_t max,
                                                 const ClaimFilter& filter = {});
  Status mark_running(int64_t call_id, const std::string& worker_id);
  // A call the worker makes itself and runs at once (a workflow step's
  // command): inserted running, held by the worker until now + lease, never
  // queued. Its output and end go as any held call's. The run must be open.
  Result<int64_t> start_call(const NewCall& call, const std::string& worker_id,
                             std::chrono::milliseconds lease);
  // Appends a chunk and returns its seq (1, 2, 3... per call).
  Result<int64_t> append_output(int64_t call_id, const std::string& worker_id, Stream stream,
                                std::string_view bytes);
  // Appends chunks in one transaction; returns the last seq (0 when none).
  Result<int64_t> append_outputs(int64_t call_id, const std::string& worker_id,
                                 const std::vector<PendingChunk>& chunks);
  // result_json must be valid JSON. `output` (held back by the worker) is
  // appended in the same transaction.
  Status finish_call(int64_t call_id, const std::string& worker_id, int exit_code,
                     const std::string& result_json, const std::vector<PendingChunk>& output = {});
  Status fail_call(int64_t call_id, const std::string& worker_id, const std::string& error,
                   const std::vector<PendingChunk>& output = {});
  // The call ends as revoked (a secret it received was hard-revoked): like
  // fail_call, with state revoked.
  Status revoke_call(int64_t call_id, const std::string& worker_id, const std::string& error,
                     const std::vector<PendingChunk>& output = {});
  // Moves heartbeat_at to now and the lease of every call the worker holds to
  // now + lease, a lease that ran out included while no sweep ended the call.
  // Refused with ErrorCode::kFenced once another process registered the id.
  // `metrics_json`, when given, replaces the worker's figures (WorkerRow).
  // Returns what the operator says of the worker now (cordoned, draining).
  Result<WorkerAdmin> heartbeat(const std::string& worker_id, std::chrono::milliseconds lease,
                                const std::optional<std::string>& metrics_json = std::nullopt);
  // Calls claimed or running whose lease expired before `now` become interrupted
  // ("worker W stopped heartbeating"). Never queued again: tool calls are not
  // idempotent. Returns how many. `sparing`: a worker this Store registered,
  // whose calls under that registration are left alone (a worker sweeping
  // is alive; its own late heartbeat takes their leases again).
  Result<int> interrupt_orphaned_calls(int64_t now, const std::string& sparing = "");
  // Every call the worker holds becomes interrupted ("worker W restarted"), for a
  // worker that starts again with the same id. Returns how many.
  Result<int> interrupt_calls_of_worker(const std::string& worker_id);

  // Queued calls of projects other than `project`, enqueued before
  // `enqueued_before`, fail with `error` (a per_worker worker refusing what no
  // other worker took). Returns how many.
  Result<int> fail_unserved_calls(const std::string& project, int64_t enqueued_before,
                                  const std::string& error);
  // Queued calls that require labels, enqueued before `enqueued_before`, that
  // no running worker heartbeating since `heartbeat_since` (and serving the
  // call's project) may take, fail with an error naming the labels each
  // live worker lacks. Returns how many.
  Result<int> fail_unmatched_calls(int64_t enqueued_before, int64_t heartbeat_since);

  // ---- runs
  // Ends the run (a no-op when already ended); its queued calls fail with "run
  // ended before the call started". Claimed and running calls go on.
  Status end_run(const std::string& run_id);
  Result<RunView> run(const std::string& run_id);
  // Those of `run_ids` that have ended, in one query: a worker asks this of
  // its live runs every second, thousands of them.
  Result<std::vector<std::string>> ended_runs(const std::vector<std::string>& run_ids);

  // ---- workers
  // Registers the worker as running (again, if the id is known: new pid,
  // hostname, started_at). A worker reusing its id calls
  // interrupt_calls_of_worker first.
  // `project`: the one project it serves (per_worker); nullopt: every project.
  // Each registration gives the id a new epoch (its fencing token): this Store
  // then claims, heartbeats and writes held calls under it, and once another
  // process registers the same id, those of this one are refused ("fenced").
  Status register_worker(const std::string& id, int64_t pid, const std::string& hostname,
                         const std::optional<std::string>& project = std::nullopt,
                         const WorkerSite& site = {});
  // What it serves changed (a per_worker worker fell back to another mode).
  Status set_worker_project(const std::string& id, const std::optional<std::string>& project);
  // Where its door listens and the key a front door presents (worker/door.h).
  Status set_worker_door(const std::string& id, const std::string& door, const std::string& key);
  // One worker, nullopt when none has that id.
  Result<std::optional<WorkerRow>> worker(const std::string& id);
  // Marks it stopped; the calls it still holds become interrupted ("worker W
  // stopped"). Only under `epoch` (default: the one this Store registered it
  // under, else the current one): a fenced process that stops leaves the
  // process that took its id over, and that one's calls, alone
  // (ErrorCode::kFenced).
  Status stop_worker(const std::string& id, std::optional<int64_t> epoch = std::nullopt);
  // `fleet cordon | drain | uncordon TARGET`: the worker with that id, else
  // every worker on the host with that host id (draining: the running ones).
  // Returns the workers it changed; none: an error naming TARGET. A cordoned
  // or draining worker's claims take nothing (enforced here, whatever the
  // worker's build).
  Result<std::vector<std::string>> set_worker_admin(const std::string& target, WorkerAdmin admin);
  Result<std::vector<WorkerRow>> workers();
  // Every worker (running ones first, then by id) with its load; `project`
  // set: only workers that may serve it, and only its calls and sandboxes
  // counted.
  Result<std::vector<FleetWorker>> fleet(const std::optional<std::string>& project = std::nullopt);
  // Calls waiting for a worker, and calls a worker holds (claimed or
  // running): the queue's depth for /metrics, from the partial indexes only.
  struct LiveCalls {
    int64_t queued = 0, held = 0;
  };
  Result<LiveCalls> live_calls();
  // Running workers that serve `project` (pinned to it or to none) and
  // heartbeat at or after `heartbeat_since`: those that may claim its calls.
  Result<std::vector<WorkerRow>> workers_serving(const std::string& project,
                                                 int64_t heartbeat_since);

  // ---- sandboxes
  Status record_sandbox(const SandboxRow& row);
  // destroyed is final: it sets destroyed_at and no later state is accepted.
  Status set_sandbox_state(const std::string& id, SandboxState state);
  // Pooled and active sandboxes, oldest first.
  Result<std::vector<SandboxRow>> live_sandboxes();
  // One sandbox, whatever its state; nullopt when none has that id.
  Result<std::optional<SandboxRow>> sandbox(const std::string& id);
  // In one transaction: records `created` (as record_sandbox) and marks
  // `destroyed` (ids, recorded now or before) destroyed. A worker batches
  // these; a refused row refuses the whole batch.
  Status record_sandboxes(const std::vector<SandboxRow>& created,
                          const std::vector<std::string>& destroyed);
  // The live sandboxes recorded by the worker become destroyed (it died and
  // they were reaped). Returns how many.
  Result<int> destroy_sandboxes_of_worker(const std::string& worker_id);

  // ---- events
  // Returns the new event's id.
  Result<int64_t> append_event(const Event& event);
  Result<std::vector<Event>> events(const EventFilter& filter);

  // For the store's other tables (identity_store.h, audit_log.h): runs
  // fn(Db&) under this store's lock, as the Store's own methods do.
  template <class F>
  auto locked(F&& fn) -> decltype(fn(std::declval<Db&>())) {
    std::lock_guard lock(mu_);
    return fn(db_);
  }
  int64_t clock_now() const { return now(); }
  // Under locked(): the epoch this Store registered `worker_id` under (the
  // fence its writes carry), or nullopt when it did not register it.
  std::optional<int64_t> fence_of(const std::string& worker_id) const;
  // This Store's registration of `worker_id`, to be carried by another
  // connection of the same process (a worker's lease keeper has its own):
  // read with registration(), given to the other with adopt_registration().
  std::optional<int64_t> registration(const std::string& worker_id);
  void adopt_registration(const std::string& worker_id, int64_t epoch);

 private:
  Store(Db db, std::shared_ptr<Doorbell> bell) : db_(std::move(db)), bell_(std::move(bell)) {}
  // Rings the slot here and, on PostgreSQL, in every other process.
  void ring(uint32_t slot);
  // use_one_connection_each: rings what this connection heard; waits for
  // `slot` to move past `seen` polling the connection, up to `timeout`.
  void hear_rings();
  void wait_listening(uint32_t slot, uint32_t seen, std::chrono::microseconds timeout);

  int64_t now() const { return clock_(); }
  // fail_call and revoke_call: the held call ends in `state` (failed, revoked).
  Status end_held_call(int64_t call_id, const std::string& worker_id, std::string_view state,
                       const std::string& error, const std::vector<PendingChunk>& output);
  void ring_queue();
  void ring_call(int64_t call_id);
  // Rings each call's slot; returns how many.
  Result<int> ring_each(Result<std::vector<int64_t>> ids);

  // Recursive: a Store that listens on its own connection rings (NOTIFY on
  // it) from methods that hold the lock and from callers that do not.
  std::recursive_mutex mu_;
  Db db_;
  bool listens_ = false;  // use_one_connection_each: LISTEN/NOTIFY on db_
  std::map<std::string, int64_t, std::less<>> fences_;  // under mu_
  std::shared_ptr<Doorbell> bell_;  // null when the bell file cannot be opened: waits sleep
  // PostgreSQL: carries rings to and from the other processes (LISTEN/NOTIFY).
  // Shared by every Store of this process on the same database, with bell_.
  std::shared_ptr<BellRelay> relay_;
  std::function<int64_t()> clock_ = now_ms;
};

}  // namespace rf::store
