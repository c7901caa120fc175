#include "worker/run_executor.h"

#include <sodium.h>

#include <cmath>

#include "core/json_input.h"
#include "core/log.h"
#include "core/units.h"
#include "policy/load.h"
#include "policy/workflow_checks.h"
#include "worker/in_process_steps.h"
#include "worker/sandbox_steps.h"
#include "worker/step_approval.h"
#include "workflow/parse.h"

namespace rf::worker {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
using workflow::ErrorKind;
using workflow::ExecutionMode;
using workflow::StepKind;

std::string sha256_hex(std::string_view data) {
  unsigned char h[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(h, reinterpret_cast<const unsigned char*>(data.data()), data.size());
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : h) {
    out += hex[c >> 4];
    out += hex[c & 15];
  }
  return out;
}

std::string excerpt(const json& outputs) {
  if (!outputs.contains("output") || !outputs["output"].is_string()) return "";
  std::string s = outputs["output"].get<std::string>();
  if (s.size() > 200) s = s.substr(0, 200) + "...";
  return s;
}

// The outputs later steps read: the attempt's, with its status.
json step_view(const json& outputs, const std::string& status, const std::string& error) {
  json v = outputs.is_object() ? outputs : json::object();
  v["status"] = status;
  if (!error.empty()) v["error"] = error;
  for (const char* k : {"output", "stdout", "stderr"}) {
    if (!v.contains(k)) v[k] = "";
  }
  return v;
}

std::string joined(const std::vector<std::string>& parts, const char* sep = ", ") {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

// A replay's action for a side-effecting step nobody approved (store::ReplayLine).
constexpr const char* kNotApproved = "skipped (side effect, not approved)";

// Outputs as a record compares them: without what a replay added.
json without_replay_note(json outputs) {
  if (outputs.is_object()) {
    outputs.erase("replay");
    outputs.erase("replayed_from");
  }
  return outputs;
}

// Every step `step` depends on, directly or not: what its templates may read.
std::set<std::string> upstream_of(const workflow::WorkflowDef& def, const workflow::StepDef& step) {
  std::set<std::string> out;
  std::vector<const workflow::StepDef*> todo{&step};
  while (!todo.empty()) {
    const workflow::StepDef* cur = todo.back();
    todo.pop_back();
    for (const auto& n : cur->needs) {
      const workflow::StepDef* next = def.step(n);
      if (next != nullptr && out.insert(n).second) todo.push_back(next);
    }
  }
  return out;
}

// An agent step's end in brief, for `--follow`: the agent, and its turns and
// cost when its result says (Claude Code's num_turns, total_cost_usd).
std::optional<json> agent_summary(const json& outputs) {
  auto name = outputs.find("agent");
  if (name == outputs.end() || !name->is_string()) return std::nullopt;
  json out = {{"name", *name}};
  auto result = outputs.find("json");
  if (result != outputs.end() && result->is_object()) {
    if (auto t = result->find("num_turns"); t != result->end() && t->is_number_integer())
      out["turns"] = *t;
    if (auto c = result->find("total_cost_usd"); c != result->end() && c->is_number())
      out["cost_usd"] = *c;
  }
  return out;
}

// An attempt's error kind as the store keeps it.
ErrorKind recorded_kind(const std::optional<std::string>& text) {
  if (!text) return ErrorKind::kNone;
  if (*text == to_string(ErrorKind::kInterrupted)) return ErrorKind::kInterrupted;
  auto kind = workflow::parse_error_kind(*text);
  return kind ? *kind : ErrorKind::kInternal;
}

}  // namespace

RunExecutor::RunExecutor(const WorkflowServices& services, store::WorkflowRunRow row)
    : s_(services), row_(std::move(row)), wf_(*services.store) {}

RunExecutor::~RunExecutor() {
  stop_all("the worker stopped");
  join_done();
  for (auto& [id, s] : steps_) {
    if (s.thread.joinable()) s.thread.join();
  }
}

void RunExecutor::event(const std::string& kind, json detail) {
  store::Event e;
  e.kind = kind;
  e.project_id = row_.project_id;
  e.run_id = row_.run_id;
  e.worker_id = s_.worker_id;
  // Microseconds (the event's own time is in ms): what the story and the bench read.
  detail["t_us"] = std::chrono::duration_cast<std::chrono::microseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  e.detail_json = detail.dump();
  warn_unless_ok(s_.store->append_event(e), "recording " + kind + " of run " + row_.run_id);
}

bool RunExecutor::load() {
  auto def = workflow::load_workflow_text(row_.definition, row_.file);
  if (!def) {
    finish(store::WorkflowRunState::failed,
           "the workflow cannot be read: " + def.error().to_string());
    return false;
  }
  def_ = std::move(*def);
  // The project's operator policy, as it stands when the run starts: the
  // door that queued the run checked it too, but a run may have been queued
  // before the policy changed, or by a door that is the operator's own.
  auto policy = policy::load_policy(*s_.store, row_.project_id);
  if (!policy) {
    finish(store::WorkflowRunState::failed,
           "the operator policy cannot be read: " + policy.error().to_string());
    return false;
  }
  if (auto allowed = policy::check_workflow(*policy, def_); !allowed) {
    finish(store::WorkflowRunState::failed,
           "refused by the operator policy: " + allowed.error().to_string());
    return false;
  }
  policy_ = std::make_shared<const policy::OperatorPolicy>(std::move(*policy));
  json inputs = rf::parse_json_or_discarded(row_.inputs_json);
  if (!inputs.is_object()) inputs = json::object();
  context_ = {{"inputs", inputs},
              {"steps", json::object()},
              {"run", {{"id", row_.run_id}, {"project", row_.project_id}, {"user", row_.user}}},
              {"workflow", {{"name", def_.name}}}};
  for (const auto& step : def_.steps) steps_[step.id].def = &step;
  if (row_.replay_of) {
    // A replay: each step's last succeeded attempt in the original is its
    // record (a step a replay did not run again keeps the record it stood in with).
    auto original = wf_.attempts(*row_.replay_of);
    if (!original) {
      finish(store::WorkflowRunState::failed,
             "replay of " + *row_.replay_of + ": " + original.error().to_string());
      return false;
    }
    for (const auto& a : *original) {
      if (def_.step(a.step_id) == nullptr || !a.outputs_json) continue;
      json outputs = rf::parse_json_or_discarded(*a.outputs_json);
      const bool stood_in = a.state == store::AttemptState::skipped && outputs.is_object() &&
                            outputs.contains("replayed_from") && outputs.contains("replay") &&
                            outputs["replay"].value("action", "") == kNotApproved;
      if (a.state != store::AttemptState::succeeded && !stood_in) continue;
      recorded_[a.step_id] = {
          without_replay_note(std::move(outputs)),
          a.exchanges_json ? rf::parse_json_or_discarded(*a.exchanges_json) : json()};
    }
    for (const auto& step : def_.steps) upstream_[step.id] = upstream_of(def_, step);
  }
  sandboxes_ =
      std::make_unique<StepSandboxes>(s_.serving(), s_.ledger, row_.project_id, row_.run_id);
  return true;
}

// What earlier claims of this run did: finished steps stay done.
void RunExecutor::restore_from_store() {
  auto attempts = wf_.attempts(row_.run_id);
  if (!attempts) {
    spdlog::warn("run {}: reading its steps: {}", row_.run_id, attempts.error().to_string());
    return;
  }
  std::map<std::string, const store::AttemptRow*> last;
  for (const auto& a : *attempts) {
    auto it = steps_.find(a.step_id);
    if (it == steps_.end()) continue;
    it->second.attempts = std::max(it->second.attempts, a.attempt);
    const store::AttemptRow*& l = last[a.step_id];
    if (l == nullptr || a.attempt >= l->attempt) l = &a;
  }
  for (auto& [id, a] : last) {
    StepState& s = steps_[id];
    const workflow::RetryPolicy& retry = s.def->retry;
    const bool more = s.attempts < retry.attempts;
    const ErrorKind kind = recorded_kind(a->error_kind);
    switch (a->state) {
      case store::AttemptState::succeeded: {
        s.status = Status::kSucceeded;
        const json outputs =
            a->outputs_json ? rf::parse_json_or_discarded(*a->outputs_json) : json();
        s.changed = row_.replay_of && differs_from_record(id, outputs);
        context_["steps"][id] = step_view(outputs, "succeeded", "");
        break;
      }
      case store::AttemptState::interrupted:
      case store::AttemptState::running:
        if (retry.on_interrupt && more) {
          s.status = Status::kPending;
          event("step.resume", {{"step", id},
                                {"attempt", s.attempts + 1},
                                {"why", "attempt " + std::to_string(a->attempt) +
                                            " was interrupted; retry.on_interrupt is true"}});
        } else {
          s.status = Status::kFailed;
          s.error_kind = ErrorKind::kInterrupted;
          s.error = "interrupted: " + a->error.value_or("its worker stopped") + " (" +
                    retry.interrupted_not_run_again(s.attempts) + ")";
          context_["steps"][id] = step_view(json(), "interrupted", s.error);
        }
        break;
      case store::AttemptState::failed:
        if (retry.retries(kind) && more && kind != ErrorKind::kIdentity) {
          s.status = Status::kPending;
        } else {
          s.status = Status::kFailed;
          s.error_kind = kind;
          s.error = a->error.value_or("failed");
          context_["steps"][id] =
              step_view(a->outputs_json ? rf::parse_json_or_discarded(*a->outputs_json) : json(),
                        "failed", s.error);
        }
        break;
      case store::AttemptState::skipped:
      case store::AttemptState::cancelled:
        s.status = Status::kPending;
        break;
    }
  }
}

milliseconds RunExecutor::timeout_of(const workflow::StepDef& step) const {
  if (step.timeout.count() > 0) return step.timeout;
  if (step.mode == ExecutionMode::kInProcess) {
    switch (step.kind) {
      case StepKind::kApproval:
        return std::chrono::hours(1);
      case StepKind::kSleep:
        return step.duration + milliseconds(10'000);
      case StepKind::kHttp:
      case StepKind::kLlm:
        return milliseconds(120'000);
      default:
        return milliseconds(10'000);
    }
  }
  return workflow::runs_agent(step.mode) || !step.agent.empty() ? std::chrono::minutes(30)
                                                                : std::chrono::minutes(10);
}

bool RunExecutor::needs_met(const StepState& s, bool* blocked) const {
  *blocked = false;
  for (const auto& n : s.def->needs) {
    const StepState& dep = steps_.at(n);
    switch (dep.status) {
      case Status::kSucceeded:
        continue;
      case Status::kFailed:
        if (dep.def->allow_failure) continue;
        *blocked = true;
        return false;
      case Status::kSkipped:
      case Status::kCancelled:
        *blocked = true;
        return false;
      default:
        return false;
    }
  }
  return true;
}

bool RunExecutor::differs_from_record(const std::string& step, const json& outputs) const {
  auto rec = recorded_.find(step);
  return rec == recorded_.end() || without_replay_note(outputs) != rec->second.outputs;
}

// Under mu_: what upstream steps did in this replay decides (run_executor.h).
RunExecutor::ReplayPlan RunExecutor::replay_plan(const StepState& s) const {
  const workflow::StepDef& step = *s.def;
  std::vector<std::string> stood_in, changed;
  for (const auto& u : upstream_.at(step.id)) {
    const StepState& up = steps_.at(u);
    if (up.stood_in) stood_in.push_back(u);
    if (up.changed) changed.push_back(u);
  }
  std::vector<std::string> why;
  ReplayPlan p;
  p.action = "re-run";
  if (step.mode == ExecutionMode::kInProcess && step.kind == StepKind::kApproval) {
    p.action = "asked again";
    why.push_back("an approval is never answered from the record");
  } else if (p.side_effects = workflow::side_effects(step); !p.side_effects.empty()) {
    p.way = ReplayPlan::Way::kAskFirst;
  } else if (step.mode != ExecutionMode::kInProcess) {
    why.push_back("it changes nothing outside its sandbox");
  } else if (!recorded_.count(step.id)) {
    why.push_back("the original has no outputs of it");
  } else if (!changed.empty()) {
    why.push_back("what it reads changed: " + joined(changed) + " ran again with other outputs");
  } else {
    p.way = ReplayPlan::Way::kFromRecord;
    why.push_back("nothing it reads changed");
  }
  if (!stood_in.empty()) {
    why.push_back("it reads the original's outputs of " + joined(stood_in) +
                  ", which this replay did not run again");
  }
  p.why = joined(why, "; ");
  return p;
}

void RunExecutor::launch(StepState& s) {
  const int64_t number = ++s.attempts;
  if (row_.replay_of) s.replay = replay_plan(s);
  s.status = Status::kRunning;
  s.done = false;
  s.outcome.reset();
  s.control = std::make_unique<StepControl>();
  StepControl* control = s.control.get();
  s.thread = std::thread([this, &s, number, control] { attempt(s, number, control); });
}

// One attempt, on the step's own thread.
void RunExecutor::attempt(StepState& s, int64_t number, StepControl* control) {
  const workflow::StepDef& step = *s.def;
  json context;
  {
    std::lock_guard lock(mu_);
    context = context_;
  }
  store::AttemptRow row;
  row.run_id = row_.run_id;
  row.step_id = step.id;
  row.attempt = number;
  row.mode = std::string(to_string(step.mode));
  row.kind = std::string(to_string(step.kind));
  row.worker_id = s_.worker_id;
  row.inputs_digest =
      sha256_hex(sha256_hex(row_.definition) + "\n" + step.id + "\n" + context.dump());
  const auto started = Clock::now();
  StepOutcome outcome;
  if (auto st = wf_.start_attempt(row); !st) {
    outcome = StepOutcome::failed(ErrorKind::kInternal, st.error().to_string());
  } else {
    json start = {{"step", step.id},
                  {"attempt", number},
                  {"mode", row.mode},
                  {"kind", row.kind},
                  {"inputs_digest", row.inputs_digest}};
    if (!step.agent.empty()) start["agent"] = step.agent;
    event("step.start", start);
    StepRequest req;
    req.def = &def_;
    req.step = &step;
    req.project = row_.project_id;
    req.run_id = row_.run_id;
    req.user = row_.user;
    req.attempt = number;
    req.context = &context;
    req.timeout = timeout_of(step);
    // A mode's default above the policy's ceiling is lowered to it (a
    // timeout the step gave was checked when the run was loaded).
    (void)policy_->bound_timeout(req.timeout, false, "timeout");
    req.control = control;
    req.policy = policy_.get();
    req.placed = [&](const std::optional<std::string>& sandbox,
                     const std::optional<int64_t>& call) {
      warn_unless_ok(wf_.attempt_placed(row_.run_id, step.id, number, sandbox, call),
                     "recording where step " + step.id + " runs");
      json d = {{"step", step.id}, {"attempt", number}};
      if (sandbox) d["sandbox"] = *sandbox;
      if (call) d["call"] = *call;
      d["backend"] = sandboxes_->backend_name();
      event("step.sandbox", d);
    };
    json note = {{"action", s.replay.action}, {"why", s.replay.why}};  // a replay's
    auto rec = recorded_.find(step.id);
    if (s.replay.way == ReplayPlan::Way::kFromRecord && rec != recorded_.end()) {
      // A replay: the original's result, nothing asked or run again.
      outcome.outputs = rec->second.outputs;
      if (!rec->second.exchanges.is_null()) outcome.exchanges = rec->second.exchanges;
      outcome.outputs["replayed_from"] = *row_.replay_of;
      note["action"] = "answered from record";
    } else if (s.replay.way == ReplayPlan::Way::kAskFirst) {
      outcome = ask_then_run(s, req, &note);
    } else if (step.mode == ExecutionMode::kInProcess) {
      outcome = run_in_process(s_, req);
    } else {
      outcome = run_sandbox_step(s_, req, *sandboxes_);
    }
    if (row_.replay_of) {
      if (!outcome.outputs.is_object()) outcome.outputs = json::object();
      outcome.outputs["replay"] = std::move(note);
    }
  }
  if (control->stopped() && outcome.state == store::AttemptState::succeeded) {
    // Finished as it was being stopped: what it did stands.
  } else if (control->stopped() && stopping_) {
    outcome.state = store::AttemptState::interrupted;
    outcome.error_kind = ErrorKind::kInterrupted;
    outcome.error = control->why();
  }
  const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - started);
  store::AttemptEnd end;
  end.state = outcome.state;
  end.outputs_json = outcome.outputs.dump();
  if (!outcome.error.empty()) end.error = outcome.error;
  if (outcome.error_kind != ErrorKind::kNone) {
    end.error_kind = std::string(to_string(outcome.error_kind));
  }
  if (outcome.exchanges) end.exchanges_json = outcome.exchanges->dump();
  if (outcome.identity) end.identity_json = outcome.identity->dump();
  end.image_digest = outcome.image_digest;
  if (auto st = wf_.finish_attempt(row_.run_id, step.id, number, s_.worker_id, end); !st) {
    spdlog::warn("run {}: {}", row_.run_id, st.error().to_string());
    std::lock_guard lock(mu_);
    if (st.error().code == ErrorCode::kLeaseLost || st.error().code == ErrorCode::kFenced)
      lease_lost_ = true;
  }
  log_attempt(step, number, outcome, took);
  json d = {{"step", step.id},
            {"attempt", number},
            {"status", std::string(store::to_string(outcome.state))},
            {"duration_ms", took.count()},
            {"output", excerpt(outcome.outputs)}};
  if (!outcome.error.empty()) d["error"] = outcome.error;
  if (outcome.error_kind != ErrorKind::kNone) {
    d["error_kind"] = std::string(to_string(outcome.error_kind));
  }
  if (outcome.outputs.contains("exit_code") && !outcome.stood_in) {
    d["exit_code"] = outcome.outputs["exit_code"];
  }
  if (outcome.outputs.contains("artifact")) d["artifact"] = outcome.outputs["artifact"];
  if (outcome.outputs.contains("replay")) d["replay"] = outcome.outputs["replay"];
  if (auto agent = agent_summary(outcome.outputs)) d["agent"] = *agent;
  event("step.end", d);
  {
    std::lock_guard lock(mu_);
    s.outcome = std::move(outcome);
    s.done = true;
  }
  cv_.notify_all();
}

// One line per attempt as it ends, for the worker's log: what ran and how it
// ended, never its output or error text (either may hold what the step
// printed); `run show` has those.
void RunExecutor::log_attempt(const workflow::StepDef& step, int64_t number,
                              const StepOutcome& outcome, milliseconds took) const {
  std::string how(store::to_string(outcome.state));
  if (outcome.error_kind != ErrorKind::kNone) {
    how += " (" + std::string(to_string(outcome.error_kind)) + ")";
  }
  auto exit = outcome.outputs.find("exit_code");  // a stand-in's is the original's
  if (!outcome.stood_in && exit != outcome.outputs.end() && exit->is_number())
    how += ", exit " + std::to_string(exit->get<int64_t>());
  how += " in " + std::to_string(took.count()) + "ms";
  if (auto it = outcome.outputs.find("replay"); it != outcome.outputs.end() && it->is_object())
    how += " (replay: " + it->value("action", "") + ")";
  const std::string kind =
      step.kind == StepKind::kNone ? "" : "/" + std::string(to_string(step.kind));
  spdlog::info("run {} step {} attempt {} ({}{}): {}", row_.run_id, step.id, number,
               to_string(step.mode), kind, how);
}

// A replay's side-effecting step: a person approves running it again, or it
// is not run and the original's outputs stand in (run_executor.h).
StepOutcome RunExecutor::ask_then_run(const StepState& s, const StepRequest& req, json* note) {
  const workflow::StepDef& step = *s.def;
  const std::string effects = joined(s.replay.side_effects, "; ");
  Question q;  // a step approval whose request names the replay and the side effects
  q.message = "Run step " + step.id + " again in " + row_.run_id + ", a replay of run " +
              *row_.replay_of + "? It is side-effecting: " + effects +
              ". Denied or unanswered, it is not run again and the original's outputs stand in.";
  q.request = {{"workflow", def_.name},
               {"replay_of", *row_.replay_of},
               {"mode", std::string(to_string(step.mode))},
               {"side_effects", s.replay.side_effects}};
  q.within = step.timeout.count() > 0 ? step.timeout : milliseconds(std::chrono::hours(1));
  const Answer a = ask_person(s_, req, q);
  std::string why = "side-effecting: " + effects;
  if (!s.replay.why.empty()) why += "; " + s.replay.why;
  (*note)["approval"] = a.id;
  switch (a.verdict) {
    case Answer::Verdict::kApproved:
      (*note)["action"] = "re-run (approved)";
      (*note)["why"] = why + "; approval " + std::to_string(a.id) + " approved by " + a.by +
                       (a.reason.empty() ? "" : ": " + a.reason);
      return step.mode == ExecutionMode::kInProcess ? run_in_process(s_, req)
                                                    : run_sandbox_step(s_, req, *sandboxes_);
    case Answer::Verdict::kDenied:
    case Answer::Verdict::kExpired: {
      StepOutcome o;
      o.state = store::AttemptState::skipped;
      o.error_kind = ErrorKind::kApproval;
      o.stood_in = true;
      auto rec = recorded_.find(step.id);
      o.error = "not run again (" + why + "): " + a.not_approved_text(q.within) +
                (rec != recorded_.end() ? "; the original's outputs stand in"
                                        : "; the original has no outputs of it to stand in");
      if (rec != recorded_.end()) {
        o.outputs = rec->second.outputs;
        o.outputs["replayed_from"] = *row_.replay_of;
      }
      (*note)["action"] = kNotApproved;
      (*note)["why"] = o.error;
      return o;
    }
    case Answer::Verdict::kStopped: {
      StepOutcome o = StepOutcome::failed(ErrorKind::kNone, a.error);
      o.state = store::AttemptState::cancelled;
      return o;
    }
    case Answer::Verdict::kError:
      break;
  }
  return StepOutcome::failed(ErrorKind::kInternal, a.error);
}

// A finished attempt moves its step on (under mu_).
void RunExecutor::settle(StepState& s) {
  if (s.thread.joinable()) s.thread.join();
  s.done = false;
  StepOutcome o = std::move(*s.outcome);
  s.outcome.reset();
  const std::string id = s.def->id;
  if (o.stood_in) {
    // A replay did not run it: the steps after it read the original's
    // outputs (marked skipped, with the reason), or, with none, the run fails.
    s.stood_in = true;
    s.changed = false;
    context_["steps"][id] = step_view(o.outputs, "skipped", o.error);
    if (recorded_.count(id)) {
      s.status = Status::kSucceeded;
    } else {
      s.status = Status::kFailed;
      s.error = o.error;
      s.error_kind = o.error_kind;
    }
    return;
  }
  switch (o.state) {
    case store::AttemptState::succeeded:
      s.status = Status::kSucceeded;
      s.changed = row_.replay_of && differs_from_record(id, o.outputs);
      context_["steps"][id] = step_view(o.outputs, "succeeded", "");
      return;
    case store::AttemptState::cancelled:
      s.status = Status::kCancelled;
      s.error = o.error;
      return;
    case store::AttemptState::interrupted:
      s.status = Status::kPending;  // the run goes back to the queue
      return;
    default:
      break;
  }
  const workflow::RetryPolicy& retry = s.def->retry;
  if (!stopping_ && retry.retries(o.error_kind) && s.attempts < retry.attempts &&
      o.error_kind != ErrorKind::kIdentity) {
    const double wait = static_cast<double>(retry.backoff.count()) *
                        std::pow(retry.factor, static_cast<double>(s.attempts - 1));
    s.status = Status::kPending;
    s.not_before = Clock::now() + milliseconds(static_cast<int64_t>(wait));
    event("step.retry", {{"step", id},
                         {"next_attempt", s.attempts + 1},
                         {"after_ms", static_cast<int64_t>(wait)},
                         {"because", std::string(to_string(o.error_kind))}});
    return;
  }
  s.status = Status::kFailed;
  s.changed = true;
  s.error = o.error;
  s.error_kind = o.error_kind;
  context_["steps"][id] = step_view(o.outputs, "failed", o.error);
}

void RunExecutor::stop_all(const std::string& why) {
  std::vector<StepControl*> controls;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, s] : steps_) {
      if (s.status == Status::kRunning && s.control) controls.push_back(s.control.get());
    }
  }
  for (StepControl* c : controls) c->stop(why);
}

void RunExecutor::join_done() {
  std::unique_lock lock(mu_);
  for (auto& [id, s] : steps_) {
    if (s.done) settle(s);
  }
}

void RunExecutor::skip_rest(const std::string& why) {
  for (auto& [id, s] : steps_) {
    if (s.status != Status::kPending) continue;
    s.status = Status::kSkipped;
    store::AttemptEnd end;
    end.state = store::AttemptState::skipped;
    end.error = why;
    warn_unless_ok(wf_.finish_attempt(row_.run_id, id, s.attempts + 1, s_.worker_id, end),
                   "recording step " + id + " skipped");
    event("step.end",
          {{"step", id}, {"attempt", s.attempts + 1}, {"status", "skipped"}, {"error", why}});
  }
}

void RunExecutor::finish(store::WorkflowRunState state, const std::optional<std::string>& error) {
  if (sandboxes_) {
    for (const auto& id : sandboxes_->destroy_all()) s_.identity->sandbox_gone(id);
  }
  if (auto st = wf_.finish_run(row_.run_id, s_.worker_id, state, error); !st) {
    spdlog::warn("run {}: {}", row_.run_id, st.error().to_string());
    return;
  }
  json d = {{"state", std::string(store::to_string(state))}};
  if (error) d["error"] = *error;
  event("run.end", d);
  // The worker's log: the run's end, its steps counted by how they ended
  // (never the error's text: it may quote a step's output).
  std::map<std::string, int> by_status;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, st] : steps_) {
      switch (st.status) {
        case Status::kSucceeded:
          ++by_status[st.stood_in ? "not run again" : "succeeded"];
          break;
        case Status::kFailed:
          ++by_status["failed"];
          break;
        case Status::kSkipped:
        case Status::kPending:
          ++by_status["skipped"];
          break;
        case Status::kCancelled:
          ++by_status["cancelled"];
          break;
        case Status::kRunning:
          ++by_status["running"];
          break;
      }
    }
  }
  std::string counts;
  for (const auto& [status, n] : by_status) {
    counts += (counts.empty() ? "" : ", ") + std::to_string(n) + " " + status;
  }
  const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - started_);
  spdlog::info("run {} ({}) {} in {}ms: {} {}{}{}", row_.run_id, row_.workflow,
               store::to_string(state), took.count(), steps_.size(),
               steps_.size() == 1 ? "step" : "steps", counts.empty() ? "" : ": ", counts);
}

void RunExecutor::stop(const std::string& why) {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    stop_why_ = why;
  }
  cv_.notify_all();
  stop_all(why);
}

void RunExecutor::drain() {
  draining_ = true;
  cv_.notify_all();
}

void RunExecutor::run() {
  started_ = Clock::now();
  if (!load()) return;
  restore_from_store();
  event("run.start", {{"workflow", def_.name},
                      {"claims", row_.claims},
                      {"worker", s_.worker_id},
                      {"steps", def_.steps.size()}});
  const auto deadline_ms = row_.deadline_at.value_or(s_.store->clock_now() + def_.timeout.count());
  std::optional<std::string> failure;  // the first failure: no new step starts
  std::optional<std::string> cancelled;
  auto last_look = Clock::now() - std::chrono::seconds(1);
  std::unique_lock lock(mu_);
  for (;;) {
    for (auto& [id, s] : steps_) {
      if (s.done) settle(s);
    }
    if (stopping_ || lease_lost_) break;
    // The store: a cancel request, the lease (once every 250 ms).
    if (Clock::now() - last_look >= milliseconds(250)) {
      last_look = Clock::now();
      lock.unlock();
      auto r = wf_.run(row_.run_id);
      lock.lock();
      // Taken over: by another worker, or claimed again (its lease ran out
      // while this one was stalled) by another executor of this worker.
      if (r && (!r->held_by(s_.worker_id, s_.store->clock_now()) || r->claims != row_.claims)) {
        lease_lost_ = true;
        break;
      }
      if (r && r->cancel_requested && !cancelled) {
        cancelled = "cancelled: " + r->error.value_or("by request");
        lock.unlock();
        stop_all(*cancelled);
        lock.lock();
      }
    }
    if (!failure && !cancelled && s_.store->clock_now() >= deadline_ms) {
      failure = "the run's wall clock (" + format_duration(def_.timeout) + ") passed";
      lock.unlock();
      stop_all(*failure);
      lock.lock();
    }
    // Failures decide what may still start.
    for (auto& [id, s] : steps_) {
      if (s.status == Status::kFailed && !s.def->allow_failure && !failure) {
        failure = "step " + id + " failed: " + s.error;
      }
    }
    int running = 0;
    for (auto& [id, s] : steps_) running += s.status == Status::kRunning ? 1 : 0;
    bool waiting = false;  // a step that may still start later (backoff)
    if (draining_ || handoff_) {
      if (running == 0) break;
    } else if (!failure && !cancelled) {
      for (const auto& step : def_.steps) {
        StepState& s = steps_.at(step.id);
        if (s.status != Status::kPending) continue;
        bool blocked = false;
        if (!needs_met(s, &blocked)) {
          if (blocked) {
            s.status = Status::kSkipped;
            store::AttemptEnd end;
            end.state = store::AttemptState::skipped;
            end.error = "a step it needs did not succeed";
            lock.unlock();
            warn_unless_ok(
                wf_.finish_attempt(row_.run_id, step.id, s.attempts + 1, s_.worker_id, end),
                "recording step " + step.id + " skipped");
            event("step.end", {{"step", step.id}, {"status", "skipped"}, {"error", *end.error}});
            lock.lock();
          }
          continue;
        }
        if (Clock::now() < s.not_before) {
          waiting = true;
          continue;
        }
        if (running >= def_.max_parallel) {
          waiting = true;
          continue;
        }
        if (s_.settings && !labels_match(step.requires_labels, s_.settings->labels.value)) {
          handoff_ = step.requires_labels;
          event("step.handoff", {{"step", step.id},
                                 {"requires", labels_text(step.requires_labels)},
                                 {"lacks", labels_text(missing_labels(step.requires_labels,
                                                                      s_.settings->labels.value))},
                                 {"worker", s_.worker_id}});
          break;
        }
        launch(s);
        ++running;
      }
    }
    if (running == 0 && !waiting) {
      bool pending = false;
      for (auto& [id, s] : steps_) pending = pending || s.status == Status::kPending;
      if (!pending || failure || cancelled) break;
    }
    if (running == 0 && (failure || cancelled)) break;
    cv_.wait_for(lock, milliseconds(running > 0 ? 250 : 50));
  }
  // Every step thread ends before the run does.
  for (;;) {
    bool any = false;
    for (auto& [id, s] : steps_) {
      if (s.status == Status::kRunning && !s.done) any = true;
      if (s.done) settle(s);
    }
    if (!any) break;
    cv_.wait_for(lock, milliseconds(50));
  }
  if (handoff_ && !stopping_ && !lease_lost_ && !failure && !cancelled) {
    lock.unlock();
    if (sandboxes_) {
      for (const auto& id : sandboxes_->destroy_all()) s_.identity->sandbox_gone(id);
    }
    const std::string why =
        "worker " + s_.worker_id + " " + lacking_text(*handoff_, s_.settings->labels.value);
    if (auto s = wf_.hand_off_run(row_.run_id, s_.worker_id, *handoff_, why); !s) {
      spdlog::warn("run {}: handing it off: {}", row_.run_id, s.error().to_string());
    } else {
      spdlog::info("run {}: handed off ({}); its next step requires {}", row_.run_id, why,
                   labels_text(*handoff_));
    }
    return;
  }
  if (stopping_ || lease_lost_ || (draining_ && !failure && !cancelled)) {
    lock.unlock();
    if (sandboxes_) {
      for (const auto& id : sandboxes_->destroy_all()) s_.identity->sandbox_gone(id);
    }
    if (lease_lost_) spdlog::warn("run {}: this worker lost its lease; it stops here", row_.run_id);
    return;  // the worker requeues it (or another worker holds it now)
  }
  if (cancelled) {
    skip_rest(*cancelled);
    lock.unlock();
    finish(store::WorkflowRunState::cancelled, *cancelled);
    return;
  }
  if (!failure) {
    for (auto& [id, s] : steps_) {
      if (s.status == Status::kFailed && !s.def->allow_failure) {
        failure = "step " + id + " failed: " + s.error;
      }
    }
  }
  if (failure) {
    skip_rest(*failure);
    lock.unlock();
    finish(store::WorkflowRunState::failed, *failure);
    return;
  }
  lock.unlock();
  finish(store::WorkflowRunState::succeeded, std::nullopt);
}

}  // namespace rf::worker
