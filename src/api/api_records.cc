// The API's routes over the store's records (issue 14): workflow runs
// (start, list, show, cancel, replay, their events as SSE), approvals (list,
// show, approve, deny) and the console's live snapshot. Everything is the
// token's project's; another project's run or approval answers exactly as
// an unknown one does. A run's user is its token's (policy/principal.h), and
// its workflow is checked against the project's operator policy before it
// is queued.
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "api/api.h"
#include "api/json_answers.h"
#include "core/json_input.h"
#include "core/log.h"
#include "policy/load.h"
#include "policy/workflow_checks.h"
#include "store/audit_log.h"
#include "store/run_names.h"
#include "store/sandbox_lifetimes.h"
#include "store/workflow_store.h"
#include "workflow/parse.h"

namespace rf::api {
namespace http = boost::beast::http;
using nlohmann::json;

namespace {

// A run's id as its project named it (store/run_names.h).
std::string shown_id(store::Store& store, const std::string& run_id) {
  auto name = store::RunNames(store).name_of(run_id);
  return name ? *name : run_id;
}

json run_json(store::Store& store, const store::WorkflowRunRow& r) {
  return {{"id", shown_id(store, r.run_id)},
          {"project", r.project_id},
          {"workflow", r.workflow},
          {"state", std::string(store::to_string(r.state))},
          {"user", r.user},
          {"error", opt(r.error)},
          {"replay_of", r.replay_of ? json(shown_id(store, *r.replay_of)) : json(nullptr)},
          {"cancel_requested", r.cancel_requested},
          {"enqueued_at", r.enqueued_at},
          {"started_at", opt(r.started_at)},
          {"finished_at", opt(r.finished_at)}};
}

json attempt_json(const store::AttemptRow& a) {
  json j = {{"step", a.step_id},
            {"attempt", a.attempt},
            {"mode", a.mode},
            {"kind", a.kind},
            {"state", std::string(store::to_string(a.state))},
            {"sandbox", opt(a.sandbox_id)},
            {"error", opt(a.error)},
            {"started_at", a.started_at},
            {"finished_at", opt(a.finished_at)}};
  if (a.outputs_json) j["outputs"] = parse_json_or_discarded(*a.outputs_json);
  if (j.contains("outputs") && j["outputs"].is_object() && j["outputs"].contains("replay")) {
    j["replay"] = j["outputs"]["replay"];
  }
  return j;
}

json run_with_steps(store::Store& store, store::WorkflowStore& wf, const store::WorkflowRunRow& r) {
  json j = run_json(store, r);
  json steps = json::array();
  auto attempts = wf.attempts(r.run_id);
  if (attempts) {
    for (const auto& a : *attempts) steps.push_back(attempt_json(a));
  }
  j["steps"] = steps;
  if (r.replay_of && attempts) {
    // What the replay did with each step (docs/workflows.md, "Replay").
    json lines = json::array();
    for (const auto& l : store::replay_report(*attempts)) {
      lines.push_back({{"step", l.step}, {"action", l.action}, {"why", l.why}});
    }
    j["replay"] = {{"of", shown_id(store, *r.replay_of)}, {"steps", std::move(lines)}};
  }
  return j;
}

json approval_json(store::Store& store, const store::ApprovalRow& a) {
  return {{"id", a.id},
          {"project", a.project_id},
          {"run", a.run_id ? json(shown_id(store, *a.run_id)) : json(nullptr)},
          {"step", opt(a.step_id)},
          {"kind", a.kind},
          {"state", std::string(store::to_string(a.state))},
          {"request", parse_json_or_discarded(a.request_json)},
          {"created_at", a.created_at},
          {"expires_at", opt(a.expires_at)},
          {"decided_by", opt(a.decided_by)},
          {"reason", opt(a.reason)}};
}

// A run's inputs, as JSON, typed as the workflow declares them; defaults fill the rest.
Result<json> typed_inputs(const workflow::WorkflowDef& def, const json& given) {
  json out = json::object();
  if (!given.is_null() && !given.is_object()) return make_error("inputs", "expected an object");
  if (given.is_object()) {
    for (auto it = given.begin(); it != given.end(); ++it) {
      const workflow::InputDef* in = def.input(it.key());
      if (in == nullptr) {
        return make_error("inputs." + it.key(), "workflow " + def.name + " has no such input");
      }
      const json& v = it.value();
      const bool ok =
          (in->type == "string" && v.is_string()) || (in->type == "number" && v.is_number()) ||
          (in->type == "boolean" && v.is_boolean()) || (in->type == "object" && v.is_object()) ||
          (in->type == "array" && v.is_array());
      if (!ok) return make_error("inputs." + it.key(), "expected a " + in->type);
      out[it.key()] = v;
    }
  }
  for (const auto& in : def.inputs) {
    if (out.contains(in.name)) continue;
    if (in.default_value) {
      out[in.name] = *in.default_value;
    } else if (in.required) {
      return make_error("inputs." + in.name, "required by workflow " + def.name);
    }
  }
  return out;
}

// A string field of a body: its value, "" when absent; a 400 naming the
// field (and nullopt) when it is there and not a string.
std::optional<std::string> string_field(const json& body, const char* key, Responder& out) {
  if (!body.contains(key) || body[key].is_null()) return std::string();
  if (!body[key].is_string()) {
    fail(out, 400, key, "expected a string");
    return std::nullopt;
  }
  return body[key].get<std::string>();
}

// The refusal of a principal or a policy (403), else a 400.
void refuse(Responder& out, const Error& e) {
  fail(out, e.code == ErrorCode::kDenied ? 403 : 400, e.where, e.message);
}

}  // namespace

// POST /v1/workflows/runs {"workflow": "<YAML or JSON text>", "inputs": {...}}
void Api::runs_start(Ctx& c) {
  auto body = body_object(c.request, c.out);
  if (!body) return;
  if (!body->contains("workflow") || !(*body)["workflow"].is_string()) {
    return fail(c.out, 400, "workflow", "expected the workflow file's text (YAML or JSON)");
  }
  if (!only_fields(*body, {"workflow", "inputs", "user", "run_id"}, c.out)) return;
  auto def = workflow::load_workflow_text((*body)["workflow"].get<std::string>(), "workflow");
  if (!def) return fail(c.out, 400, "workflow", def.error().to_string());
  auto inputs = typed_inputs(*def, body->value("inputs", json(nullptr)));
  if (!inputs) return fail(c.out, 400, inputs.error().where, inputs.error().message);
  auto named_user = string_field(*body, "user", c.out);
  if (!named_user) return;
  auto run_id = string_field(*body, "run_id", c.out);
  if (!run_id) return;
  // The user is the token's, never the body's; so is each step's.
  auto user = c.who.user_for(*named_user, "user");
  if (!user) {
    ++denied_;
    return refuse(c.out, user.error());
  }
  for (const auto& step : def->steps) {
    if (!step.identity || step.identity->user.empty()) continue;
    auto u = c.who.user_for(step.identity->user, step.where.to_string() + ".identity.user");
    if (!u) {
      ++denied_;
      return refuse(c.out, u.error());
    }
  }
  auto policy = policy::load_policy(store_, c.who.project);
  if (!policy) return fail(c.out, 503, "", policy.error().to_string());
  policy->reserve(sandboxes_.reserved());
  if (auto s = policy::check_workflow(*policy, *def); !s) {
    ++denied_;
    return refuse(c.out, s.error());
  }
  if (!store_.project(c.who.project)) {
    (void)store_.ensure_project(c.who.project, store::Environment::development);
  }
  // A name another project's run has is this project's own all the same.
  std::string id_of_name;
  if (!run_id->empty() && !valid_run_name(*run_id, "run_id", c.out)) return;
  if (!run_id->empty()) {
    auto claimed = store::RunNames(store_).claim(c.who.project, *run_id);
    if (!claimed) return fail(c.out, 503, "", claimed.error().to_string());
    id_of_name = *claimed;
  }
  store::NewWorkflowRun run;
  run.run_id = id_of_name;
  run.project = c.who.project;
  run.workflow = def->name;
  run.file = "api";
  run.definition = def->source;
  run.inputs_json = inputs->dump();
  run.user = *user;
  run.timeout = def->timeout;
  store::WorkflowStore wf(store_);
  auto id = wf.enqueue_run(run);
  if (!id) {
    return fail(c.out, 409, "run_id", with_name(id.error().to_string(), id_of_name, *run_id));
  }
  const std::string shown = run_id->empty() ? *id : *run_id;
  answer(c.out, 201, {{"id", shown}, {"state", "queued"}}, {{"Location", "/v1/runs/" + shown}});
}

void Api::runs_list(Ctx& c) {
  auto project = project_of(c);
  if (!project) return;
  store::WorkflowStore wf(store_);
  auto rows = wf.runs(*project, 100);
  if (!rows) return fail(c.out, 500, "", rows.error().to_string());
  json list = json::array();
  for (const auto& r : *rows) list.push_back(run_json(store_, r));
  answer(c.out, 200, {{"runs", list}});
}

namespace {

// The run the caller's project named `name`; otherwise a 404 as for an
// unknown run (another project's r1 is not this one's).
std::optional<store::WorkflowRunRow> own_run(store::Store& store, store::WorkflowStore& wf,
                                             const std::string& name, const std::string& project,
                                             Responder& out) {
  auto id = store::RunNames(store).find(project, name);
  std::optional<store::WorkflowRunRow> found;
  if (id && *id) {
    if (auto run = wf.run(**id); run && run->project_id == project) found = std::move(*run);
  }
  if (!found) fail(out, 404, "id", "no run " + name);
  return found;
}

}  // namespace

void Api::run_get(Ctx& c) {
  store::WorkflowStore wf(store_);
  auto run = own_run(store_, wf, c.param("id"), c.who.project, c.out);
  if (run) answer(c.out, 200, run_with_steps(store_, wf, *run));
}

void Api::run_replay(Ctx& c) {
  store::WorkflowStore wf(store_);
  const std::string& id = c.param("id");
  auto run = own_run(store_, wf, id, c.who.project, c.out);
  if (!run) return;
  if (!run->ended()) return fail(c.out, 409, "id", "run " + id + " has not ended yet");
  // A replay runs as the run's user, under today's policy: a token may replay
  // only what it could start.
  if (auto user = c.who.user_for(run->user, "user"); !user) {
    ++denied_;
    return refuse(c.out, user.error());
  }
  auto def = workflow::load_workflow_text(run->definition, run->file);
  if (!def) return fail(c.out, 409, "id", "run " + id + ": " + def.error().to_string());
  auto policy = policy::load_policy(store_, c.who.project);
  if (!policy) return fail(c.out, 503, "", policy.error().to_string());
  policy->reserve(sandboxes_.reserved());
  if (auto s = policy::check_workflow(*policy, *def); !s) {
    ++denied_;
    return refuse(c.out, s.error());
  }
  auto replay = wf.enqueue_run(run->replay());
  if (!replay) return fail(c.out, 500, "", replay.error().to_string());
  answer(c.out, 201, {{"id", *replay}, {"state", "queued"}, {"replay_of", id}},
         {{"Location", "/v1/runs/" + *replay}});
}

void Api::run_cancel(Ctx& c) {
  store::WorkflowStore wf(store_);
  const std::string& id = c.param("id");
  auto run = own_run(store_, wf, id, c.who.project, c.out);
  if (!run) return;
  auto body = body_object(c.request, c.out, /*empty_is_object=*/true);
  if (!body || !only_fields(*body, {"reason"}, c.out)) return;
  auto why = string_field(*body, "reason", c.out);
  if (!why) return;
  auto state = wf.request_cancel(run->run_id, why->empty() ? "cancelled over the API" : *why);
  if (!state) return fail(c.out, 409, "", state.error().to_string());
  answer(c.out, 200, {{"id", id}, {"state", std::string(store::to_string(*state))}});
}

// The run's state and steps as they change, until it ends.
void Api::run_events(Ctx& c) {
  store::WorkflowStore wf(store_);
  auto run = own_run(store_, wf, c.param("id"), c.who.project, c.out);
  if (!run) return;
  const std::string id = run->run_id;
  if (!c.out.begin_stream(200, "text/event-stream")) return;
  std::string last;
  while (true) {
    auto now = wf.run(id);
    if (!now) break;
    const std::string text = run_with_steps(store_, wf, *now).dump();
    if (text != last) {
      if (!c.out.write_chunk("event: run\ndata: " + text + "\n\n")) return;
      last = text;
    }
    if (now->ended()) break;
    const uint32_t seen = store_.run_version(id);
    store_.wait_for_run(id, seen, std::chrono::milliseconds(500));
    if (c.out.client_gone()) return;
  }
  (void)c.out.write_chunk("event: end\ndata: {}\n\n");
  (void)c.out.end_stream();
}

void Api::approvals_list(Ctx& c) {
  auto project = project_of(c);
  if (!project) return;
  store::WorkflowStore wf(store_);
  auto pending = wf.pending_approvals(*project);
  if (!pending) return fail(c.out, 500, "", pending.error().to_string());
  json list = json::array();
  for (const auto& a : *pending) list.push_back(approval_json(store_, a));
  answer(c.out, 200, {{"approvals", list}});
}

namespace {

// The approval, if the caller may see its project; otherwise a 404 as for
// an unknown approval.
std::optional<store::ApprovalRow> own_approval(store::WorkflowStore& wf, const std::string& text,
                                               const policy::Principal& who, Responder& out) {
  char* end = nullptr;
  const long long id = std::strtoll(text.c_str(), &end, 10);
  std::optional<store::ApprovalRow> found;
  if (!text.empty() && *end == '\0') {
    if (auto a = wf.approval(id); a && who.sees_project(a->project_id)) found = std::move(*a);
  }
  if (!found) fail(out, 404, "id", "no approval " + text);
  return found;
}

}  // namespace

void Api::approval_get(Ctx& c) {
  store::WorkflowStore wf(store_);
  if (auto a = own_approval(wf, c.param("id"), c.who, c.out))
    answer(c.out, 200, approval_json(store_, *a));
}

void Api::approval_approve(Ctx& c) { approval_decide(c, true); }
void Api::approval_deny(Ctx& c) { approval_decide(c, false); }

void Api::approval_decide(Ctx& c, bool approve) {
  store::WorkflowStore wf(store_);
  auto a = own_approval(wf, c.param("id"), c.who, c.out);
  if (!a) return;
  auto body = body_object(c.request, c.out, /*empty_is_object=*/true);
  if (!body || !only_fields(*body, {"reason"}, c.out)) return;
  auto reason = string_field(*body, "reason", c.out);
  if (!reason) return;
  if (!approve && reason->empty()) return fail(c.out, 400, "reason", "a denial needs a reason");
  // Who answers is the token, never a name the body claims.
  const std::string by = c.who.actor();
  const json req = parse_json_or_discarded(a->request_json);
  if (req.is_object() && req.contains("approvers") && req["approvers"].is_array() &&
      !req["approvers"].empty()) {
    bool listed = false;
    for (const auto& p : req["approvers"]) {
      listed = listed || (p.is_string() && (p.get<std::string>() == c.who.token_name ||
                                            p.get<std::string>() == c.who.token_id));
    }
    if (!listed) {
      ++denied_;
      return fail(c.out, 403, "",
                  by + " is not one of its approvers (" + req["approvers"].dump() + ")");
    }
  }
  if (auto s = wf.decide_approval(a->id, approve, by, *reason); !s) {
    return fail(c.out, 409, "", s.error().to_string());
  }
  auto after = wf.approval(a->id);
  answer(c.out, 200, after ? approval_json(store_, *after) : json{{"id", a->id}});
}

json Api::console_snapshot(const std::string& project) {
  // Every live sandbox of the project, whichever door made it: the API's,
  // a run's, a call's, the workers' (the store records them all).
  json sandboxes = json::array();
  // An API sandbox's name and expiry (issue 41).
  auto lifetimes = store::SandboxLifetimes(store_).of_live(project);
  // What each uses now, from its worker's last heartbeat (worker/sandbox_usage.h).
  json in_use = json::object();
  if (auto workers = store_.workers()) {
    for (const auto& w : *workers) {
      if (w.state != store::WorkerState::running) continue;
      const json m = parse_json_or_discarded(w.metrics_json);
      if (m.is_object() && m.contains("sandboxes") && m["sandboxes"].is_object()) {
        in_use.update(m["sandboxes"]);
      }
    }
  }
  if (auto live = store_.live_sandboxes()) {
    for (const auto& s : *live) {
      if (s.project_id != project) continue;
      const json spec = s.spec_json ? parse_json_or_discarded(*s.spec_json) : json();
      const json limits = spec.is_object() ? spec.value("limits", json::object()) : json::object();
      const bool api = s.mode == "api";
      sandboxes.push_back(
          {{"id", s.id},
           {"backend", s.backend},
           {"project", project},
           {"run", !api && s.run_id ? json(shown_id(store_, *s.run_id)) : json(nullptr)},
           {"mode", s.mode},
           {"worker", s.worker_id.value_or("")},
           {"created_at", s.created_at},
           {"memory_limit", limits.value("memory", "")},
           {"cpu_limit", limits.contains("cpu") ? limits["cpu"] : json("")}});
      if (auto it = in_use.find(s.id); it != in_use.end() && it->is_object()) {
        json& row = sandboxes.back();
        if (it->contains("memory_bytes")) row["memory_bytes"] = (*it)["memory_bytes"];
        if (it->contains("cpu_percent")) row["cpu_percent"] = (*it)["cpu_percent"];
      }
      if (lifetimes) {
        if (auto it = lifetimes->find(s.id); it != lifetimes->end()) {
          json& row = sandboxes.back();
          if (!it->second.name.empty()) row["name"] = it->second.name;
          if (it->second.expires_at) row["expires_at"] = *it->second.expires_at;
        }
      }
    }
  }
  store::WorkflowStore wf(store_);
  json runs = json::array();
  if (auto rows = wf.runs(project, 20)) {
    for (const auto& r : *rows) runs.push_back(run_with_steps(store_, wf, r));
  }
  json approvals = json::array();
  if (auto pending = wf.pending_approvals(project)) {
    for (const auto& a : *pending) approvals.push_back(approval_json(store_, a));
  }
  // The latest calls, whichever door made them: the API's, a run's, a
  // worker's (issue 41 item 6), with what each took.
  json calls = json::array();
  if (auto rows = store_.recent_calls(project, 30)) {
    for (const auto& v : *rows) {
      std::string argv;
      for (const auto& a : v.argv) argv += (argv.empty() ? "" : " ") + a;
      if (argv.size() > 200) argv = argv.substr(0, 200) + "...";
      json row = {{"id", v.id},
                  {"argv", argv},
                  {"state", std::string(store::to_string(v.state))},
                  {"exit_code", opt(v.exit_code)},
                  {"worker", opt(v.worker_id)},
                  {"enqueued_at", v.enqueued_at},
                  {"finished_at", opt(v.finished_at)}};
      const json r = v.result_json ? parse_json_or_discarded(*v.result_json) : json();
      if (r.is_object()) {
        for (const char* k : {"sandbox_id", "wall_ms", "cpu_user_ms", "cpu_system_ms",
                              "peak_memory_bytes", "limit"}) {
          if (r.contains(k)) row[k] = r[k];
        }
      }
      calls.push_back(std::move(row));
    }
  }
  // The audit events themselves (the latest of this project's), not only
  // the chain's verdict.
  json events = json::array();
  {
    store::AuditLog log(store_);
    store::AuditFilter filter;
    filter.project_id = project;
    // Among the log's last 500 (every one of them: the list is oldest
    // first, and its bound is the window's), read at each snapshot.
    constexpr int kWindow = 500;
    if (auto size = log.size(); size && *size > kWindow) filter.after_seq = *size - kWindow;
    filter.limit = kWindow;
    if (auto list = log.list(filter)) {
      const size_t from = list->size() > 30 ? list->size() - 30 : 0;
      for (size_t i = list->size(); i-- > from;) events.push_back(audit_event_json((*list)[i]));
    }
  }
  json audit = {{"intact", nullptr}, {"events", events}};
  if (auto intact = audit_intact()) audit["intact"] = *intact;
  return {{"project", project}, {"sandboxes", sandboxes}, {"calls", calls},
          {"runs", runs},       {"approvals", approvals}, {"audit", audit}};
}

// A snapshot now, then whenever it changes (checked every 250 ms).
void Api::console_events(Ctx& c) {
  auto project = project_of(c);
  if (!project) return;
  if (!c.out.begin_stream(200, "text/event-stream")) return;
  std::string last;
  while (!c.out.client_gone()) {
    const std::string text = console_snapshot(*project).dump();
    if (text != last) {
      if (!c.out.write_chunk("event: snapshot\ndata: " + text + "\n\n")) return;
      last = text;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
}

}  // namespace rf::api
