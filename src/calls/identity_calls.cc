#include "calls/identity_calls.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "core/log.h"
#include "identity/audit_events.h"
#include "store/audit_log.h"

namespace rf::calls {
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
  // A call without identity has no scope: an empty one, never a dereferenced nothing.
  return {call.id, call.call.project, call.call.run,
          call.call.identity.value_or(store::IdentityScope{})};
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

Result<PreparedIdentity> IdentityCalls::prepare(const IdentityUse& call, bool in_sandbox,
                                                std::string* notice) {
  if (!in_sandbox) {
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

bool PreparedIdentity::needs_intercept() const {
  return std::any_of(edge.begin(), edge.end(), [](const net::EdgeCredential& c) {
    return c.delivery() == net::EdgeDelivery::kProxy;
  });
}

Result<PreparedIdentity> IdentityCalls::resolve_for_worker(const IdentityUse& call) {
  const identity::CascadeRequest request{call.project, call.scope.workflow, call.scope.user};
  // Resolved again now, not at enqueue: a secret revoked since never gets here.
  auto resolved = identity::resolve_cascade(rows_, secrets_, request);
  if (!resolved.ok()) return refuse(call, resolved.error().to_string());
  identity::audit_resolution(store_, "worker " + options_.worker_id, resolved->plan,
                             context_of(call));
  std::vector<redact::SecretToRedact> values;
  std::vector<net::EdgeCredential> edge;
  int git_index = 0;
  std::map<std::string, identity::SecretValue> edge_env;
  for (const auto& e : resolved->plan.entries) {
    if (e.kind != store::ProfileEntry::Kind::secret) continue;
    if (e.at_start()) values.push_back({e.key, std::string(resolved->env.at(e.key).reveal())});
    if (!e.at_edge()) continue;
    // The sandbox gets a placeholder; the value stays on the host, and is
    // still redacted from every output (a seatbelt: the sandbox never holds it).
    const std::string_view value = resolved->edge.at(e.key).reveal();
    values.push_back({e.key, std::string(value)});
    const auto delivery =
        e.delivery == "gateway" ? net::EdgeDelivery::kGateway : net::EdgeDelivery::kProxy;
    auto settings = net::edge_settings_from_json(delivery, e.delivery_json);
    if (!settings) {
      return refuse(
          call, "key " + e.key + " (profile " + e.profile + "): " + settings.error().to_string());
    }
    auto placeholder = net::make_placeholder(value.size());
    if (!placeholder) {
      return refuse(
          call, "key " + e.key + " names secret " + e.secret + ": " + placeholder.error().message);
    }
    net::EdgeCredential c;
    c.key = e.key;
    c.secret = e.secret;
    c.settings = std::move(*settings);
    c.placeholder = std::move(*placeholder);
    c.value = std::string(value);
    for (auto& [k, v] : net::edge_environment(c, &git_index))
      edge_env[k] = identity::SecretValue(v);
    edge.push_back(std::move(c));
  }
  if (git_index > 0)
    edge_env["GIT_CONFIG_COUNT"] = identity::SecretValue(std::to_string(git_index));
  for (auto& [k, v] : edge_env) resolved->env[k] = std::move(v);
  auto patterns = redact::compile_patterns(values);
  PreparedIdentity out{std::move(*resolved), std::move(values), std::move(patterns),
                       scope_text(call), std::move(edge)};
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
      marked_[sandbox->id()] =
          Marked{{prepared.scope, {}, nullptr}, sandbox, {}, call.project, call.run};
  }
  if (!prepared.edge.empty()) RF_TRY(bind_edge(call, prepared, sandbox));
  std::vector<store::InjectionRow> rows;
  for (const auto& e : prepared.resolved.plan.entries) {
    if (e.kind != store::ProfileEntry::Kind::secret || !e.at_start()) continue;
    rows.push_back(injection_row(call, sandbox->id(), e.key, e.secret, e.version));
  }
  // Recorded before the values go in (revocation finds every sandbox that has
  // them), with their audit event in the same transaction: none is written,
  // none goes in.
  const store::AuditEvent injected = identity::injection_event(
      "worker " + options_.worker_id, prepared.resolved.plan, context_of(call, sandbox->id()));
  RF_TRY(rows_.record_injections(rows, [&](int64_t) { return std::vector{injected}; }));
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

Status IdentityCalls::bind_edge(const IdentityUse& call, const PreparedIdentity& prepared,
                                const std::shared_ptr<Sandbox>& sandbox) {
  const SandboxSpec& spec = sandbox->spec();
  const std::string first = prepared.edge.front().key;
  if (spec.network != NetworkPolicy::kProxy) {
    return make_error("", "identity refused: key " + first + " is delivered by " +
                              std::string(net::to_string(prepared.edge.front().delivery())) +
                              ", through the egress proxy; this worker's sandboxes have network " +
                              std::string(to_string(spec.network)) +
                              " (set sandbox.network: proxy with allow rules for its upstream)");
  }
  if (prepared.needs_intercept() && !spec.tls_intercept) {
    return make_error("", "identity refused: run " + call.run + "'s sandbox " + sandbox->id() +
                              " was started without a CA of its own, which proxy-delivered "
                              "keys need; give such a run its own sandbox (its first call "
                              "with identity), or use sandbox mode per_tool");
  }
  std::vector<net::EdgeCredential> all;
  {
    std::lock_guard lock(mu_);
    auto& m = marked_[sandbox->id()];
    // Added to what earlier calls bound: their placeholders stay good while
    // they run. A gateway is one per key: the newest.
    for (const auto& c : prepared.edge) {
      if (c.delivery() == net::EdgeDelivery::kGateway) {
        std::erase_if(m.edge, [&](const net::EdgeCredential& o) {
          return o.key == c.key && o.delivery() == net::EdgeDelivery::kGateway;
        });
      }
      m.edge.push_back(c);
    }
    all = m.edge;
  }
  return sandbox->bind_edge_credentials(std::move(all), edge_listener());
}

std::function<void(const net::EdgeEvent&)> IdentityCalls::edge_listener() {
  return [this](const net::EdgeEvent& e) {
    std::lock_guard lock(mu_);
    edge_events_.push_back(e);
    cv_.notify_all();
  };
}

void IdentityCalls::withdraw_revoked_edge() {
  std::set<std::string> names;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, m] : marked_) {
      for (const auto& c : m.edge) names.insert(c.secret);
    }
  }
  if (names.empty()) return;
  auto rows = rows_.current_versions({names.begin(), names.end()});
  if (!warn_unless_ok(rows, "looking at the secrets bound at the egress edge")) return;
  std::set<std::string> gone;
  for (const auto& name : names) {
    auto it = rows->find(name);
    if (it == rows->end() || it->second.first.state != store::SecretState::active)
      gone.insert(name);
  }
  if (gone.empty()) return;
  struct Rebind {
    std::shared_ptr<Sandbox> sandbox;
    std::vector<net::EdgeCredential> left;
    std::vector<std::pair<std::string, std::string>> taken;  // key, secret
    std::string project, run;
  };
  std::vector<Rebind> todo;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, m] : marked_) {
      Rebind r;
      for (const auto& c : m.edge) {
        if (gone.count(c.secret)) r.taken.emplace_back(c.key, c.secret);
      }
      if (r.taken.empty()) continue;
      std::erase_if(m.edge,
                    [&](const net::EdgeCredential& c) { return gone.count(c.secret) != 0; });
      r.sandbox = m.sandbox.lock();
      r.left = m.edge;
      r.project = m.project;
      r.run = m.run;
      if (r.sandbox) todo.push_back(std::move(r));
    }
  }
  for (auto& r : todo) {
    const std::string id = r.sandbox->id();
    warn_unless_ok(r.sandbox->bind_edge_credentials(std::move(r.left), edge_listener()),
                   "taking revoked credentials away from sandbox " + id);
    for (const auto& [key, secret] : r.taken) {
      store::AuditEvent e;
      e.kind = "edge.withdrawn";
      e.actor = "worker " + options_.worker_id;
      e.project_id = r.project;
      if (!r.run.empty()) e.run_id = r.run;
      e.sandbox_id = id;
      e.detail_json = nlohmann::json{{"key", key}, {"secret", secret}, {"why", "revoked"}}.dump();
      warn_unless_ok(store::AuditLog(store_).append(e), "audit edge.withdrawn");
    }
  }
}

void IdentityCalls::audit_edge_events() {
  std::vector<net::EdgeEvent> events;
  std::map<std::string, std::pair<std::string, std::string>> where;  // sandbox -> project, run
  {
    std::lock_guard lock(mu_);
    events.swap(edge_events_);
    for (const auto& e : events) {
      if (auto it = marked_.find(e.sandbox_id); it != marked_.end()) {
        where[e.sandbox_id] = {it->second.project, it->second.run};
      }
    }
  }
  for (const auto& ev : events) {
    store::AuditEvent e;
    e.kind = ev.refused ? "edge.refused" : "edge.used";
    e.actor = "worker " + options_.worker_id;
    if (auto it = where.find(ev.sandbox_id); it != where.end()) {
      e.project_id = it->second.first;
      if (!it->second.second.empty()) e.run_id = it->second.second;
    }
    e.sandbox_id = ev.sandbox_id;
    nlohmann::json d = {{"key", ev.key},
                        {"secret", ev.secret},
                        {"delivery", net::to_string(ev.delivery)},
                        {"host", ev.host},
                        {"port", ev.port},
                        {"status", ev.status},
                        {"substitutions", ev.substitutions},
                        {"restored", ev.restored}};
    if (!ev.reason.empty()) d["reason"] = ev.reason;
    e.detail_json = d.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    warn_unless_ok(store::AuditLog(store_).append(e), "audit " + e.kind);
  }
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
    const std::string& secret, int64_t version, std::string_view value,
    const std::vector<store::AuditEvent>& audit) {
  RF_TRY(rows_.record_injections({injection_row(use, sandbox->id(), key, secret, version)},
                                 [&](int64_t) { return audit; }));
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
    // With credentials at an egress edge, a revocation applies from the next
    // request within 100 ms: look more often.
    bool edge = false;
    for (const auto& [id, m] : marked_) edge = edge || !m.edge.empty();
    const auto period = edge ? std::min(options_.watch_period, std::chrono::milliseconds(50))
                             : options_.watch_period;
    cv_.wait_for(lock, period, [&] { return stopping_ || !edge_events_.empty(); });
    if (stopping_) break;
    lock.unlock();
    audit_edge_events();
    if (edge) withdraw_revoked_edge();
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
  lock.unlock();
  audit_edge_events();  // what the last requests did
}

}  // namespace rf::calls
