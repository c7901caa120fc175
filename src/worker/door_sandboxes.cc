#include "worker/door_sandboxes.h"

#include <set>

#include "calls/abandon_watch.h"
#include "core/log.h"
#include "policy/load.h"

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

DoorSandboxes::DoorSandboxes(Services services) : s_(std::move(services)) {}

DoorSandboxes::~DoorSandboxes() { destroy_all(); }

DoorOutcome<std::shared_ptr<DoorSandbox>> DoorSandboxes::create(const std::string& project,
                                                                const std::string& actor,
                                                                const nlohmann::json& j) {
  if (!j.is_object()) return bad("spec", "expected a JSON object (the sandbox spec)");
  for (const char* field : {"id", "workspace", "labels", "tls_intercept"}) {
    if (j.contains(field)) return bad(field, "is set by the server, not by API clients");
  }
  auto parsed = parse_spec_json(j.dump());
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
  std::lock_guard lock(mu_);
  sandboxes_[id] = entry;
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
                           const std::string& actor) {
  if (s_.ledger) {
    s_.ledger->destroyed(id, actor, project);
    s_.ledger->flush();  // gone from every serve's view when the door answers
  }
  if (s_.path.identity) s_.path.identity->sandbox_gone(id);
  if (s_.path.proof) s_.path.proof->sandbox_gone(id);
  // Its calls' run ends with it.
  warn_unless_ok(s_.store->end_run(id), "ending the run of sandbox " + id + " of " + project);
}

Result<bool> DoorSandboxes::destroy(const std::string& project, const std::string& id,
                                    const std::string& actor) {
  std::shared_ptr<DoorSandbox> entry;
  {
    std::lock_guard lock(mu_);
    auto it = sandboxes_.find(id);
    if (it == sandboxes_.end() || it->second->project != project) return false;
    entry = it->second;
    sandboxes_.erase(it);
  }
  // Its report's self-probe runs in it.
  if (s_.path.proof) s_.path.proof->wait_for_report(id);
  // Calls in flight end with the sandbox (their requests answer with how).
  Status gone = entry->sandbox->destroy();
  forget(id, project, actor);
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
    warn_unless_ok(sb->sandbox->destroy(), "destroy sandbox " + id);
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
    ~Done() { --s.running; }
  } done{sb};
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
    // The sandbox was deleted under the call, or its runner is gone.
    return DoorRefusal{find(sb.project, sb.id()) ? 500 : 409, "",
                       outcome.redacted(outcome.result.error().to_string())};
  }
  return std::move(*outcome.result);
}

}  // namespace rf::worker
