#include "worker/sandbox_steps.h"

#include <sodium.h>

#include <algorithm>

#include "agents/adapter.h"
#include "calls/guarded_call.h"
#include "core/json_input.h"
#include "core/log.h"
#include "core/units.h"
#include "identity/audit_events.h"
#include "net/egress_policy.h"
#include "proof/output_digest.h"
#include "proof/receipt.h"
#include "redact/stream_redactor.h"
#include "sandbox/result_json.h"
#include "worker/artifact_delivery.h"

namespace rf::worker {
namespace {

using nlohmann::json;
using workflow::ErrorKind;
using workflow::ExecutionMode;

constexpr size_t kKeep = 1 << 20;  // bytes of each stream a step's outputs keep

// Keeps the first kKeep bytes of each stream of a step's command (what later
// steps read as {{steps.ID.stdout}}), as delivered: after redaction.
class Capture : public OutputSink {
 public:
  bool wants_started() const override { return false; }
  void on_stdout(std::string_view d) override { keep(out_, d); }
  void on_stderr(std::string_view d) override { keep(err_, d); }
  std::string out_, err_;

 private:
  void keep(std::string& to, std::string_view d) {
    std::lock_guard lock(mu_);
    if (to.size() < kKeep) to.append(d.substr(0, kKeep - to.size()));
  }
  std::mutex mu_;
};

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

// The identity a step's sandbox received, for its attempt's record: keys,
// levels, secrets and versions, never values.
json identity_record(const calls::PreparedIdentity& p) {
  json keys = json::array();
  for (const auto& e : p.resolved.plan.entries) {
    json k = {
        {"key", e.key}, {"level", std::string(store::to_string(e.level))}, {"profile", e.profile}};
    if (e.kind == store::ProfileEntry::Kind::secret) {
      k["secret"] = e.secret;
      k["version"] = e.version;
      // A fingerprint of the version, not of the value.
      unsigned char h[crypto_generichash_BYTES];
      const std::string id = e.secret + "@" + std::to_string(e.version);
      crypto_generichash(h, sizeof h, reinterpret_cast<const unsigned char*>(id.data()), id.size(),
                         nullptr, 0);
      static const char* hex = "0123456789abcdef";
      std::string fp;
      for (int i = 0; i < 8; ++i) {
        fp += hex[h[i] >> 4];
        fp += hex[h[i] & 15];
      }
      k["fingerprint"] = fp;
    }
    keys.push_back(std::move(k));
  }
  return {{"workflow", p.resolved.plan.request.workflow},
          {"user", p.resolved.plan.request.user},
          {"keys", std::move(keys)}};
}

class SandboxStep {
 public:
  SandboxStep(const WorkflowServices& s, const StepRequest& r, StepSandboxes& sandboxes)
      : s_(s), r_(r), step_(*r.step), sandboxes_(sandboxes) {}

  StepOutcome run() {
    // The step's plain environment, rendered.
    for (const auto& [k, v] : step_.env) {
      auto value = r_.render(v);
      if (!value) return fail(ErrorKind::kTemplate, "env." + k + ": " + value.error().to_string());
      env_[k] = std::move(*value);
    }
    uint64_t floor = 0;
    if (!step_.agent.empty()) {
      auto a = agents::load_adapter(step_.agent, s_.agents_dir);
      if (!a) return fail(ErrorKind::kInternal, a.error().to_string());
      adapter_ = std::move(*a);
      floor = adapter_->memory_floor;
      // An agent runs what its model says: never on the host. There its HOME
      // and config would also sit at a fixed name in the host's shared /tmp.
      if (sandboxes_.worker_mode() == SandboxMode::kNone) {
        return fail(ErrorKind::kSandbox,
                    "agent " + step_.agent +
                        ": refused: this worker runs steps without a sandbox (mode none), and a "
                        "CLI agent runs only in one");
      }
    }
    auto spec = step_spec(sandboxes_.base_spec(), step_, r_.timeout, floor);
    if (!spec) return fail(ErrorKind::kSandbox, spec.error().to_string());
    spec_ = std::move(*spec);
    if (auto refused = refuse_host_network(); !refused.empty()) {
      return fail(ErrorKind::kSandbox, refused);
    }
    if (workflow::takes_identity(step_.mode)) {
      if (auto s = prepare_identity(); !s) return fail(ErrorKind::kIdentity, s.error().to_string());
      // Proxy-delivered keys: the step's sandbox trusts a CA of its own.
      if (identity_->needs_intercept() && spec_.network == NetworkPolicy::kProxy) {
        spec_.tls_intercept = true;
      }
    }
    // What to run.
    std::vector<std::string> argv;
    std::map<std::string, std::string> run_env = env_;
    // What the call records: never a value from identity.
    std::map<std::string, std::string> recorded_env = env_;
    if (adapter_) {
      auto plan = plan_agent();
      if (!plan) return fail(ErrorKind::kIdentity, plan.error().to_string());
      plan_ = std::move(*plan);
      argv = plan_->argv;
      for (const auto& [k, v] : plan_->env) run_env[k] = v;
      for (const auto& [k, v] : agents::env_to_record(*plan_)) recorded_env[k] = v;
    } else if (!step_.run.empty()) {
      auto line = r_.render(step_.run, workflow::Escape::kShell);
      if (!line) return fail(ErrorKind::kTemplate, "run: " + line.error().to_string());
      argv = {"/bin/sh", "-c", *line};
    } else {
      for (const auto& a : step_.argv) {
        auto v = r_.render(a);
        if (!v) return fail(ErrorKind::kTemplate, "argv: " + v.error().to_string());
        argv.push_back(std::move(*v));
      }
    }
    // The call that carries the step's output; identity goes in with its id.
    auto call = start_call(argv, recorded_env);
    if (!call) return fail(ErrorKind::kInternal, call.error().to_string());
    main_call_ = *call;
    StepOutcome out = in_sandbox(argv, run_env);
    release();
    return out;
  }

 private:
  StepOutcome fail(ErrorKind kind, std::string why) {
    if (patterns_) why = redact::redact_all(*patterns_, why);
    return StepOutcome::failed(kind, std::move(why));
  }

  std::string refuse_host_network() {
    if (spec_.network != NetworkPolicy::kHost || s_.settings->allow_host_network.value) return "";
    auto project = s_.store->project(r_.project);
    if (project && project->environment == store::Environment::production) {
      return "network host is refused for production project " + r_.project +
             " (set sandbox.allow_host_network: true in the worker's config file to allow it)";
    }
    return "";
  }

  store::IdentityScope scope() const {
    store::IdentityScope sc;
    if (step_.identity) {
      sc.workflow = step_.identity->workflow;
      sc.user = step_.identity->user;
    }
    if (sc.user.empty()) sc.user = r_.user;
    return sc;
  }

  Status prepare_identity() {
    use_ = calls::IdentityUse{0, r_.project, r_.run_id, scope()};
    std::string notice;
    auto p = s_.identity->prepare(use_, sandboxes_.worker_mode() != SandboxMode::kNone, &notice);
    if (!p) return p.take_error();
    notice_ = notice;
    identity_ = std::move(*p);
    patterns_ = identity_->patterns;
    for (const auto& [k, v] : identity_->resolved.env) identity_env_[k] = std::string(v.reveal());
    return ok_status();
  }

  Result<agents::AgentPlan> plan_agent() {
    auto prompt = r_.render(step_.prompt);
    if (!prompt) return make_error("prompt", prompt.error().to_string());
    agents::PlanInput in;
    in.prompt = std::move(*prompt);
    in.identity = identity_env_;
    in.env = env_;
    return agents::plan_agent(*adapter_, in);
  }

  Result<int64_t> start_call(const std::vector<std::string>& argv,
                             const std::map<std::string, std::string>& plain_env) {
    store::NewCall c;
    c.project = r_.project;
    c.run = r_.run_id;
    c.argv = argv;
    // Identity values never go into the store: `plain_env` holds none (an
    // adapter's env that holds one is recorded as [REDACTED:KEY]).
    c.env = plain_env;
    c.timeout = r_.timeout;
    c.sandbox_image = spec_.image;
    if (identity_) c.identity = scope();
    return s_.store->start_call(c, s_.worker_id, s_.lease);
  }

  struct Ran {
    Result<ExecResult> result = make_error("", "not run");
    std::string out, err;
    std::optional<std::string> revoked;
  };

  // One command in the step's sandbox, as the call `call_id` of the run,
  // through the guarded call path (calls/guarded_call.h).
  Ran exec(int64_t call_id, std::vector<std::string> argv, std::map<std::string, std::string> env,
           const std::string& cwd) {
    Ran ran;
    Capture capture;
    calls::GuardedCall call;
    call.call_id = call_id;
    call.use = use_.project.empty() ? calls::IdentityUse{0, r_.project, r_.run_id, scope()} : use_;
    call.exec.argv = std::move(argv);
    call.exec.env = std::move(env);
    for (const auto& [k, v] : identity_env_) call.exec.env[k] = v;
    call.exec.cwd = cwd;
    call.exec.timeout = r_.timeout;
    call.jit = step_.mode == ExecutionMode::kCliAgentJit;
    call.step = step_.id;
    call.agent = step_.agent;
    call.notice = notice_;
    call.result_extra = {{"mode", std::string(to_string(step_.mode))},
                         {"backend", sandboxes_.backend_name()},
                         {"step", step_.id}};
    call.tee = &capture;
    StepControl* control = r_.control;
    call.stopped = [control]() -> std::optional<std::string> {
      if (control->stopped()) return control->why();
      return std::nullopt;
    };
    const calls::CallPath path{s_.store, s_.worker_id, s_.flusher, s_.identity, s_.jit, s_.proof};
    auto outcome = calls::run_guarded(path, std::move(call), sandbox_);
    // From here on (the step's result file, its error texts) redact every
    // value the sandbox holds: with what was granted during the call too.
    if (outcome.patterns) patterns_ = outcome.patterns;
    ran.result = std::move(outcome.result);
    ran.revoked = std::move(outcome.revoked);
    ran.out = std::move(capture.out_);
    ran.err = std::move(capture.err_);
    return ran;
  }

  StepOutcome in_sandbox(const std::vector<std::string>& argv,
                         const std::map<std::string, std::string>& run_env) {
    const std::string scope_text = identity_ ? identity_->scope : "";
    const bool per_run = step_.sandbox && step_.sandbox->mode == "per_run";
    auto lease = sandboxes_.acquire(spec_, per_run, scope_text);
    if (!lease) {
      StepOutcome o = fail(ErrorKind::kSandbox, lease.error().to_string());
      fail_main_call(o.error);
      return o;
    }
    lease_ = std::move(*lease);
    sandbox_ = lease_->sandbox;
    if (identity_) {
      use_.call_id = main_call_;
      if (auto s = s_.identity->inject(use_, *identity_, sandbox_); !s) {
        StepOutcome o = fail(ErrorKind::kIdentity, s.error().to_string());
        fail_main_call(o.error);
        return o;
      }
    }
    // Every value the sandbox ever received, not only this step's: a per_run
    // sandbox's earlier steps' values and JIT grants (still in its
    // environment for every later exec) are redacted from this step too.
    if (auto p = s_.identity->patterns_for(*sandbox_)) patterns_ = std::move(p);
    r_.placed(sandbox_->id(), main_call_);
    // A stop (cancel, the run's wall clock) ends the sandbox, which ends the call.
    auto sb = sandbox_;
    StepSandboxes* boxes = &sandboxes_;
    r_.control->on_stop([boxes, sb] { boxes->discard(sb); });
    StepOutcome out;
    if (adapter_) {
      out = run_agent(run_env);
    } else {
      Ran ran = exec(main_call_, argv, run_env, "/workspace");
      out = command_outcome(ran);
    }
    r_.control->clear_on_stop();
    return out;
  }

  void fail_main_call(const std::string& why) {
    auto s = s_.store->fail_call(main_call_, s_.worker_id, why);
    if (!s) spdlog::warn("call {}: {}", main_call_, s.error().to_string());
  }

  StepOutcome command_outcome(Ran& ran) {
    StepOutcome o;
    o.image_digest = sandboxes_.image_digest(spec_.image);
    o.outputs["stdout"] = ran.out;
    o.outputs["stderr"] = ran.err;
    o.outputs["output"] = trimmed(ran.out);
    json parsed = rf::parse_json_or_discarded(ran.out);
    if (!parsed.is_discarded()) o.outputs["json"] = std::move(parsed);
    if (identity_) o.identity = identity_record(*identity_);
    if (ran.revoked) {
      o.state = store::AttemptState::failed;
      o.error_kind = ErrorKind::kIdentity;
      o.error = "revoked: " + *ran.revoked;
      return o;
    }
    if (r_.control->stopped()) {
      o.state = store::AttemptState::cancelled;
      o.error = r_.control->why();
      return o;
    }
    if (!ran.result) {
      o.state = store::AttemptState::failed;
      o.error_kind = ErrorKind::kSandbox;
      o.error = ran.result.error().to_string();
      if (patterns_) o.error = redact::redact_all(*patterns_, o.error);
      return o;
    }
    const ExecResult& res = *ran.result;
    o.outputs["exit_code"] = res.exit_code;
    if (!res.limit.empty()) o.outputs["limit"] = res.limit;
    if (res.timed_out) {
      o.state = store::AttemptState::failed;
      o.error_kind = ErrorKind::kTimeout;
      o.error = "the step's timeout (" + format_duration(r_.timeout) + ") passed";
    } else if (res.exit_code != 0) {
      o.state = store::AttemptState::failed;
      o.error_kind = ErrorKind::kExit;
      o.error = "exited " + std::to_string(res.exit_code) +
                (res.limit.empty() ? "" : " (limit " + res.limit + " hit)");
      const std::string tail =
          trimmed(ran.err.size() > 300 ? ran.err.substr(ran.err.size() - 300) : ran.err);
      if (!tail.empty()) o.error += ": " + tail;
    }
    return o;
  }

  StepOutcome run_agent(const std::map<std::string, std::string>& run_env) {
    const agents::AgentPlan& plan = *plan_;
    const agents::AgentAdapter& a = *adapter_;
    // A writable HOME and scratch directory, then the adapter's config files.
    for (const std::string& dir : {plan.home, plan.tmp}) {
      if (auto s = sandbox_->write_file(dir + "/.ringfence-agent", "", 0600); !s) {
        StepOutcome o = fail(ErrorKind::kSandbox,
                             "agent " + a.name + ": making " + dir + ": " + s.error().to_string());
        fail_main_call(o.error);
        return o;
      }
    }
    for (const auto& f : plan.files) {
      if (auto s = sandbox_->write_file(f.path, f.content, f.mode); !s) {
        StepOutcome o = fail(ErrorKind::kSandbox, "agent " + a.name + ": writing " + f.path + ": " +
                                                      s.error().to_string());
        fail_main_call(o.error);
        return o;
      }
    }
    Ran ran = exec(main_call_, plan.argv, run_env, a.workdir);
    StepOutcome o = command_outcome(ran);
    o.outputs["agent"] = a.name;
    if (o.state == store::AttemptState::cancelled || o.error_kind == ErrorKind::kIdentity ||
        o.error_kind == ErrorKind::kSandbox) {
      return o;
    }
    std::string result_text = ran.out;
    if (!plan.result_file.empty()) {
      auto f = sandbox_->read_file(plan.result_file);
      result_text = f ? *f : "";
      if (patterns_) result_text = redact::redact_all(*patterns_, result_text);
    }
    auto answer = agents::read_answer(a, result_text);
    const std::string said = ran.out + ran.err + result_text;
    if (o.state == store::AttemptState::failed || !answer || answer->is_error) {
      o.state = store::AttemptState::failed;
      if (agents::model_unreachable(a, said)) {
        o.error_kind = ErrorKind::kNetwork;
        o.error = "agent " + a.name + " could not reach its model at " + plan.endpoint +
                  (a.endpoint_env.empty() ? "" : " (" + a.endpoint_env + ")") + ": " +
                  (answer && !answer->answer.empty() ? answer->answer : o.error);
      } else {
        o.error_kind =
            o.error_kind == ErrorKind::kTimeout ? ErrorKind::kTimeout : ErrorKind::kModel;
        o.error = "agent " + a.name + " failed: " +
                  (answer && !answer->answer.empty() ? answer->answer
                   : !answer                         ? answer.error().message + "; " + o.error
                                                     : o.error);
      }
      if (patterns_) o.error = redact::redact_all(*patterns_, o.error);
      return o;
    }
    o.outputs["output"] = answer->answer;
    if (answer->json) o.outputs["json"] = *answer->json;
    if (step_.artifact) {
      ArtifactJob job{s_,
                      r_,
                      *step_.artifact,
                      sandbox_,
                      identity_env_,
                      patterns_,
                      spec_,
                      [this](const std::vector<std::string>& argv,
                             const std::map<std::string, std::string>& env,
                             const std::string& cwd) -> Result<std::pair<int, std::string>> {
                        // The env holds the push token: the call records none of it.
                        auto call = start_call(argv, {});
                        if (!call) return call.take_error();
                        Ran ran = exec(*call, argv, env, cwd);
                        if (!ran.result) return ran.result.take_error();
                        return std::pair(ran.result->exit_code, ran.out);
                      }};
      auto ref = deliver_artifact(job);
      if (!ref) {
        o.state = store::AttemptState::failed;
        o.error_kind = ErrorKind::kArtifact;
        o.error = ref.error().to_string();
        if (patterns_) o.error = redact::redact_all(*patterns_, o.error);
        return o;
      }
      o.outputs["artifact"] = *ref;
    }
    return o;
  }

  void release() {
    if (!lease_) return;
    const bool destroyed = !lease_->per_run;
    const std::string id = sandbox_->id();
    // Its self-probe runs in it: a per_tool sandbox is destroyed now, a
    // per_run one maybe at the run's end, right after this step.
    if (s_.proof) s_.proof->wait_for_report(id);
    sandboxes_.release(std::move(*lease_));
    lease_.reset();
    if (destroyed) {
      s_.identity->sandbox_gone(id);
      if (s_.proof) s_.proof->sandbox_gone(id);
    }
    for (auto& [k, v] : identity_env_) sodium_memzero(v.data(), v.size());
  }

  const WorkflowServices& s_;
  const StepRequest& r_;
  const workflow::StepDef& step_;
  StepSandboxes& sandboxes_;
  SandboxSpec spec_;
  std::map<std::string, std::string> env_;
  std::optional<agents::AgentAdapter> adapter_;
  std::optional<agents::AgentPlan> plan_;
  calls::IdentityUse use_;
  std::optional<calls::PreparedIdentity> identity_;
  std::map<std::string, std::string> identity_env_;
  std::shared_ptr<const redact::Patterns> patterns_;
  std::string notice_;
  int64_t main_call_ = 0;
  std::optional<StepSandbox> lease_;
  std::shared_ptr<Sandbox> sandbox_;
};

}  // namespace

Result<SandboxSpec> step_spec(const SandboxSpec& base, const workflow::StepDef& step,
                              std::chrono::milliseconds timeout, uint64_t memory_floor) {
  SandboxSpec spec = base;
  spec.limits.timeout = timeout;
  if (step.sandbox) {
    const workflow::SandboxDef& d = *step.sandbox;
    const std::string where = d.where.to_string();
    if (!d.image.empty()) spec.image = d.image;
    if (d.memory_bytes) spec.limits.memory_bytes = *d.memory_bytes;
    if (d.cpus) spec.limits.cpus = *d.cpus;
    if (d.pids) spec.limits.pids = *d.pids;
    if (d.disk_bytes) spec.limits.disk_bytes = *d.disk_bytes;
    if (d.network == "none") {
      spec.network = NetworkPolicy::kNone;
      spec.allow.clear();
    } else if (d.network == "host") {
      spec.network = NetworkPolicy::kHost;
      spec.allow.clear();
    } else if (d.network == "proxy") {
      spec.network = NetworkPolicy::kProxy;
      spec.allow = d.allow;
    }
    if (auto p = net::EgressPolicy::parse(spec.allow); !p) {
      return make_error(where + ".network.allow", p.error().to_string());
    }
  }
  spec.limits.memory_bytes = std::max(spec.limits.memory_bytes, memory_floor);
  if (auto s = validate_spec(spec); !s) {
    return make_error(step.where.to_string() + ".sandbox", s.error().to_string());
  }
  return spec;
}

StepOutcome run_sandbox_step(const WorkflowServices& services, const StepRequest& request,
                             StepSandboxes& sandboxes) {
  return SandboxStep(services, request, sandboxes).run();
}

}  // namespace rf::worker
