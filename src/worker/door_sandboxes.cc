#include "worker/door_sandboxes.h"

#include <set>

#include "calls/abandon_watch.h"
#include "core/log.h"
#include "policy/load.h"
#include "sandbox/lifetime_request.h"
#include "store/audit_log.h"
#include "store/sandbox_lifetimes.h"
#include "store/volumes.h"

namespace rf::worker {
namespace {

DoorRefusal bad(std::string field, std::string message) {
  return DoorRefusal{400, std::move(field), std::move(message)};
}

// A refusal of the operator policy is a 403; anything else wrong, a 400.
DoorRefusal refused(const Error& e) {
  return DoorRefusal{e.code == ErrorCode::kDenied ? 403 : 400, e.where, e.message};
}

}  // namespace

DoorSandboxes::DoorSandboxes(Services services) : s_(std::move(services)) {
  if (!s_.state_dir.empty()) disks_ = std::make_unique<host::VolumeDisks>(s_.state_dir);
  expirer_ = std::thread([this] { expire_loop(); });
}

DoorSandboxes::~DoorSandboxes() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  expiry_changed_.notify_all();
  expirer_.join();
  destroy_all();
}

int64_t DoorSandboxes::next_expiry() const {
  int64_t next = 0;
  for (const auto& [_, sb] : sandboxes_) {
    int64_t due = sb->expires_at.load();
    if (sb->idle_timeout_ms > 0 && sb->running.load() == 0 && sb->attached.load() == 0) {
      const int64_t idle = sb->last_active.load() + sb->idle_timeout_ms;
      due = due == 0 ? idle : std::min(due, idle);
    }
    if (due != 0 && (next == 0 || due < next)) next = due;
  }
  return next;
}

void DoorSandboxes::expire_loop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    const int64_t next = next_expiry();
    if (next == 0) {
      expiry_changed_.wait(lock);
      continue;
    }
    const int64_t now = store::now_ms();
    if (next > now) {
      // Woken early by a new sandbox, a new timeout, or a call's end (an idle
      // expiry is due again).
      expiry_changed_.wait_for(lock, std::chrono::milliseconds(next - now));
      continue;
    }
    struct Due {
      std::string project, id;
      const char* reason;
    };
    std::vector<Due> due;
    for (const auto& [id, sb] : sandboxes_) {
      const int64_t at = sb->expires_at.load();
      const bool idle = sb->idle_timeout_ms > 0 && sb->running.load() == 0 &&
                        sb->attached.load() == 0 &&
                        sb->last_active.load() + sb->idle_timeout_ms <= now;
      const char* reason = at != 0 && at <= now ? "timeout" : idle ? "idle" : nullptr;
      if (reason == nullptr) continue;
      sb->ended = reason;
      due.push_back({sb->project, id, reason});
    }
    lock.unlock();
    for (const Due& d : due) {
      spdlog::info("sandbox {} of project {}: its {} ran out; ending it", d.id, d.project,
                   std::string_view(d.reason) == "idle" ? "idle timeout" : "timeout");
      warn_unless_ok(store::SandboxLifetimes(*s_.store).ended(d.id, d.reason),
                     "recording why sandbox " + d.id + " ended");
      auto gone = destroy(d.project, d.id, "expiry", d.reason);
      if (!gone) spdlog::warn("ending expired sandbox {}: {}", d.id, gone.error().to_string());
    }
    lock.lock();
  }
}

namespace {
void audit_pause(store::Store& store, const DoorSandbox& sb, const char* kind,
                 const std::string& actor, const std::string& why) {
  store::AuditEvent ev;
  ev.kind = kind;
  ev.actor = actor;
  ev.project_id = sb.project;
  ev.sandbox_id = sb.id();
  ev.detail_json = nlohmann::json{{"why", why}}.dump();
  warn_unless_ok(store::AuditLog(store).append(ev), std::string("auditing ") + kind);
}
}  // namespace

DoorOutcome<bool> DoorSandboxes::pause(DoorSandbox& sb, const std::string& actor) {
  if (sb.sandbox->paused()) return true;
  if (auto s = sb.sandbox->pause(); !s) return DoorRefusal{409, "", s.error().to_string()};
  audit_pause(*s_.store, sb, "sandbox.pause", actor, "asked");
  return true;
}

DoorOutcome<bool> DoorSandboxes::resume(DoorSandbox& sb, const std::string& actor,
                                        const std::string& why) {
  if (!sb.sandbox->paused()) return true;
  if (auto s = sb.sandbox->resume(); !s) return DoorRefusal{503, "", s.error().to_string()};
  audit_pause(*s_.store, sb, "sandbox.resume", actor, why);
  return true;
}

DoorOutcome<int64_t> DoorSandboxes::set_timeout(DoorSandbox& sb,
                                                std::chrono::milliseconds timeout) {
  auto policy = policy_of(sb.project);
  if (!policy) return DoorRefusal{503, "", policy.error().to_string()};
  if (auto s = policy->bound_sandbox_timeout(timeout, true, "timeout"); !s)
    return refused(s.error());
  const int64_t at = store::now_ms() + timeout.count();
  if (auto s = store::SandboxLifetimes(*s_.store).set_expiry(sb.id(), at); !s)
    return DoorRefusal{503, "", s.error().to_string()};
  {
    std::lock_guard lock(mu_);
    sb.expires_at = at;
  }
  expiry_changed_.notify_all();
  return at;
}

DoorOutcome<std::shared_ptr<DoorSandbox>> DoorSandboxes::create(const std::string& project,
                                                                const std::string& actor,
                                                                const nlohmann::json& j) {
  if (!j.is_object()) return bad("spec", "expected a JSON object (the sandbox spec)");
  for (const char* field : {"id", "workspace", "labels", "tls_intercept"}) {
    if (j.contains(field)) return bad(field, "is set by the server, not by API clients");
  }
  nlohmann::json spec_only = j;
  auto lifetime = take_lifetime(spec_only);
  if (!lifetime) return bad(lifetime.error().where, lifetime.error().message);
  auto asked_volumes = take_volumes(spec_only);
  if (!asked_volumes) return bad(asked_volumes.error().where, asked_volumes.error().message);
  auto parsed = parse_spec_json(spec_only.dump());
  if (!parsed) return bad(parsed.error().where, parsed.error().message);
  SandboxSpec spec = std::move(*parsed);
  const auto serving = s_.serving();
  if (serving->placement.mode == SandboxMode::kNone) {
    return DoorRefusal{503, "",
                       "worker " + s_.worker_id +
                           " runs calls without sandboxes (mode none): it makes no "
                           "sandbox for the API"};
  }
  const BackendKind mine = serving->placement.backend->kind();
  if (j.contains("backend") && spec.backend != mine) {
    return bad("backend", "worker " + s_.worker_id + " runs " + std::string(to_string(mine)) +
                              " sandboxes, not " + std::string(to_string(spec.backend)));
  }
  spec.backend = mine;
  if (!j.contains("image")) spec.image = serving->spec.image;
  // The project's operator policy, as it stands now (its door checked it too).
  auto policy = policy_of(project);
  if (!policy) return DoorRefusal{503, "", policy.error().to_string()};
  std::set<std::string> given;
  if (j.contains("limits") && j["limits"].is_object()) {
    for (auto it = j["limits"].begin(); it != j["limits"].end(); ++it) given.insert(it.key());
  }
  if (auto s = policy->check_spec(spec, given); !s) return refused(s.error());
  std::chrono::milliseconds timeout = lifetime->timeout.value_or(std::chrono::milliseconds(0));
  if (auto s = policy->bound_sandbox_timeout(timeout, lifetime->timeout.has_value(), "timeout"); !s)
    return refused(s.error());
  if (lifetime->idle_timeout > policy->sandbox_timeout_max()) {
    return refused(make_error("idle_timeout", "above the most a sandbox may live"));
  }
  store::SandboxLifetimes lifetimes(*s_.store);
  if (!lifetime->name.empty()) {
    // Checked again when it is recorded, under the project's lock.
    auto live = lifetimes.of_live(project);
    if (!live) return DoorRefusal{503, "", live.error().to_string()};
    for (const auto& [other, l] : *live) {
      if (l.name == lifetime->name) {
        return DoorRefusal{
            409, "name",
            "project " + project + " has a live sandbox named " + l.name + " (" + other + ")"};
      }
    }
  }
  if (!asked_volumes->empty()) {
    auto mounts = resolve_volumes(project, *asked_volumes);
    if (auto* r = std::get_if<DoorRefusal>(&mounts)) return *r;
    spec.volumes = std::get<std::vector<VolumeMount>>(std::move(mounts));
  }
  if (auto v = validate_spec(spec); !v) return bad(v.error().where, v.error().message);
  {
    std::lock_guard lock(mu_);
    size_t mine = 0;
    for (const auto& [_, sb] : sandboxes_) mine += sb->project == project;
    if (mine >= s_.max_per_project) {
      return DoorRefusal{429, "",
                         "project " + project + " has " + std::to_string(mine) +
                             " sandboxes on worker " + s_.worker_id +
                             ", the most a worker holds for one project; delete one"};
    }
  }
  if (!s_.store->project(project)) {
    (void)s_.store->ensure_project(project, store::Environment::development);
  }
  spec.labels["project"] = project;
  spec.labels["mode"] = "api";
  // Its boundary report starts with it: ready before its first call ends.
  spec.probe_at_start = true;
  const auto start = std::chrono::steady_clock::now();
  auto made = serving->placement.backend->create(spec);
  if (!made) return DoorRefusal{500, "", made.error().to_string()};
  auto entry = std::make_shared<DoorSandbox>();
  entry->project = project;
  entry->created = std::chrono::system_clock::now();
  entry->setup = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now() - start);
  entry->sandbox = std::shared_ptr<Sandbox>(std::move(*made));
  const std::string id = entry->id();
  if (s_.ledger) {
    s_.ledger->bound(id, serving->placement.backend->name(), project, id, "api",
                     entry->sandbox->init_pid(), spec_to_json(entry->sandbox->spec()), actor);
    // In the store before its door answers: any serve of the fleet finds it
    // from its first request on.
    s_.ledger->flush();
  }
  const int64_t made_at = store::now_ms();
  entry->volumes = entry->sandbox->spec().volumes;
  entry->name = lifetime->name;
  entry->metadata = lifetime->metadata;
  entry->cwd = lifetime->cwd;
  entry->expires_at = made_at + timeout.count();
  entry->idle_timeout_ms = lifetime->idle_timeout.count();
  entry->last_active = made_at;
  {
    std::weak_ptr<Sandbox> weak = entry->sandbox;
    entry->processes = std::make_unique<ProcessTable>(
        *entry->sandbox,
        [this, project, weak](ExecCall call, OutputSink& sink) -> Result<ExecResult> {
          auto sandbox = weak.lock();
          if (!sandbox) return make_error("process", "its sandbox is gone");
          return run_process(project, sandbox, std::move(call), sink);
        });
  }
  store::SandboxLifetime row{id,
                             project,
                             entry->name,
                             entry->metadata,
                             entry->expires_at.load(),
                             entry->idle_timeout_ms,
                             std::nullopt};
  if (auto recorded = lifetimes.record(row); !recorded) {
    // Another create took the name first (or the store is away): this one goes.
    warn_unless_ok(entry->sandbox->destroy(), "destroy sandbox " + id);
    forget(id, project, actor, "not recorded");
    const Error& e = recorded.error();
    return DoorRefusal{e.code == ErrorCode::kConflict ? 409 : 503,
                       e.code == ErrorCode::kConflict ? "name" : "", e.message};
  }
  {
    std::lock_guard lock(mu_);
    sandboxes_[id] = entry;
  }
  expiry_changed_.notify_all();
  return entry;
}

std::shared_ptr<DoorSandbox> DoorSandboxes::find(const std::string& project,
                                                 const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end() || it->second->project != project) return nullptr;
  return it->second;
}

void DoorSandboxes::forget(const std::string& id, const std::string& project,
                           const std::string& actor, const std::string& reason) {
  if (s_.ledger) {
    s_.ledger->destroyed(id, actor, project, reason);
    s_.ledger->flush();  // gone from every serve's view when the door answers
  }
  if (s_.path.identity) s_.path.identity->sandbox_gone(id);
  if (s_.path.proof) s_.path.proof->sandbox_gone(id);
  // Its calls' run ends with it (a sandbox that ran no call has none).
  auto ended = s_.store->end_run(id);
  if (!ended && ended.error().code != ErrorCode::kNotFound) {
    warn_unless_ok(ended, "ending the run of sandbox " + id + " of " + project);
  }
}

Result<bool> DoorSandboxes::destroy(const std::string& project, const std::string& id,
                                    const std::string& actor, const std::string& reason) {
  std::shared_ptr<DoorSandbox> entry;
  {
    std::lock_guard lock(mu_);
    auto it = sandboxes_.find(id);
    if (it == sandboxes_.end() || it->second->project != project) return false;
    entry = it->second;
    sandboxes_.erase(it);
  }
  if (reason.empty()) {
    warn_unless_ok(store::SandboxLifetimes(*s_.store).ended(id, "deleted"),
                   "recording why sandbox " + id + " ended");
  }
  // Its report's self-probe runs in it.
  if (s_.path.proof) s_.path.proof->wait_for_report(id);
  // Its processes end with it, and say why to every client following one.
  entry->processes->close(reason == "timeout" ? "its sandbox expired (its timeout ran out)"
                          : reason == "idle"  ? "its sandbox expired (its idle timeout ran out)"
                          : reason.empty()    ? "its sandbox was deleted"
                                              : "its sandbox ended (" + reason + ")");
  // Calls in flight end with the sandbox (their requests answer with how).
  Status gone = entry->sandbox->destroy();
  entry->processes->join();
  forget(id, project, actor, reason);
  RF_TRY(gone);
  return true;
}

void DoorSandboxes::destroy_all() {
  std::map<std::string, std::shared_ptr<DoorSandbox>> all;
  {
    std::lock_guard lock(mu_);
    all.swap(sandboxes_);
  }
  for (auto& [id, sb] : all) {
    sb->processes->close("its worker stopped");
    warn_unless_ok(sb->sandbox->destroy(), "destroy sandbox " + id);
    sb->processes->join();
    forget(id, sb->project, "worker " + s_.worker_id + " (stopping)");
  }
}

Result<policy::OperatorPolicy> DoorSandboxes::policy_of(const std::string& project) {
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(mu_);
    auto it = policies_.find(project);
    if (it != policies_.end() && now - it->second.fetched < std::chrono::seconds(1)) {
      return *it->second.policy;
    }
  }
  auto loaded = policy::load_policy(*s_.store, project);
  if (!loaded) return loaded;
  std::lock_guard lock(mu_);
  if (policies_.size() > 4096) policies_.clear();
  policies_[project] = CachedPolicy{std::make_shared<const policy::OperatorPolicy>(*loaded), now};
  return loaded;
}

size_t DoorSandboxes::live() const {
  std::lock_guard lock(mu_);
  return sandboxes_.size();
}

DoorOutcome<ExecResult> DoorSandboxes::exec(
    DoorSandbox& sb, ExecCall exec, bool timeout_given, OutputSink& sink,
    const std::function<bool()>& client_gone,
    const std::function<void(const Result<ExecResult>&)>& on_result) {
  auto policy = policy_of(sb.project);
  if (!policy) return DoorRefusal{503, "", policy.error().to_string()};
  if (exec.timeout.count() > 0) {
    if (auto s = policy->bound_timeout(exec.timeout, timeout_given, "timeout"); !s)
      return refused(s.error());
  }
  store::NewCall record;
  record.project = sb.project;
  record.run = sb.id();
  record.argv = exec.argv;
  record.env = exec.env;
  record.cwd = exec.cwd;
  record.stdin_bytes = exec.stdin_data;
  record.timeout = exec.timeout.count() > 0 ? exec.timeout : sb.sandbox->spec().limits.timeout;
  ++sb.running;
  struct Done {
    DoorSandbox& s;
    std::condition_variable& expiry_changed;
    ~Done() {
      s.last_active = store::now_ms();  // idle from now
      --s.running;
      // Idle again: its idle expiry is due again (it was not while the call ran).
      if (s.idle_timeout_ms > 0) expiry_changed.notify_all();
    }
  } done{sb, expiry_changed_};
  calls::AbandonWatch watch(watcher_, *sb.sandbox, sink, client_gone);
  calls::GuardedCall call;
  // Recorded while the command starts: the store's write is off the call's path.
  call.record = [this, record] { return s_.store->start_call(record, s_.worker_id, s_.lease); };
  call.use = calls::IdentityUse{0, sb.project, sb.id(), {}};
  call.exec = std::move(exec);
  call.result_extra = {{"mode", "api"},
                       {"backend", std::string(to_string(sb.sandbox->spec().backend))}};
  call.tee = &watch;
  call.on_result = on_result;
  call.stopped = [&watch]() -> std::optional<std::string> {
    if (watch.abandoned()) return "the client went away: the call was killed";
    return std::nullopt;
  };
  auto outcome = calls::run_guarded(s_.path, std::move(call), sb.sandbox);
  if (watch.abandoned()) {
    spdlog::info("sandbox {}: a call of project {} was killed: its client went away", sb.id(),
                 sb.project);
  }
  if (!outcome.result) {
    if (const char* why = sb.ended.load()) {
      return DoorRefusal{409, "",
                         "sandbox " + sb.id() + " expired (its " +
                             (std::string_view(why) == "idle" ? "idle timeout" : "timeout") +
                             " ran out): the call was ended with it"};
    }
    // The sandbox was deleted under the call, or its runner is gone.
    return DoorRefusal{find(sb.project, sb.id()) ? 500 : 409, "",
                       outcome.redacted(outcome.result.error().to_string())};
  }
  return std::move(*outcome.result);
}

}  // namespace rf::worker

namespace rf::worker {

Result<ExecResult> DoorSandboxes::run_process(const std::string& project,
                                              const std::shared_ptr<Sandbox>& sandbox,
                                              ExecCall exec, OutputSink& sink) {
  store::NewCall record;
  record.project = project;
  record.run = sandbox->id();
  record.argv = exec.argv;
  record.env = exec.env;
  record.cwd = exec.cwd;
  // It lives with its sandbox: at most as long as a sandbox may.
  auto policy = policy_of(project);
  record.timeout = policy ? policy->sandbox_timeout_max() : std::chrono::hours(24);
  calls::GuardedCall call;
  call.record = [this, record] { return s_.store->start_call(record, s_.worker_id, s_.lease); };
  call.use = calls::IdentityUse{0, project, sandbox->id(), {}};
  call.exec = std::move(exec);
  call.result_extra = {{"mode", "api"},
                       {"background", true},
                       {"backend", std::string(to_string(sandbox->spec().backend))}};
  call.tee = &sink;
  // Its record keeps what a call's would; its buffer the newest.
  call.stored_output_max = sandbox->spec().limits.output_bytes;
  return calls::run_guarded(s_.path, std::move(call), sandbox).result;
}

DoorOutcome<ProcessInfo> DoorSandboxes::start_process(DoorSandbox& sb, ProcessStart start) {
  auto policy = policy_of(sb.project);
  if (!policy) return DoorRefusal{503, "", policy.error().to_string()};
  if (!start.cwd_given && !sb.cwd.empty()) start.call.cwd = sb.cwd;
  ProcessTable::Bounds bounds;
  bounds.buffer_bytes = policy->process_buffer();
  bounds.max_running = policy->processes_max();
  sb.last_active = store::now_ms();
  auto started = sb.processes->start(std::move(start.call), std::move(start.tag), bounds);
  if (!started) {
    const Error& e = started.error();
    if (e.code == ErrorCode::kLimit) return DoorRefusal{429, "process", e.message};
    if (e.code == ErrorCode::kConflict) return DoorRefusal{409, "", e.message};
    return DoorRefusal{400, e.where, e.message};
  }
  spdlog::info("sandbox {} of project {}: background process {} started", sb.id(), sb.project,
               started->pid);
  return std::move(*started);
}

void DoorSandboxes::attach(DoorSandbox& sb, bool on) {
  if (on) {
    ++sb.attached;
    return;
  }
  sb.last_active = store::now_ms();
  --sb.attached;
  if (sb.idle_timeout_ms > 0) expiry_changed_.notify_all();
}

}  // namespace rf::worker

namespace rf::worker {

DoorOutcome<std::vector<VolumeMount>> DoorSandboxes::resolve_volumes(
    const std::string& project, const std::vector<VolumeAsk>& asked) {
  if (!disks_) return DoorRefusal{503, "volumes", "worker " + s_.worker_id + " keeps no volumes"};
  if (auto ok = host::VolumeDisks::available(); !ok) {
    return DoorRefusal{503, "volumes", "worker " + s_.worker_id + ": " + ok.error().to_string()};
  }
  store::Volumes volumes(*s_.store);
  std::vector<VolumeMount> out;
  for (size_t i = 0; i < asked.size(); ++i) {
    const std::string at = "volumes[" + std::to_string(i) + "]";
    auto found = volumes.find(project, asked[i].name);
    if (!found) return DoorRefusal{503, "", found.error().to_string()};
    if (!*found) {
      return bad(at + ".name", "project " + project + " has no volume " + asked[i].name +
                                   " (POST /v1/volumes makes one)");
    }
    const store::Volume& v = **found;
    if (!v.host_id.empty() && v.host_id != s_.host_id) {
      return DoorRefusal{409, at + ".name",
                         "volume " + v.name + " lives on host " + v.host_id + ", and worker " +
                             s_.worker_id + " runs on host " + s_.host_id};
    }
    auto dir = disks_->mounted(project, v.name, v.size_bytes);
    if (!dir) return DoorRefusal{500, at + ".name", dir.error().to_string()};
    if (v.host_id.empty()) {
      warn_unless_ok(volumes.set_host(project, v.name, s_.host_id),
                     "recording where volume " + v.name + " lives");
    }
    out.push_back(VolumeMount{v.name, *dir, asked[i].path, asked[i].readonly});
  }
  return out;
}

DoorOutcome<bool> DoorSandboxes::remove_volume(const std::string& project,
                                               const std::string& name) {
  if (!disks_) return DoorRefusal{503, "", "worker " + s_.worker_id + " keeps no volumes"};
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, sb] : sandboxes_) {
      if (sb->project != project) continue;
      for (const VolumeMount& v : sb->volumes) {
        if (v.name == name) {
          return DoorRefusal{409, "name",
                             "volume " + name + " is mounted by sandbox " + id + " (at " + v.path +
                                 "): delete the sandbox first"};
        }
      }
    }
  }
  if (auto gone = disks_->remove(project, name); !gone) {
    return DoorRefusal{500, "", gone.error().to_string()};
  }
  return true;
}

}  // namespace rf::worker
