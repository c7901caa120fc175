#include "worker/worker.h"

#include <signal.h>
#include <sodium.h>
#include <unistd.h>

#include "calls/redacting_sink.h"
#include "core/counters.h"
#include "core/fd_limit.h"
#include "core/log.h"
#include "core/units.h"
#include "identity/audit_events.h"
#include "policy/host_capacity.h"
#include "proof/boundary_facts.h"
#include "proof/output_digest.h"
#include "redact/stream_redactor.h"
#include "sandbox/result_json.h"
#include "store/workflow_store.h"
#include "worker/door.h"
#include "worker/sandbox_usage.h"

namespace rf::worker {
namespace {

std::string hostname() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

// Why a backend cannot serve: it cannot be built, or a required check fails.
std::optional<std::string> unhealthy(BackendKind kind, std::unique_ptr<Backend>* out) {
  auto backend = make_backend(kind);
  if (!backend) return backend.error().to_string();
  for (const auto& c : (*backend)->health()) {
    if (c.required && !c.ok) return c.name + ": " + c.detail;
  }
  *out = std::move(*backend);
  return std::nullopt;
}

SandboxMode step_down(SandboxMode m) {
  switch (m) {
    case SandboxMode::kPerWorker:
      return SandboxMode::kPerRun;
    case SandboxMode::kPerRun:
      return SandboxMode::kPerTool;
    default:
      return SandboxMode::kNone;
  }
}

}  // namespace

std::string store_path(const std::string& state_dir) { return state_dir + "/ringfence.db"; }

Result<Placement> place(const WorkerSettings& s, bool at_start) {
  Placement p;
  p.mode = s.mode.value;
  if (p.mode != SandboxMode::kNone) {
    std::vector<BackendKind> candidates{s.backend.value};
    for (BackendKind b : s.fallback_backends.value) candidates.push_back(b);
    std::string first_reason;
    for (BackendKind kind : candidates) {
      // Falling back "keeping the mode" onto no isolation would be a silent downgrade.
      auto why =
          kind == BackendKind::kLocal
              ? std::optional<std::string>("it has no isolation and serves only sandbox mode none")
              : unhealthy(kind, &p.backend);
      if (!why) return p;
      const std::string line = "backend " + std::string(to_string(kind)) + " is unhealthy: " + *why;
      if (first_reason.empty()) first_reason = line;
      p.warnings.push_back(line);
      spdlog::warn("{}", line);
    }
    if (s.project_environment.value == ProjectEnvironment::kProduction) {
      return make_error("worker",
                        (at_start ? "refusing to start: " : "stopping: ") + first_reason +
                            "; production projects never fall back to a weaker sandbox mode");
    }
    while (p.mode != SandboxMode::kNone) {
      const SandboxMode next = step_down(p.mode);
      const std::string line = "falling back from sandbox mode " + to_string(p.mode) + " to " +
                               to_string(next) + ": " + first_reason;
      p.warnings.push_back(line);
      spdlog::warn("{}", line);
      p.mode = next;
      // per_run and per_tool need the same backend that just failed; only none is different.
    }
  }
  auto local = make_backend(BackendKind::kLocal);
  if (!local) return local.take_error();
  p.backend = std::move(*local);
  return p;
}

Result<std::unique_ptr<Worker>> Worker::start(WorkerOptions options, Placement placement) {
  // Also for workers embedded in other programs (`worker start` raised it already).
  if (auto limit = raise_fd_limit(); !limit) spdlog::warn("{}", limit.error().to_string());
  std::unique_ptr<Worker> w(new Worker(std::move(options), std::move(placement)));
  RF_TRY(w->init());
  for (int i = 0; i < w->options_.concurrency; ++i)
    w->threads_.emplace_back([p = w.get()] { p->executor_loop(); });
  w->threads_.emplace_back([p = w.get()] { p->housekeeping_loop(); });
  w->threads_.emplace_back([p = w.get()] { p->lease_loop(); });
  w->workflows_->start();
  return w;
}

Status Worker::init() {
  const WorkerSettings& s = options_.settings;
  // No sandbox of this worker's is ever above what its host has.
  if (auto fits = policy::check_host_capacity(s.limits.value); !fits) {
    const LimitField* l = limit_of_spec_error(fits.error());
    return make_error(
        l ? where_of(s.limits.source_of(l->name), l->config_key()) : fits.error().where,
        fits.error().message);
  }
  // A policy that cannot be read stops the worker here (fail closed), naming FILE:LINE.
  std::shared_ptr<const identity::JitPolicy> jit_policy;
  if (!s.jit_policy.value.empty()) {
    auto policy = identity::load_jit_policy(s.jit_policy.value);
    if (!policy) return policy.take_error();
    jit_policy = std::make_shared<const identity::JitPolicy>(std::move(*policy));
  }
  id_ = options_.worker_id.empty() ? hostname() + "-" + std::to_string(::getpid())
                                   : options_.worker_id;
  const std::string host = s.host_id.value.empty() ? hostname() : s.host_id.value;
  host_id_ = host;
  auto st = store::Store::open(s.store_target());
  if (!st) return st.take_error();
  store_ = std::move(*st);
  // Crash safety: calls held by a dead worker of this host are interrupted
  // now (never re-run), and sandboxes whose owner died are reaped.
  if (auto workers = store_->workers()) {
    for (const auto& w : *workers) {
      // Only a worker of this host can be known dead by its pid.
      if (w.state != store::WorkerState::running || w.host_id != host || w.id == id_) continue;
      if (::kill(static_cast<pid_t>(w.pid), 0) == 0 || errno != ESRCH) continue;
      const std::string dead = "worker " + w.id + " (pid " + std::to_string(w.pid) + ") died";
      warn_unless_ok(store_->interrupt_calls_of_worker(w.id), dead + ": interrupting its calls");
      // Its workflow runs go back to the queue, the steps it ran interrupted.
      warn_unless_ok(store::WorkflowStore(*store_).requeue_runs_of_worker(w.id, dead),
                     dead + ": requeueing its workflow runs");
      // Its sandboxes are reaped below; the store forgets them now.
      warn_unless_ok(store_->destroy_sandboxes_of_worker(w.id),
                     dead + ": forgetting its sandboxes");
      warn_unless_ok(store_->stop_worker(w.id, w.epoch), dead + ": marking it stopped");
      spdlog::warn("{}; its calls are marked interrupted", dead);
    }
  }
  // Ends its previous process kept while the store was unreachable are
  // filed first, under that process's registration, which still holds
  // their calls; once this one registers, what the old one held is
  // interrupted (below).
  spool_ = std::make_unique<calls::ResultSpool>(s.state_dir.value + "/spool");
  if (const int filed = spool_->file_all(*store_, std::nullopt); filed > 0)
    spdlog::warn("{} call end(s) kept while the store was unreachable are filed", filed);
  RF_TRY(store_->register_worker(id_, ::getpid(), hostname(), pinned_project(first_placement_.mode),
                                 store::WorkerSite{host, s.labels.value, options_.version}));
  auto lease_store = store::Store::open(s.store_target());
  if (!lease_store) return lease_store.take_error();
  lease_store_ = std::move(*lease_store);
  lease_store_->adopt_registration(id_, store_->registration(id_).value_or(-1));
  // A worker of the same id that died (a restart with --worker-id) left these.
  warn_unless_ok(store_->interrupt_calls_of_worker(id_), "interrupting this worker's old calls");
  warn_unless_ok(store::WorkflowStore(*store_).requeue_runs_of_worker(
                     id_, "worker " + id_ + " restarted while the step ran"),
                 "requeueing this worker's old workflow runs");
  warn_unless_ok(store_->destroy_sandboxes_of_worker(id_),
                 "forgetting this worker's old sandboxes");
  warn_unless_ok(store_->interrupt_orphaned_calls(store::now_ms()),
                 "interrupting calls whose worker's lease ran out");
  auto reaped = first_placement_.backend->reap(std::chrono::hours(24 * 365), false);
  if (warn_unless_ok(reaped, "reaping orphaned sandboxes") && !reaped->empty()) {
    spdlog::warn("reaped {} orphaned sandboxes", reaped->size());
  }
  flusher_ = std::make_unique<calls::OutputFlusher>(options_.output_delay);
  identity_ = std::make_unique<calls::IdentityCalls>(
      *store_,
      calls::IdentityCalls::Options{id_, s.state_dir.value, options_.vault,
                                    s.allow_identity_without_sandbox.value,
                                    options_.revocation_period},
      [this](const std::shared_ptr<Sandbox>& sandbox) { serving()->router->discard(sandbox); });
  jit_ = std::make_unique<calls::JitBroker>(*store_, *identity_,
                                            calls::JitBroker::Options{jit_policy});
  // The key that signs boundary reports and receipts: made on first use, and
  // a worker that cannot read it does not start (a receipt is never missing).
  auto proof_key = proof::SigningKey::load_or_create(s.state_dir.value);
  if (!proof_key) return proof_key.take_error();
  proof_ = std::make_unique<calls::ProofRecorder>(*store_, std::move(*proof_key), "worker " + id_);
  // The runner binary's digest, which every report names: made (or read back
  // from the state dir) now, not on the first report's path.
  proof::warm_runner_sha256(s.state_dir.value + "/keys/runner.sha256");
  ledger_ = std::make_unique<SandboxLedger>(*store_, id_, options_.ledger_period);
  first_serving_mode_ = first_placement_.mode;
  serving_ = Serving::make(std::move(first_placement_), s, ledger_.get(), report_at_warm_up());
  WorkflowServices services;
  services.store = store_.get();
  services.worker_id = id_;
  services.lease = options_.lease;
  services.serving = [this] { return serving(); };
  services.settings = &options_.settings;
  services.identity = identity_.get();
  services.jit = jit_.get();
  services.ledger = ledger_.get();
  services.flusher = flusher_.get();
  services.proof = proof_.get();
  services.artifact_root = options_.artifact_root;
  services.agents_dir = options_.agents_dir;
  services.max_runs = options_.max_workflow_runs;
  std::string resolve;
  for (const auto& r : s.proxy_resolve.value) resolve += (resolve.empty() ? "" : ",") + r;
  auto parsed = net::parse_resolve_override(resolve);
  if (!parsed) return make_error("sandbox.proxy_resolve", parsed.error().to_string());
  services.resolve = std::move(*parsed);
  workflows_ = std::make_unique<WorkflowRuns>(std::move(services));
  return open_door();
}

// The door front doors reach this worker's API sandboxes through, written to
// its row of the store; a worker that runs calls without sandboxes (mode
// none) makes none for the API, so it offers no door.
Status Worker::open_door() {
  if (!options_.door || first_serving_mode_ == SandboxMode::kNone) return ok_status();
  DoorSandboxes::Services services;
  services.store = store_.get();
  services.worker_id = id_;
  services.lease = options_.lease;
  services.serving = [this] { return serving(); };
  services.ledger = ledger_.get();
  services.path = call_path();
  services.host_id = host_id_;
  services.state_dir = options_.settings.state_dir.value;
  door_sandboxes_ = std::make_unique<DoorSandboxes>(std::move(services));
  auto door = Door::open(*door_sandboxes_,
                         DoorOptions{options_.settings.state_dir.value, options_.door_listen}, id_);
  if (!door) return door.take_error();
  door_ = std::move(*door);
  return store_->set_worker_door(id_, door_->address(), door_->key());
}

WarmPool::OnWarm Worker::report_at_warm_up() {
  return [recorder = proof_.get()](Sandbox& sandbox) { recorder->report_now(sandbox); };
}

std::shared_ptr<Serving> Worker::serving() const {
  std::lock_guard lock(serving_mu_);
  return serving_;
}

std::optional<std::string> Worker::fatal() const {
  std::lock_guard lock(serving_mu_);
  return fatal_;
}

void Worker::watch_health() {
  const WorkerSettings& s = options_.settings;
  auto now_serving = serving();
  const bool fallen_back = !now_serving->serves(s.backend.value, s.mode.value);
  const auto now = std::chrono::steady_clock::now();
  const bool failing = now_serving->failures_in_a_row() >= options_.failures_before_fallback;
  const bool retry = fallen_back && now - last_recovery_try_ >= options_.recovery_interval;
  if (!failing && !retry) return;
  last_recovery_try_ = now;
  now_serving->call_path_failures = 0;
  // place() checks the configured backend first, then the fallbacks, then
  // steps the mode down for non-production projects; it logs every step.
  auto next = place(s, /*at_start=*/false);
  if (!next) {
    give_up(next.error().to_string());
    return;
  }
  if (now_serving->serves(next->backend->kind(), next->mode)) {
    if (failing)
      spdlog::warn("creating sandboxes keeps failing, yet backend {} passes its health checks",
                   next->backend->name());
    return;
  }
  if (next->backend->kind() == s.backend.value && next->mode == s.mode.value) {
    spdlog::info("backend {} is healthy again: serving in sandbox mode {} again",
                 to_string(s.backend.value), to_string(s.mode.value));
  }
  const auto pinned = pinned_project(next->mode);
  auto replacement = Serving::make(std::move(*next), s, ledger_.get(), report_at_warm_up());
  {
    std::lock_guard lock(serving_mu_);
    retired_.push_back(serving_);
    std::erase_if(retired_, [](const auto& w) { return w.expired(); });
    serving_ = std::move(replacement);
  }
  // Clients waiting for a worker read which projects it serves now.
  if (auto st = store_->set_worker_project(id_, pinned); !st)
    spdlog::warn("{}", st.error().to_string());
}

std::optional<std::string> Worker::pinned_project(SandboxMode mode) const {
  if (mode != SandboxMode::kPerWorker) return std::nullopt;
  return options_.settings.project.value;
}

Worker::~Worker() { stop(); }

void Worker::executor_loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    if (!claimed_.empty()) {
      // Calls already claimed run even while stopping: they are in flight.
      store::ClaimedCall next = std::move(claimed_.front());
      claimed_.pop_front();
      lock.unlock();
      run_call(next);
      lock.lock();
      --in_flight_;
      continue;
    }
    if (!claiming_) return;
    if (admin_ != store::WorkerAdmin::none) {
      // Cordoned or draining: no new work until uncordoned (lease_loop reads it).
      lock.unlock();
      std::this_thread::sleep_for(options_.idle_poll);
      lock.lock();
      continue;
    }
    if (leader_) {
      // A follower: the leader claims for everyone and hands calls over.
      claimed_cv_.wait(lock, [&] { return !claimed_.empty() || !leader_ || !claiming_; });
      continue;
    }
    // The leader: looks at the queue for every idle executor, and runs the
    // first call it takes itself (no hand-over on the path of a lone call).
    leader_ = true;
    const int free = options_.concurrency - in_flight_;
    lock.unlock();
    // Read the doorbell before looking: a call enqueued after the look rings it.
    const uint32_t seen = store_->queue_version();
    store::ClaimFilter filter;
    filter.project = pinned_project(mode());
    filter.labels = options_.settings.labels.value;
    auto batch =
        store_->claim_running(id_, options_.lease, static_cast<size_t>(std::max(free, 1)), filter);
    if (!batch) spdlog::warn("claim: {}", batch.error().to_string());  // a busy store: look again
    if (!batch || batch->empty()) {
      if (claiming_) store_->wait_for_queue(seen, options_.idle_poll);
      lock.lock();
      leader_ = false;
      continue;
    }
    lock.lock();
    leader_ = false;
    in_flight_ += static_cast<int>(batch->size());
    for (auto& c : *batch) claimed_.push_back(std::move(c));
    // This executor runs the first call: one follower each for the rest, and one
    // to lead next. Waking them all (notify_all) had every idle executor contend
    // for the lock on the cores the call runs on, on every call (issue 10).
    for (size_t i = 0; i < batch->size(); ++i) claimed_cv_.notify_one();
  }
}

void Worker::run_call(const store::ClaimedCall& claimed) {
  const store::NewCall& c = claimed.call;
  const calls::CallPath path = call_path();
  if (cancelling_) {
    return calls::fail_unrun(path, claimed.id,
                             "cancelled: the worker stopped before the call started");
  }
  // The call keeps this serving to its end, even if the worker falls back meanwhile.
  const auto with = serving();
  std::optional<calls::PreparedIdentity> prepared;
  std::string notice;
  if (c.jit && with->placement.mode == SandboxMode::kNone) {
    return calls::fail_unrun(path, claimed.id,
                             "JIT refused: this worker runs calls without a sandbox (mode none); "
                             "rf-cred needs a sandbox whose tool runner serves it");
  }
  if (c.identity) {
    auto p = identity_->prepare(calls::IdentityUse::of(claimed),
                                with->placement.mode != SandboxMode::kNone, &notice);
    if (!p) return calls::fail_unrun(path, claimed.id, p.error().to_string());
    prepared = std::move(*p);
  }
  // A per_worker sandbox serves every run of its project: identity values get
  // a sandbox of their own instead.
  const bool dedicated = prepared && with->placement.mode == SandboxMode::kPerWorker;
  auto lease = with->router->acquire(c.project, c.run, c.sandbox_image, dedicated,
                                     prepared && prepared->needs_intercept());
  if (!lease) {
    // A client's own image that cannot be had says nothing of the backend's health.
    if (c.sandbox_image.empty()) ++with->call_path_failures;
    return calls::fail_unrun(path, claimed.id, lease.error().to_string());
  }
  with->call_path_failures = 0;
  const std::string sandbox_id = lease->sandbox->id();
  auto release = [&] {
    const bool gone = lease->destroy_after;
    if (gone) proof_->wait_for_report(sandbox_id);  // its self-probe runs in it
    with->router->release(std::move(*lease));
    if (gone) {
      identity_->sandbox_gone(sandbox_id);
      proof_->sandbox_gone(sandbox_id);
    }
  };
  calls::GuardedCall call;
  call.call_id = claimed.id;
  call.use = calls::IdentityUse::of(claimed);
  call.exec.argv = c.argv;
  call.exec.env = c.env;
  if (prepared) {
    if (auto s = identity_->inject(call.use, *prepared, lease->sandbox); !s) {
      calls::fail_unrun(path, claimed.id, s.error().to_string(),
                        identity_->patterns_for(*lease->sandbox));
      return release();
    }
    for (const auto& [key, value] : prepared->resolved.env) call.exec.env[key] = value.reveal();
  }
  if (!c.cwd.empty()) call.exec.cwd = c.cwd;
  call.exec.stdin_data = c.stdin_bytes;
  // A client's timeout never goes past this worker's own sandbox.timeout:
  // the operator set it, the client only asks.
  const std::chrono::milliseconds cap = options_.settings.limits.value.timeout;
  call.exec.timeout = std::min(c.timeout, cap);
  if (c.timeout > cap) {
    notice += "ringfence: the call asked for a timeout of " + format_duration(c.timeout) +
              "; this worker's sandbox.timeout caps it at " + format_duration(cap) + "\n";
  }
  call.notice = std::move(notice);
  call.jit = c.jit;
  call.result_extra = {{"mode", to_string(with->placement.mode)},
                       {"backend", with->placement.backend->name()}};
  call.explain_failure = [this](const std::string& error) {
    return cancelling_ ? "cancelled: the worker stopped and the grace period passed (" + error + ")"
                       : error;
  };
  (void)calls::run_guarded(path, std::move(call), lease->sandbox);
  // After the result is written: a per_tool sandbox's teardown is not on the client's path.
  release();
}

calls::CallPath Worker::call_path() const {
  return calls::CallPath{store_.get(), id_,          flusher_.get(), identity_.get(),
                         jit_.get(),   proof_.get(), spool_.get()};
}

std::string Worker::metrics_json(const nlohmann::json& sandboxes) const {
  nlohmann::json gauges = nlohmann::json::object(), counts = nlohmann::json::object();
  for (const auto& [series, n] : counters::snapshot()) counts[series] = n;
  const auto with = serving();
  const std::string labels = "{mode=\"" + std::string(to_string(with->placement.mode)) +
                             "\",backend=\"" + with->placement.backend->name() + "\",version=\"" +
                             options_.version + "\"}";
  gauges["ringfence_worker_info" + labels] = 1;
  gauges["ringfence_worker_calls_in_flight"] = in_flight_.load();
  gauges["ringfence_worker_runs_live"] = with->router->live_runs().size();
  if (with->pool) {
    const PoolStats p = with->pool->stats();
    gauges["ringfence_worker_pool_ready"] = p.ready;
    gauges["ringfence_worker_pool_target"] = options_.settings.pool_target.value;
    counts["ringfence_worker_pool_hits_total"] = p.hits;
    counts["ringfence_worker_pool_misses_total"] = p.misses;
  }
  return nlohmann::json{{"counters", counts}, {"gauges", gauges}, {"sandboxes", sandboxes}}.dump();
}

namespace {
int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

bool Worker::drained() {
  if (admin_ != store::WorkerAdmin::draining) return false;
  {
    // No leader may be between a claim and its hand-over (its claim began
    // before the drain reached the store).
    std::lock_guard lock(mu_);
    if (in_flight_ > 0 || leader_ || !claimed_.empty()) return false;
  }
  if (workflows_ && workflows_->live() > 0) return false;
  // Door sandboxes (the API's) end with the worker: a drain does not wait
  // for clients that may keep them for hours.
  return true;
}

void Worker::give_up(const std::string& why) {
  spdlog::error("{}; this worker stops claiming calls and exits", why);
  {
    std::lock_guard lock(serving_mu_);
    if (!fatal_) fatal_ = why;
  }
  {
    std::lock_guard lock(mu_);
    claiming_ = false;
  }
  claimed_cv_.notify_all();
}

void Worker::lease_loop() {
  const auto period = std::clamp(options_.lease / 3, std::chrono::milliseconds(100),
                                 std::chrono::milliseconds(1000));
  SandboxUsage usage;
  while (!stopped_ && !fenced_) {
    nlohmann::json in_use = usage.last();
    if (usage.due()) {
      if (auto live = lease_store_->live_sandboxes()) in_use = usage.sample(*live, id_);
    }
    if (auto s = lease_store_->heartbeat(id_, options_.lease, metrics_json(in_use)); !s) {
      if (s.error().code == ErrorCode::kFenced) {
        fenced_ = true;
        give_up(s.error().to_string());
        break;
      }
      spdlog::warn("heartbeat: {}", s.error().to_string());
      store_failed_at_ = steady_ms();
    } else if (*s != admin_.exchange(*s)) {
      spdlog::info("{}", *s == store::WorkerAdmin::none ? "uncordoned: taking new work again"
                         : *s == store::WorkerAdmin::cordoned
                             ? "cordoned: taking no new work until uncordoned"
                             : "draining: taking no new work; exiting once what it holds ends");
      if (*s == store::WorkerAdmin::none) store_->wake_queue_waiters();
    }
    for (auto waited = std::chrono::milliseconds(0); waited < period && !stopped_;
         waited += std::chrono::milliseconds(20)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

void Worker::housekeeping_loop() {
  // Ended runs and idle sandboxes are noticed within a second. The heartbeat
  // is lease_loop()'s.
  const auto period = std::clamp(options_.lease / 3, std::chrono::milliseconds(100),
                                 std::chrono::milliseconds(1000));
  while (!stopped_) {
    // This worker's own calls and runs are never its sweep's: it is alive.
    // Nor, for a lease after this worker could not reach the store, anyone's:
    // a store outage stopped every worker's heartbeat, not the workers, and
    // their next heartbeats take their leases again (issue 40: calls that had
    // run were interrupted as "stopped heartbeating" once the store was back).
    const int64_t failed_at = store_failed_at_;
    if (failed_at == 0 || steady_ms() - failed_at > options_.lease.count()) {
      warn_unless_ok(store_->interrupt_orphaned_calls(store::now_ms(), id_),
                     "interrupting calls whose worker's lease ran out");
      warn_unless_ok(store::WorkflowStore(*store_).requeue_orphaned_runs(store::now_ms(), id_),
                     "requeueing workflow runs whose worker's lease ran out");
    }
    watch_health();
    // Ends a call's writer gave up filing while the store was unreachable.
    if (failed_at == 0 || steady_ms() - failed_at > options_.lease.count())
      (void)spool_->file_all(*store_, store_->registration(id_));
    // A call requiring labels no live worker has fails with what each lacks.
    warn_unless_ok(store_->fail_unmatched_calls(store::now_ms() - options_.unserved_after.count(),
                                                store::now_ms() - store::kLiveWorkerWindow.count()),
                   "failing calls no live worker may take");
    warn_unless_ok(store::WorkflowStore(*store_).fail_unmatched_runs(
                       store::now_ms() - options_.unserved_after.count(),
                       store::now_ms() - store::kLiveWorkerWindow.count()),
                   "failing workflow runs no live worker may take");
    if (mode() == SandboxMode::kPerWorker) {
      const std::string& project = options_.settings.project.value;
      warn_unless_ok(store_->fail_unserved_calls(
                         project, store::now_ms() - options_.unserved_after.count(),
                         "no worker took this call; worker " + id_ + " is per_worker for project " +
                             project + " and serves no other"),
                     "failing calls of other projects");
    }
    SandboxRouter& router = *serving()->router;
    router.reap_idle();
    // One query for all live runs: a per-run read, calls and all, cost an idle
    // worker with 2,000 live sandboxes 57 ms of CPU a second.
    if (auto ended = store_->ended_runs(router.live_runs())) {
      for (const auto& run : *ended) router.end_run(run);
    } else {
      spdlog::warn("{}", ended.error().to_string());
    }
    for (auto waited = std::chrono::milliseconds(0); waited < period && !stopped_;
         waited += std::chrono::milliseconds(50)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

void Worker::stop() {
  if (stopped_.exchange(true)) return;
  {
    std::lock_guard lock(mu_);
    claiming_ = false;
  }
  claimed_cv_.notify_all();
  if (store_) store_->wake_queue_waiters();  // the claimer may sleep on the doorbell
  // A fenced process's calls are no longer its own (the store refuses what
  // they write): no grace.
  const std::chrono::milliseconds grace = fenced_ ? std::chrono::milliseconds(0) : options_.grace;
  // Workflow steps get the same grace; what is left of their runs is requeued.
  if (workflows_) workflows_->stop(grace);
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (in_flight_ > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // Past the grace period: destroying the sandboxes ends the calls still running,
  // and calls claimed but not started are cancelled without a sandbox.
  cancelling_ = true;
  auto destroy_all = [&] {
    std::vector<std::shared_ptr<Serving>> all;
    {
      std::lock_guard lock(serving_mu_);
      if (serving_) all.push_back(serving_);
      for (auto& w : retired_) {
        if (auto r = w.lock()) all.push_back(std::move(r));
      }
    }
    for (auto& sv : all) sv->router->destroy_all();
  };
  destroy_all();
  // No front door reaches this worker's API sandboxes any more; they end.
  if (door_) door_->stop();
  if (door_sandboxes_) door_sandboxes_->destroy_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
  destroy_all();
  if (auto sv = serving()) sv->shutdown();
  flusher_.reset();
  if (ledger_) ledger_->flush();  // the last destroys
  // A fenced process leaves the row to the process that took its id over.
  if (store_ && !fenced_) warn_unless_ok(store_->stop_worker(id_), "marking this worker stopped");
}

}  // namespace rf::worker
