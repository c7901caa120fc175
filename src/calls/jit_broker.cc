#include "calls/jit_broker.h"

#include <sodium.h>

#include <nlohmann/json.hpp>

#include "core/log.h"
#include "core/units.h"
#include "identity/audit_events.h"
#include "redact/stream_redactor.h"
#include "store/identity_store.h"
#include "store/workflow_store.h"

namespace rf::calls {
namespace {

using nlohmann::json;

constexpr const char* kBinDir = "/.ringfence/bin";

}  // namespace

struct JitBroker::Session {
  JitContext ctx;
  // A request being served: its thread, and whether its asker has left.
  struct Serving {
    std::thread thread;
    bool asker_left = false;
  };
  // All below under the broker's mu_.
  bool closed = false;
  std::map<uint32_t, Serving> serving;  // by the runner's request number: at most kMaxServing
  std::vector<std::thread> finished;    // served: joined by the next enqueue, or by close
  size_t asking = 0;                    // of those served, waiting for a human: at most kMaxAsking
};

struct JitBroker::Grant {
  std::weak_ptr<Sandbox> sandbox;
  IdentityUse use;
  std::string key, secret;
  std::optional<std::chrono::steady_clock::time_point> expires;
};

void JitBroker::put_rf_cred_on_path(ExecCall& call, const Sandbox& sandbox) {
  const auto& spec_env = sandbox.spec().env;
  const std::string path = call.env.count("PATH")   ? call.env["PATH"]
                           : spec_env.count("PATH") ? spec_env.at("PATH")
                                                    : base_environment(false).at("PATH");
  call.env["PATH"] = path + ":" + kBinDir;
}

JitBroker::JitBroker(store::Store& store, IdentityCalls& identity, Options options)
    : store_(store), identity_(identity), options_(std::move(options)) {
  watcher_ = std::thread([this] { watch_loop(); });
}

JitBroker::~JitBroker() {
  std::vector<std::string> open;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, s] : sessions_) open.push_back(id);
  }
  for (const auto& id : open) close(id);
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  watcher_.join();
}

Status JitBroker::open(const JitContext& ctx) {
  if (!ctx.sandbox->takes_credential_requests()) {
    return make_error("JIT credentials",
                      "sandbox " + ctx.sandbox->id() +
                          " cannot take credential requests: JIT needs a sandbox with a network "
                          "namespace of its own (network none or proxy) served by ringfence's own "
                          "tool runner (native or docker; not the local backend, not an image's "
                          "own runner)");
  }
  auto session = std::make_shared<Session>();
  session->ctx = ctx;
  {
    std::lock_guard lock(mu_);
    sessions_[ctx.sandbox->id()] = session;
  }
  std::weak_ptr<Session> weak = session;
  // Withdrawals first: a request never arrives before its withdrawal could.
  ctx.sandbox->set_credential_withdrawn_handler([this, weak](const proto::CredWithdrawn& w) {
    if (auto s = weak.lock()) withdraw(s, w);
  });
  ctx.sandbox->set_credential_handler([this, weak](const proto::CredRequest& req) {
    if (auto s = weak.lock()) enqueue(s, req);
  });
  return ok_status();
}

void JitBroker::close(const std::string& sandbox_id) {
  std::shared_ptr<Session> s;
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mu_);
    auto it = sessions_.find(sandbox_id);
    if (it == sessions_.end()) return;
    s = it->second;
    sessions_.erase(it);
    s->closed = true;
    for (auto& [request, serving] : s->serving) threads.push_back(std::move(serving.thread));
    s->serving.clear();
    for (auto& t : s->finished) threads.push_back(std::move(t));
    s->finished.clear();
  }
  // No handler: later requests are refused by the runner client itself.
  s->ctx.sandbox->set_credential_handler(nullptr);
  s->ctx.sandbox->set_credential_withdrawn_handler(nullptr);
  cv_.notify_all();
  for (auto& t : threads) t.join();
}

void JitBroker::enqueue(const std::shared_ptr<Session>& session, const proto::CredRequest& req) {
  // On the thread reading the runner, under its lock: only start the work,
  // or queue the refusal, and join the threads that are done (they hold
  // neither lock any more).
  std::vector<std::thread> done;
  bool refused = false;
  {
    std::lock_guard lock(mu_);
    if (session->closed) return;
    done.swap(session->finished);
    const std::string& id = session->ctx.sandbox->id();
    std::string why;
    if (session->serving.count(req.request) != 0) {
      why = "request " + std::to_string(req.request) + " of sandbox " + id +
            " is being served already";
    } else if (session->serving.size() >= kMaxServing) {
      // Each is a thread of this worker's: a sandbox may not make more.
      why = "sandbox " + id + " has " + std::to_string(kMaxServing) +
            " credential requests being served, the most allowed";
    }
    if (why.empty()) {
      session->serving[req.request].thread = std::thread([this, session, req] {
        serve(session, req);
        served(*session, req.request);
      });
    } else {
      refusals_.push_back({session, req, why});
      refused = true;
    }
  }
  if (refused) cv_.notify_all();
  for (auto& t : done) t.join();
}

void JitBroker::withdraw(const std::shared_ptr<Session>& session, const proto::CredWithdrawn& w) {
  std::lock_guard lock(mu_);
  // Not served (refused already, or answered): nothing waits for it.
  auto it = session->serving.find(w.request);
  if (it != session->serving.end()) it->second.asker_left = true;
}

void JitBroker::served(Session& s, uint32_t request) {
  std::lock_guard lock(mu_);
  auto it = s.serving.find(request);
  if (it == s.serving.end()) return;  // close() holds the thread, and joins it
  s.finished.push_back(std::move(it->second.thread));
  s.serving.erase(it);
}

bool JitBroker::asker_left(const Session& s, uint32_t request) {
  std::lock_guard lock(mu_);
  auto it = s.serving.find(request);
  return it != s.serving.end() && it->second.asker_left;
}

bool JitBroker::take_ask_slot(Session& s) {
  std::lock_guard lock(mu_);
  if (s.asking >= kMaxAsking) return false;
  ++s.asking;
  return true;
}

void JitBroker::release_ask_slot(Session& s) {
  std::lock_guard lock(mu_);
  --s.asking;
}

namespace {

// The request as it may be shown outside the sandbox: its key, scope and
// reason are whatever the asker wrote (`rf-cred get X --reason "$TOKEN"`), so
// they are redacted of every value the sandbox holds before they reach the
// audit log, the approval queue or an error.
proto::CredRequest shown_outside(proto::CredRequest req,
                                 const std::shared_ptr<const redact::Patterns>& patterns) {
  if (!patterns || patterns->empty()) return req;
  req.name = redact::redact_all(*patterns, req.name);
  req.scope = redact::redact_all(*patterns, req.scope);
  req.reason = redact::redact_all(*patterns, req.reason);
  return req;
}

// What every jit.* event of a request says of it (`shown`: redacted).
json request_detail(const JitContext& ctx, const proto::CredRequest& shown) {
  return {{"key", shown.name},
          {"scope", shown.scope},
          {"reason", shown.reason},
          {"pid", shown.pid},
          {"step", ctx.step},
          {"agent", ctx.agent},
          {"workflow", ctx.use.scope.workflow}};
}

identity::AuditContext audit_where(const JitContext& ctx) {
  const std::optional<int64_t> call =
      ctx.use.call_id != 0 ? std::optional<int64_t>(ctx.use.call_id) : std::nullopt;
  return {ctx.use.run, call, ctx.sandbox->id()};
}

std::string asker_left_text(const proto::CredRequest& req) {
  return "the asker (pid " + std::to_string(req.pid) + " in the sandbox) left before the answer";
}

}  // namespace

void JitBroker::serve(const std::shared_ptr<Session>& session, const proto::CredRequest& req) {
  const JitContext& ctx = session->ctx;
  const proto::CredRequest shown = shown_outside(req, identity_.patterns_for(*ctx.sandbox));
  const std::string actor = "worker " + identity_.worker_id();
  const identity::AuditContext where = audit_where(ctx);
  json base = request_detail(ctx, shown);
  // The trail is written in one transaction where nothing waits in between
  // (before an ask waits for a human, and at the end): one commit, not five,
  // on the asker's path.
  std::vector<store::AuditEvent> trail;
  auto audit = [&](const std::string& kind, json extra) {
    json d = base;
    for (auto& [k, v] : extra.items()) d[k] = v;
    trail.push_back(identity::jit_event(actor, kind, ctx.use.project, where, d.dump()));
  };
  auto flush = [&] {
    identity::audit_all(store_, trail);
    trail.clear();
  };
  auto refuse = [&](const std::string& why, const std::string& by) {
    audit("jit.denied", {{"by", by}, {"why", why}});
    warn_unless_ok(ctx.sandbox->answer_credential({req.request, false, "refused: " + why}, {}),
                   "answering a credential request");
    flush();
  };
  audit("jit.requested", json::object());

  // 2. The key, in the cascade as it stands now.
  auto plan = identity_.plan_now(ctx.use);
  if (!plan) return refuse(plan.error().to_string(), "identity");
  const identity::CascadeEntry* entry = nullptr;
  for (const auto& e : plan->entries) {
    if (e.key == req.name) entry = &e;
  }
  if (entry == nullptr) {
    return refuse(shown.name + " is not a key of the identity profiles of project " +
                      ctx.use.project + " (ringfence identity resolve --project " +
                      ctx.use.project + " lists them)",
                  "identity");
  }
  if (entry->kind != store::ProfileEntry::Kind::secret || entry->delivery != "jit") {
    return refuse(req.name + " is delivered by " +
                      (entry->kind == store::ProfileEntry::Kind::secret ? entry->delivery
                                                                        : std::string("value")) +
                      ", not jit: it is not asked for with rf-cred",
                  "identity");
  }
  base["secret"] = entry->secret;

  // 3. The policy.
  if (!options_.policy) {
    return refuse(
        "this worker has no JIT policy (worker start --jit-policy FILE), so every "
        "request is denied",
        "policy");
  }
  identity::JitAsk ask{req.name,        entry->secret,          req.scope, req.reason,
                       ctx.use.project, ctx.use.scope.workflow, ctx.step,  ctx.agent};
  const identity::JitDecision d = identity::evaluate_jit(*options_.policy, ask);
  const std::string rule_name = d.rule ? options_.policy->describe(*d.rule) : std::string();
  audit("jit.evaluated", {{"rule", d.rule ? json(rule_name) : json(nullptr)},
                          {"verdict", std::string(identity::to_string(d.verdict))}});
  if (!d.rule) {
    return refuse("no rule of " + options_.policy->path + " matches (secret " + entry->secret +
                      ", key " + shown.name + ", scope \"" + shown.scope + "\", project " +
                      ctx.use.project + "), so it is denied",
                  "policy");
  }
  if (d.verdict == identity::JitVerdict::deny) {
    return refuse("denied by " + rule_name, "policy");
  }
  std::string by = "policy";
  std::optional<int64_t> approval;
  if (d.verdict == identity::JitVerdict::ask) {
    // No human is asked for a process that is gone, nor more than
    // kMaxAsking times at once for one sandbox.
    if (asker_left(*session, req.request)) return refuse(asker_left_text(req), "asker");
    if (!take_ask_slot(*session)) {
      return refuse("sandbox " + ctx.sandbox->id() + " has " + std::to_string(kMaxAsking) +
                        " credential requests waiting for a human, the most allowed",
                    "worker");
    }
    flush();  // the request is on record before anyone is asked
    int64_t id = 0;
    auto no = ask_human(*session, shown, *d.rule, entry->secret, &by, &id);
    release_ask_slot(*session);
    if (no) {
      base["approval"] = id;
      return refuse(*no, by);
    }
    approval = id;
    base["approval"] = id;
  }
  // Approved for an asker that has left: the value goes to no one, so it
  // goes nowhere (not into the sandbox's environment either).
  if (asker_left(*session, req.request)) return refuse(asker_left_text(req), "asker");
  audit("jit.approved", {{"by", by}, {"rule", rule_name}});

  // 4. max_uses, taken in the store.
  store::JitGrantRow g;
  g.project_id = ctx.use.project;
  g.run_id = ctx.use.run;
  g.rule = rule_name;
  g.key = req.name;
  g.secret = entry->secret;
  g.sandbox_id = ctx.sandbox->id();
  g.approval_id = approval;
  if (d.rule->ttl.count() > 0) g.expires_at = store_.clock_now() + d.rule->ttl.count();

  // 5. Deliver: opened now (fail closed), recorded, redacted, then sent.
  auto opened = identity_.open_secret(entry->secret);
  if (!opened) return refuse(opened.error().to_string(), "identity");
  g.version = opened->version;
  auto taken = store::IdentityStore(store_).record_jit_grant(g, d.rule->max_uses);
  if (!taken) return refuse(taken.error().to_string(), "store");
  if (!*taken) {
    return refuse(rule_name + " allows " + std::to_string(d.rule->max_uses) +
                      " use(s) per run, and run " + ctx.use.run + " has had them",
                  "policy");
  }
  const std::string_view value = opened->value.reveal();
  // The trail so far is written with the injection, in its transaction: a
  // value never goes in before its approval is on record.
  auto patterns = identity_.inject_late(ctx.use, ctx.sandbox, req.name, entry->secret,
                                        opened->version, value, trail);
  if (!patterns) return refuse(patterns.error().to_string(), "store");
  trail.clear();
  {
    // The running call's output is redacted of it before it can appear there.
    std::lock_guard lock(mu_);
    if (session->closed) return refuse("the call ended before the answer", "worker");
    if (ctx.sink != nullptr) ctx.sink->set_patterns(*patterns);
  }
  std::string v(value);
  auto set = ctx.sandbox->set_env({{req.name, v}});
  if (!set) {
    sodium_memzero(v.data(), v.size());
    return refuse("setting it into the sandbox: " + set.error().to_string(), "worker");
  }
  auto sent = ctx.sandbox->answer_credential({req.request, true, ""}, v);
  sodium_memzero(v.data(), v.size());
  audit("jit.delivered", {{"version", opened->version},
                          {"rule", rule_name},
                          {"ttl_ms", d.rule->ttl.count()},
                          {"sent", sent.ok()}});
  flush();
  std::lock_guard lock(mu_);
  Grant grant{ctx.sandbox, ctx.use, req.name, entry->secret, std::nullopt};
  if (d.rule->ttl.count() > 0) grant.expires = std::chrono::steady_clock::now() + d.rule->ttl;
  grants_[ctx.sandbox->id()].push_back(std::move(grant));
}

std::optional<std::string> JitBroker::ask_human(const Session& s, const proto::CredRequest& req,
                                                const identity::JitRule& rule,
                                                const std::string& secret, std::string* by,
                                                int64_t* approval_id) {
  const JitContext& ctx = s.ctx;
  store::WorkflowStore wf(store_);
  store::ApprovalRow a;
  a.project_id = ctx.use.project;
  if (!ctx.use.run.empty()) a.run_id = ctx.use.run;
  if (!ctx.step.empty()) a.step_id = ctx.step;
  a.kind = "credential";
  std::string message = "Give " + req.name + " (secret " + secret + ")";
  if (!req.scope.empty()) message += " for " + req.scope;
  message += " to run " + ctx.use.run;
  if (!ctx.step.empty()) message += " step " + ctx.step;
  if (!req.reason.empty()) message += ": " + req.reason;
  a.request_json = json{{"message", message},   {"key", req.name},
                        {"secret", secret},     {"scope", req.scope},
                        {"reason", req.reason}, {"step", ctx.step},
                        {"agent", ctx.agent},   {"approvers", rule.approvers}}
                       .dump();
  a.expires_at = store_.clock_now() + rule.timeout.count();
  auto made = wf.request_approval(a);
  if (!made) {
    *by = "store";
    return made.error().to_string();
  }
  *approval_id = *made;
  identity::audit_jit(store_, "worker " + identity_.worker_id(), "jit.asked", ctx.use.project,
                      {ctx.use.run, std::nullopt, ctx.sandbox->id()},
                      json{{"key", req.name}, {"approval", *made}, {"message", message}}.dump());
  const auto deadline = std::chrono::steady_clock::now() + rule.timeout;
  const std::string name = "approval " + std::to_string(*made);
  for (;;) {
    const uint32_t seen = ctx.use.run.empty() ? 0 : store_.run_version(ctx.use.run);
    auto got = wf.approval(*made);
    if (!got) {
      *by = "store";
      return got.error().to_string();
    }
    if (got->state == store::ApprovalState::approved) {
      *by = got->decided_by.value_or("?");
      return std::nullopt;
    }
    if (got->state == store::ApprovalState::denied) {
      *by = got->decided_by.value_or("?");
      return name + " was denied by " + *by +
             (got->reason && !got->reason->empty() ? ": " + *got->reason : "");
    }
    if (got->state == store::ApprovalState::expired ||
        std::chrono::steady_clock::now() >= deadline) {
      (void)wf.expire_approval(*made);
      *by = "timeout";
      return name + " got no answer within " + format_duration(rule.timeout) +
             ", so it counts as denied";
    }
    {
      std::lock_guard lock(mu_);
      if (s.closed) {
        (void)wf.expire_approval(*made);
        *by = "worker";
        return "the call ended while " + name + " waited";
      }
    }
    if (asker_left(s, req.request)) {
      // Out of the queue now: no operator answers for a process that is gone.
      const std::string why = asker_left_text(req) + ", so " + name + " was withdrawn";
      (void)wf.withdraw_approval(*made, "asker", why);
      *by = "asker";
      return why;
    }
    if (ctx.use.run.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    } else {
      store_.wait_for_run(ctx.use.run, seen, std::chrono::milliseconds(200));
    }
  }
}

void JitBroker::withdraw_due() {
  // Looked at outside the lock: the store is read, and unset_env waits for
  // the runner, whose reader may be handing this broker a request meanwhile.
  std::map<std::string, std::vector<Grant>> snapshot;
  {
    std::lock_guard lock(mu_);
    if (grants_.empty()) return;
    snapshot = grants_;
  }
  store::IdentityStore rows(store_);
  const auto now = std::chrono::steady_clock::now();
  struct Due {
    std::shared_ptr<Sandbox> sandbox;
    Grant grant;
    std::string why;
  };
  std::vector<Due> due;
  std::vector<std::string> gone;
  for (const auto& [id, list] : snapshot) {
    for (const auto& g : list) {
      auto sb = g.sandbox.lock();
      if (!sb) {
        gone.push_back(id);
        break;
      }
      std::string why;
      if (g.expires && now >= *g.expires) {
        why = "its ttl ran out";
      } else if (auto row = rows.secret(g.secret);
                 !row.ok() || !*row || (**row).state != store::SecretState::active) {
        why = "secret " + g.secret + " was revoked";
      }
      if (!why.empty()) due.push_back({std::move(sb), g, why});
    }
  }
  {
    std::lock_guard lock(mu_);
    for (const auto& id : gone) grants_.erase(id);
    for (const auto& d : due) {
      auto it = grants_.find(d.sandbox->id());
      if (it == grants_.end()) continue;
      std::erase_if(it->second, [&](const Grant& g) {
        return g.key == d.grant.key && g.secret == d.grant.secret;
      });
      if (it->second.empty()) grants_.erase(it);
    }
  }
  for (auto& d : due) {
    warn_unless_ok(d.sandbox->unset_env({d.grant.key}),
                   "taking " + d.grant.key + " out of sandbox " + d.sandbox->id());
    identity::audit_jit(
        store_, "worker " + identity_.worker_id(), "jit.withdrawn", d.grant.use.project,
        {d.grant.use.run, std::nullopt, d.sandbox->id()},
        json{{"key", d.grant.key}, {"secret", d.grant.secret}, {"why", d.why}}.dump());
  }
}

void JitBroker::send_refusal(const Refusal& r) {
  const JitContext& ctx = r.session->ctx;
  json d = request_detail(ctx, shown_outside(r.req, identity_.patterns_for(*ctx.sandbox)));
  d["by"] = "worker";
  d["why"] = r.why;
  identity::audit_jit(store_, "worker " + identity_.worker_id(), "jit.denied", ctx.use.project,
                      audit_where(ctx), d.dump());
  warn_unless_ok(ctx.sandbox->answer_credential({r.req.request, false, "refused: " + r.why}, {}),
                 "answering a credential request");
}

void JitBroker::watch_loop() {
  using Clock = std::chrono::steady_clock;
  std::unique_lock lock(mu_);
  auto next_withdraw = Clock::now() + options_.watch_period;
  for (;;) {
    cv_.wait_until(lock, next_withdraw, [&] { return stopping_ || !refusals_.empty(); });
    std::vector<Refusal> refusals;
    refusals.swap(refusals_);
    const bool stop = stopping_;
    lock.unlock();
    for (const auto& r : refusals) send_refusal(r);  // each asker gets its answer, even at the end
    if (stop) return;
    if (Clock::now() >= next_withdraw) {
      withdraw_due();
      next_withdraw = Clock::now() + options_.watch_period;
    }
    lock.lock();
  }
}

}  // namespace rf::calls
