#include "worker/identity_calls.h"

#include <nlohmann/json.hpp>

#include "core/log.h"
#include "identity/audit_events.h"
#include "store/audit_log.h"

namespace rf::worker {
namespace {

std::string scope_text(const IdentityUse& use) {
  return use.project + "\n" + use.scope.workflow + "\n" + use.scope.user;
}

std::string describe_scope(const std::string& scope) {
  const size_t a = scope.find('\n'), b = scope.rfind('\n');
  std::string out = "project " + scope.substr(0, a);
  const std::string workflow = scope.substr(a + 1, b - a - 1), user = scope.substr(b + 1);
  if (!workflow.empty()) out += ", workflow " + workflow;
  if (!user.empty()) out += ", user " + user;
  return out;
}

identity::AuditContext context_of(const IdentityUse& use,
                                  std::optional<std::string> sandbox = std::nullopt) {
  std::optional<int64_t> call;
  if (use.call_id != 0) call = use.call_id;
  return {use.run, call, std::move(sandbox)};
}

}  // namespace

store::InjectionRow IdentityCalls::injection_row(const IdentityUse& use,
                                                 const std::string& sandbox_id,
                                                 const std::string& key, const std::string& secret,
                                                 int64_t version) const {
  store::InjectionRow r;
  if (use.call_id != 0) r.call_id = use.call_id;
  r.sandbox_id = sandbox_id;
  r.worker_id = options_.worker_id;
  r.project_id = use.project;
  r.run_id = use.run;
  r.key = key;
  r.secret = secret;
  r.version = version;
  return r;
}

IdentityUse IdentityUse::of(const store::ClaimedCall& call) {
  return {call.id, call.call.project, call.call.run, *call.call.identity};
}

IdentityCalls::IdentityCalls(store::Store& store, Options options,
                             std::function<void(const std::shared_ptr<Sandbox>&)> discard)
    : store_(store),
      rows_(store),
      options_(std::move(options)),
      discard_(std::move(discard)),
      secrets_(store, {options_.state_dir, options_.vault, "worker " + options_.worker_id}) {
  watcher_ = std::thread([this] { watch_loop(); });
}

IdentityCalls::~IdentityCalls() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  watcher_.join();
}

Error IdentityCalls::refuse(const IdentityUse& call, std::string why) {
  identity::audit_refusal(store_, "worker " + options_.worker_id,
                          {call.project, call.scope.workflow, call.scope.user}, why,
                          context_of(call));
  return make_error("", std::move(why));
}

Result<PreparedIdentity> IdentityCalls::prepare(const IdentityUse& call, SandboxMode mode,
                                                std::string* notice) {
  if (mode == SandboxMode::kNone) {
    auto project = store_.project(call.project);
    if (!project.ok()) return refuse(call, project.error().to_string());
    if (project->environment == store::Environment::production) {
      return refuse(call, "identity refused: project " + call.project +
                              " is production, and this worker runs calls without a sandbox "
                              "(mode none); production identity needs a sandbox");
    }
    if (!options_.allow_without_sandbox) {
      return refuse(call,
                    "identity refused: this worker runs calls without a sandbox (mode none); set "
                    "sandbox.allow_identity_without_sandbox: true in its config file to allow it "
                    "outside production");
    }
    *notice =
        "ringfence: WARNING: identity values given to a call with no sandbox (mode none, "
        "opted in by sandbox.allow_identity_without_sandbox); they are redacted from its "
        "output only\n";
    spdlog::warn("call {}: identity values given without a sandbox (mode none, opted in)",
                 call.call_id);
  }
  return resolve_for_worker(call);
}

Result<PreparedIdentity> IdentityCalls::resolve_for_worker(const IdentityUse& call) {
  const identity::CascadeRequest request{call.project, call.scope.workflow, call.scope.user};
  // Resolved again now, not at enqueue: a secret revoked since never gets here.
  auto resolved = identity::resolve_cascade(rows_, secrets_, request);
  if (!resolved.ok()) return refuse(call, resolved.error().to_string());
  identity::audit_resolution(store_, "worker " + options_.worker_id, resolved->plan,
                             context_of(call));
  std::vector<redact::SecretToRedact> values;
  for (const auto& e : resolved->plan.entries) {
    if (e.kind != store::ProfileEntry::Kind::secret || !e.at_start()) continue;
    values.push_back({e.key, std::string(resolved->env.at(e.key).reveal())});
  }
  auto patterns = redact::compile_patterns(values);
  PreparedIdentity out{std::move(*resolved), std::move(values), std::move(patterns),
                       scope_text(call)};
  return out;
}

Status IdentityCalls::inject(const IdentityUse& call, const PreparedIdentity& prepared,
                             const std::shared_ptr<Sandbox>& sandbox) {
  {
    // The first identity call in a sandbox claims it for its scope, under the lock.
    std::lock_guard lock(mu_);
    auto it = marked_.find(sandbox->id());
    if (it != marked_.end() && it->second.mark.scope != prepared.scope) {
      return make_error("", "identity refused: run " + call.run +
                                "'s sandbox received identity for " +
                                describe_scope(it->second.mark.scope) + "; a call for " +
                                describe_scope(prepared.scope) + " needs a run of its own");
    }
    if (it == marked_.end())
      marked_[sandbox->id()] = Marked{{prepared.scope, {}, nullptr}, sandbox};
  }
  std::vector<store::InjectionRow> rows;
  for (const auto& e : prepared.resolved.plan.entries) {
    if (e.kind != store::ProfileEntry::Kind::secret || !e.at_start()) continue;
    rows.push_back(injection_row(call, sandbox->id(), e.key, e.secret, e.version));
  }
  // Recorded before the values go in: revocation finds every sandbox that has them.
  RF_TRY(rows_.record_injections(rows));
  identity::audit_injection(store_, "worker " + options_.worker_id, prepared.resolved.plan,
                            context_of(call, sandbox->id()));
  std::lock_guard lock(mu_);
  auto& m = marked_[sandbox->id()];
  if (m.mark.patterns) {
    // The same scope again (a per_run sandbox): redact every value it ever got.
    m.mark.values.insert(m.mark.values.end(), prepared.values.begin(), prepared.values.end());
    m.mark.patterns = redact::compile_patterns(m.mark.values);
  } else {
    m.mark.values = prepared.values;
    m.mark.patterns = prepared.patterns;
  }
  return ok_status();
}

Result<identity::CascadePlan> IdentityCalls::plan_now(const IdentityUse& use) {
  return identity::plan_cascade(rows_, {use.project, use.scope.workflow, use.scope.user});
}

Result<identity::OpenedSecret> IdentityCalls::open_secret(const std::string& name) {
  auto opened = secrets_.open_current({name});
  if (!opened.ok()) return opened.take_error();
  return std::move(opened->at(name));
}

Result<std::shared_ptr<const redact::Patterns>> IdentityCalls::inject_late(
    const IdentityUse& use, const std::shared_ptr<Sandbox>& sandbox, const std::string& key,
    const std::string& secret, int64_t version, std::string_view value) {
  RF_TRY(rows_.record_injections({injection_row(use, sandbox->id(), key, secret, version)}));
  std::lock_guard lock(mu_);
  auto& m = marked_[sandbox->id()];
  if (m.sandbox.expired()) m.sandbox = sandbox;
  if (m.mark.scope.empty()) m.mark.scope = scope_text(use);
  m.mark.values.push_back({key, std::string(value)});
  m.mark.patterns = redact::compile_patterns(m.mark.values);
  return m.mark.patterns;
}

std::string IdentityCalls::scope_of(const Sandbox& sandbox) {
  std::lock_guard lock(mu_);
  auto it = marked_.find(sandbox.id());
  return it == marked_.end() ? std::string() : it->second.mark.scope;
}

std::shared_ptr<const redact::Patterns> IdentityCalls::patterns_for(const Sandbox& sandbox) {
  std::lock_guard lock(mu_);
  auto it = marked_.find(sandbox.id());
  return it == marked_.end() ? nullptr : it->second.mark.patterns;
}

std::optional<std::string> IdentityCalls::call_ended(int64_t call_id) {
  std::lock_guard lock(mu_);
  auto it = revoked_calls_.find(call_id);
  if (it == revoked_calls_.end()) return std::nullopt;
  std::string why = std::move(it->second);
  revoked_calls_.erase(it);
  return why;
}

void IdentityCalls::sandbox_gone(const std::string& sandbox_id) {
  {
    std::lock_guard lock(mu_);
    if (marked_.erase(sandbox_id) == 0) return;
  }
  warn_unless_ok(rows_.end_injections_of_sandbox(sandbox_id),
                 "ending the injections of sandbox " + sandbox_id);
}

void IdentityCalls::end_revoked() {
  {
    std::lock_guard lock(mu_);
    if (marked_.empty()) return;  // nothing received identity: no query
  }
  auto revoked = rows_.revoked_live_injections(options_.worker_id);
  if (!warn_unless_ok(revoked, "looking for hard-revoked secrets")) return;
  struct ToEnd {
    std::string sandbox_id, secret;
    std::shared_ptr<Sandbox> sandbox;
  };
  std::vector<ToEnd> to_end;
  {
    std::lock_guard lock(mu_);
    for (const auto& r : *revoked) {
      const std::string why = "secret " + r.secret +
                              " was hard-revoked while the call ran; its sandbox " + r.sandbox_id +
                              " was ended";
      if (r.call_id) revoked_calls_.emplace(*r.call_id, why);
      auto it = marked_.find(r.sandbox_id);
      std::shared_ptr<Sandbox> sb = it == marked_.end() ? nullptr : it->second.sandbox.lock();
      to_end.push_back({r.sandbox_id, r.secret, std::move(sb)});
    }
  }
  for (auto& [id, secret, sb] : to_end) {
    spdlog::warn("ending sandbox {}: it received secret {}, which was hard-revoked", id, secret);
    if (sb) discard_(sb);
    sandbox_gone(id);
    store::AuditEvent e;
    e.kind = "sandbox.revoked";
    e.actor = "worker " + options_.worker_id;
    e.sandbox_id = id;
    e.detail_json = nlohmann::json{{"secret", secret}}.dump();
    warn_unless_ok(store::AuditLog(store_).append(e), "audit sandbox.revoked");
  }
}

void IdentityCalls::watch_loop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, options_.watch_period, [&] { return stopping_; });
    if (stopping_) return;
    lock.unlock();
    end_revoked();
    // Sandboxes whose owner let go of them without telling (a run's end).
    std::vector<std::string> gone;
    {
      std::lock_guard l(mu_);
      for (const auto& [id, m] : marked_) {
        if (m.sandbox.expired()) gone.push_back(id);
      }
    }
    for (const auto& id : gone) sandbox_gone(id);
    lock.lock();
  }
}

}  // namespace rf::worker
