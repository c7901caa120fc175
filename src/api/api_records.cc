// The API's routes over the store's records (issue 14): workflow runs
// (start, list, show, cancel, their events as SSE), approvals (list, approve,
// deny), the audit log (list, verify), and the console's live snapshot.
// Everything is the token's project's; another project's run or approval
// answers 404.
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "api/api.h"
#include "api/exec_json.h"
#include "api/json_answers.h"
#include "core/log.h"
#include "core/units.h"
#include "identity/audit_events.h"
#include "identity/cascade.h"
#include "proof/proof_log.h"
#include "store/audit_log.h"
#include "store/identity_store.h"
#include "store/workflow_store.h"
#include "workflow/parse.h"

namespace rf::api {
namespace http = boost::beast::http;
using nlohmann::json;

namespace {

json opt(const std::optional<int64_t>& v) { return v ? json(*v) : json(nullptr); }
json opt(const std::optional<std::string>& v) { return v ? json(*v) : json(nullptr); }

json run_json(const store::WorkflowRunRow& r) {
  return {{"id", r.run_id},
          {"project", r.project_id},
          {"workflow", r.workflow},
          {"state", std::string(store::to_string(r.state))},
          {"user", r.user},
          {"error", opt(r.error)},
          {"replay_of", opt(r.replay_of)},
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
  if (a.outputs_json) j["outputs"] = json::parse(*a.outputs_json, nullptr, false);
  return j;
}

json approval_json(const store::ApprovalRow& a) {
  return {{"id", a.id},
          {"project", a.project_id},
          {"run", opt(a.run_id)},
          {"step", opt(a.step_id)},
          {"kind", a.kind},
          {"state", std::string(store::to_string(a.state))},
          {"request", json::parse(a.request_json, nullptr, false)},
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

}  // namespace

json Api::console_snapshot(const std::string& project) {
  json sandboxes = json::array();
  for (const auto& s : sandboxes_.list(project)) {
    const auto age = std::chrono::duration_cast<std::chrono::seconds>(
        std::chrono::system_clock::now() - s->created);
    sandboxes.push_back({{"id", s->id()},
                         {"backend", std::string(to_string(s->sandbox->spec().backend))},
                         {"project", s->project},
                         {"run", nullptr},
                         {"mode", "api"},
                         {"age_s", age.count()},
                         {"memory", s->sandbox->spec().limits.memory_bytes},
                         {"calls_running", s->running.load()}});
  }
  store::WorkflowStore wf(store_);
  json runs = json::array();
  if (auto rows = wf.runs(project, 20)) {
    for (const auto& r : *rows) {
      json j = run_json(r);
      json steps = json::array();
      if (auto attempts = wf.attempts(r.run_id)) {
        for (const auto& a : *attempts) steps.push_back(attempt_json(a));
      }
      j["steps"] = steps;
      runs.push_back(j);
    }
  }
  json approvals = json::array();
  if (auto pending = wf.pending_approvals(project)) {
    for (const auto& a : *pending) approvals.push_back(approval_json(a));
  }
  json audit = {{"intact", nullptr}};
  if (auto verdict = store::AuditLog(store_).verify()) {
    audit = {{"intact", verdict->intact}, {"events", verdict->events}, {"reason", verdict->reason}};
  }
  return {{"project", project},
          {"sandboxes", sandboxes},
          {"runs", runs},
          {"approvals", approvals},
          {"audit", audit}};
}

void Api::route_records(const Caller& caller, const Target& t, const Request& request,
                        Responder& responder) {
  const auto& seg = t.segments;
  const http::verb method = request.method();
  auto not_found = [&] { fail(responder, 404, "", "no such route"); };
  store::WorkflowStore wf(store_);

  // POST /v1/workflows/runs {"workflow": "<YAML or JSON text>", "inputs": {...}}
  if (seg[1] == "workflows") {
    if (seg.size() != 3 || seg[2] != "runs") return not_found();
    if (method != http::verb::post) return fail(responder, 405, "", "allowed: POST");
    const json body = json::parse(request.body(), nullptr, false);
    if (body.is_discarded() || !body.is_object()) {
      return fail(responder, 400, "body", "expected a JSON object");
    }
    if (!body.contains("workflow") || !body["workflow"].is_string()) {
      return fail(responder, 400, "workflow", "expected the workflow file's text (YAML or JSON)");
    }
    auto def = workflow::load_workflow_text(body["workflow"].get<std::string>(), "workflow");
    if (!def) return fail(responder, 400, "workflow", def.error().to_string());
    auto inputs = typed_inputs(*def, body.value("inputs", json(nullptr)));
    if (!inputs) return fail(responder, 400, inputs.error().where, inputs.error().message);
    if (!store_.project(caller.project)) {
      (void)store_.ensure_project(caller.project, store::Environment::development);
    }
    store::NewWorkflowRun run;
    run.run_id = body.value("run_id", "");
    run.project = caller.project;
    run.workflow = def->name;
    run.file = "api";
    run.definition = def->source;
    run.inputs_json = inputs->dump();
    run.user = body.value("user", "");
    run.timeout = def->timeout;
    auto id = wf.enqueue_run(run);
    if (!id) return fail(responder, 409, "run_id", id.error().to_string());
    answer(responder, 201, {{"id", *id}, {"state", "queued"}}, {{"Location", "/v1/runs/" + *id}});
    return;
  }

  if (seg[1] == "runs") {
    if (seg.size() == 2) {
      if (method != http::verb::get) return fail(responder, 405, "", "allowed: GET");
      json list = json::array();
      auto rows = wf.runs(caller.project, 100);
      if (!rows) return fail(responder, 500, "", rows.error().to_string());
      for (const auto& r : *rows) list.push_back(run_json(r));
      return answer(responder, 200, {{"runs", list}});
    }
    // "/v1/runs/ID", "/v1/runs/ID:cancel", "/v1/runs/ID/events"
    std::string id = seg[2], action;
    if (const auto colon = id.find(':'); colon != std::string::npos) {
      action = id.substr(colon + 1);
      id = id.substr(0, colon);
    }
    auto run = wf.run(id);
    if (!run || run->project_id != caller.project)
      return fail(responder, 404, "id", "no run " + id);
    if (seg.size() == 3 && action.empty()) {
      if (method != http::verb::get) return fail(responder, 405, "", "allowed: GET");
      json j = run_json(*run);
      json steps = json::array();
      if (auto attempts = wf.attempts(id)) {
        for (const auto& a : *attempts) steps.push_back(attempt_json(a));
      }
      j["steps"] = steps;
      return answer(responder, 200, j);
    }
    if (seg.size() == 3 && action == "replay") {
      if (method != http::verb::post) return fail(responder, 405, "", "allowed: POST");
      if (!run->ended()) return fail(responder, 409, "id", "run " + id + " has not ended yet");
      auto replay = wf.enqueue_run(run->replay());
      if (!replay) return fail(responder, 500, "", replay.error().to_string());
      return answer(responder, 201, {{"id", *replay}, {"state", "queued"}, {"replay_of", id}},
                    {{"Location", "/v1/runs/" + *replay}});
    }
    if (seg.size() == 3 && action == "cancel") {
      if (method != http::verb::post) return fail(responder, 405, "", "allowed: POST");
      const json body = json::parse(request.body().empty() ? "{}" : request.body(), nullptr, false);
      const std::string why = body.is_object() ? body.value("reason", "cancelled over the API")
                                               : "cancelled over the API";
      auto state = wf.request_cancel(id, why);
      if (!state) return fail(responder, 409, "", state.error().to_string());
      return answer(responder, 200, {{"id", id}, {"state", std::string(store::to_string(*state))}});
    }
    if (seg.size() == 4 && seg[3] == "events" && action.empty()) {
      if (method != http::verb::get) return fail(responder, 405, "", "allowed: GET");
      // The run's state and steps as they change, until it ends.
      if (!responder.begin_stream(200, "text/event-stream")) return;
      std::string last;
      while (true) {
        auto now = wf.run(id);
        if (!now) break;
        json j = run_json(*now);
        json steps = json::array();
        if (auto attempts = wf.attempts(id)) {
          for (const auto& a : *attempts) steps.push_back(attempt_json(a));
        }
        j["steps"] = steps;
        const std::string text = j.dump();
        if (text != last) {
          if (!responder.write_chunk("event: run\ndata: " + text + "\n\n")) return;
          last = text;
        }
        if (now->ended()) break;
        const uint32_t seen = store_.run_version(id);
        store_.wait_for_run(id, seen, std::chrono::milliseconds(500));
        if (responder.client_gone()) return;
      }
      (void)responder.write_chunk("event: end\ndata: {}\n\n");
      (void)responder.end_stream();
      return;
    }
    return not_found();
  }

  if (seg[1] == "calls") {
    route_calls(caller, t, request, responder);
    return;
  }

  if (seg[1] == "approvals") {
    if (seg.size() == 2) {
      if (method != http::verb::get) return fail(responder, 405, "", "allowed: GET");
      auto pending = wf.pending_approvals(caller.project);
      if (!pending) return fail(responder, 500, "", pending.error().to_string());
      json list = json::array();
      for (const auto& a : *pending) list.push_back(approval_json(a));
      return answer(responder, 200, {{"approvals", list}});
    }
    // "/v1/approvals/ID:approve", "/v1/approvals/ID:deny"
    std::string id_text = seg[2], action;
    if (const auto colon = id_text.find(':'); colon != std::string::npos) {
      action = id_text.substr(colon + 1);
      id_text = id_text.substr(0, colon);
    }
    char* end = nullptr;
    const long long id = std::strtoll(id_text.c_str(), &end, 10);
    if (id_text.empty() || *end != '\0')
      return fail(responder, 404, "id", "no approval " + id_text);
    auto a = wf.approval(id);
    if (!a || a->project_id != caller.project) {
      return fail(responder, 404, "id", "no approval " + id_text);
    }
    if (seg.size() == 3 && action.empty()) {
      if (method != http::verb::get) return fail(responder, 405, "", "allowed: GET");
      return answer(responder, 200, approval_json(*a));
    }
    if (seg.size() != 3 || (action != "approve" && action != "deny")) return not_found();
    if (method != http::verb::post) return fail(responder, 405, "", "allowed: POST");
    const json body = json::parse(request.body().empty() ? "{}" : request.body(), nullptr, false);
    if (!body.is_object()) return fail(responder, 400, "body", "expected a JSON object");
    const std::string reason = body.value("reason", "");
    if (action == "deny" && reason.empty()) {
      return fail(responder, 400, "reason", "a denial needs a reason");
    }
    // Who answers is the token, never a name the body claims.
    const std::string by =
        "token " + (caller.token_name.empty() ? caller.token_id
                                              : caller.token_name + " (" + caller.token_id + ")");
    const json req = json::parse(a->request_json, nullptr, false);
    if (req.is_object() && req.contains("approvers") && req["approvers"].is_array() &&
        !req["approvers"].empty()) {
      bool listed = false;
      for (const auto& p : req["approvers"]) {
        listed = listed || (p.is_string() && (p.get<std::string>() == caller.token_name ||
                                              p.get<std::string>() == caller.token_id));
      }
      if (!listed) {
        return fail(responder, 403, "",
                    by + " is not one of its approvers (" + req["approvers"].dump() + ")");
      }
    }
    if (auto s = wf.decide_approval(id, action == "approve", by, reason); !s) {
      return fail(responder, 409, "", s.error().to_string());
    }
    auto after = wf.approval(id);
    return answer(responder, 200, after ? approval_json(*after) : json{{"id", id}});
  }

  if (seg[1] == "audit" || seg[1] == "audit:verify") {
    if (method != http::verb::get) return fail(responder, 405, "", "allowed: GET");
    store::AuditLog log(store_);
    if (seg[1] == "audit:verify") {
      auto v = log.verify();
      if (!v) return fail(responder, 500, "", v.error().to_string());
      return answer(responder, 200,
                    {{"intact", v->intact},
                     {"events", v->events},
                     {"first_bad", opt(v->first_bad)},
                     {"reason", v->reason}});
    }
    store::AuditFilter filter;
    filter.project_id = caller.project;
    // Whole numbers in range, or a 400 naming the parameter: never read as
    // 0 or clamped into something the caller did not ask for.
    if (auto it = t.query.find("after"); it != t.query.end()) {
      const auto after = parse_whole_number(it->second);
      if (!after || *after > static_cast<uint64_t>(INT64_MAX)) {
        return fail(
            responder, 400, "after",
            "after \"" + it->second + "\": expected an event's seq (a whole number, 0 or more)");
      }
      filter.after_seq = static_cast<int64_t>(*after);
    }
    if (auto it = t.query.find("limit"); it != t.query.end()) {
      const auto limit = parse_whole_number(it->second);
      if (!limit || *limit < 1 || *limit > 1000) {
        return fail(responder, 400, "limit",
                    "limit \"" + it->second + "\": expected a whole number from 1 to 1000");
      }
      filter.limit = static_cast<int>(*limit);
    }
    auto events = log.list(filter);
    if (!events) return fail(responder, 500, "", events.error().to_string());
    json list = json::array();
    for (const auto& e : *events) {
      json j = {{"seq", e.seq},
                {"at", e.at},
                {"kind", e.kind},
                {"actor", e.actor},
                {"run", opt(e.run_id)},
                {"call", opt(e.call_id)},
                {"sandbox", opt(e.sandbox_id)},
                {"detail", json::parse(e.detail_json, nullptr, false)},
                {"hash", e.hash}};
      list.push_back(j);
    }
    return answer(responder, 200, {{"events", list}});
  }

  if (seg[1] == "console" && seg.size() == 3 && seg[2] == "events") {
    if (method != http::verb::get) return fail(responder, 405, "", "allowed: GET");
    // A snapshot now, then whenever it changes (checked every 250 ms).
    if (!responder.begin_stream(200, "text/event-stream")) return;
    std::string last;
    while (!responder.client_gone()) {
      const std::string text = console_snapshot(caller.project).dump();
      if (text != last) {
        if (!responder.write_chunk("event: snapshot\ndata: " + text + "\n\n")) return;
        last = text;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    return;
  }
  not_found();
}

// POST /v1/calls: a tool call for the workers, as `ringfence call` sends it;
// GET /v1/calls/{id}: its state and output (already redacted by the worker),
// or with Accept: text/event-stream, the output as it comes, then `end`.
void Api::route_calls(const Caller& caller, const Target& t, const Request& request,
                      Responder& responder) {
  const auto& seg = t.segments;
  const http::verb method = request.method();
  if (seg.size() == 2) {
    if (method != http::verb::post) return fail(responder, 405, "", "allowed: POST");
    const json body = json::parse(request.body(), nullptr, false);
    if (body.is_discarded() || !body.is_object()) {
      return fail(responder, 400, "body", "expected a JSON object");
    }
    json exec = body;
    for (const char* k : {"run", "identity", "requires"}) exec.erase(k);
    auto parsed = parse_exec(exec);
    if (auto* e = std::get_if<ServiceError>(&parsed))
      return fail(responder, e->status, e->field, e->message);
    const ExecCall& ec = std::get<ExecCall>(parsed);
    if (!body.contains("run") || !body["run"].is_string() ||
        body["run"].get<std::string>().empty()) {
      return fail(responder, 400, "run", "expected the run's id (a string)");
    }
    store::NewCall call;
    call.project = caller.project;
    call.run = body["run"];
    call.argv = ec.argv;
    call.env = ec.env;
    call.cwd = body.contains("cwd") ? ec.cwd : "";
    call.stdin_bytes = ec.stdin_data;
    if (ec.timeout.count() > 0) call.timeout = ec.timeout;
    // "requires": {"labels": {"zone": "b"}}: only a worker with them takes it.
    if (body.contains("requires")) {
      const json& req = body["requires"];
      if (!req.is_object()) return fail(responder, 400, "requires", "expected {\"labels\": {...}}");
      for (auto it = req.begin(); it != req.end(); ++it) {
        if (it.key() != "labels")
          return fail(responder, 400, "requires." + it.key(), "unknown field");
      }
      if (req.contains("labels")) {
        if (!req["labels"].is_object())
          return fail(responder, 400, "requires.labels", "expected an object of strings");
        auto labels = store::labels_from_json(req["labels"].dump());
        if (!labels) {
          // labels_from_json names a bad entry "label KEY".
          const std::string& at = labels.error().where;
          const std::string where =
              at.starts_with("label ") ? "requires.labels." + at.substr(6) : "requires.labels";
          return fail(responder, 400, where, labels.error().message);
        }
        call.requires_labels = std::move(*labels);
      }
    }
    if (body.contains("identity")) {
      const json& id = body["identity"];
      if (!id.is_object())
        return fail(responder, 400, "identity", "expected {\"workflow\", \"user\"}");
      for (auto it = id.begin(); it != id.end(); ++it) {
        if (it.key() != "workflow" && it.key() != "user") {
          return fail(responder, 400, "identity." + it.key(), "unknown field");
        }
        if (!it.value().is_string())
          return fail(responder, 400, "identity." + it.key(), "expected a string");
      }
      call.identity = store::IdentityScope{id.value("workflow", ""), id.value("user", "")};
      // Checked now, fail closed naming the key and secret; again at sandbox start.
      store::IdentityStore rows(store_);
      const identity::CascadeRequest wanted{caller.project, call.identity->workflow,
                                            call.identity->user};
      auto plan = identity::plan_cascade(rows, wanted);
      if (!plan) {
        identity::audit_refusal(store_, "api " + caller.token_id, wanted, plan.error().to_string(),
                                {call.run, {}, {}});
        return fail(responder, 403, "identity", "call refused: " + plan.error().to_string());
      }
    }
    if (!store_.project(caller.project)) {
      (void)store_.ensure_project(caller.project, store::Environment::development);
    }
    auto id = store_.enqueue_call(call);
    if (!id) return fail(responder, 409, "run", id.error().to_string());
    return answer(responder, 201, {{"id", *id}, {"state", "queued"}},
                  {{"Location", "/v1/calls/" + std::to_string(*id)}});
  }
  if (seg.size() != 3) return fail(responder, 404, "", "no such route");
  if (method != http::verb::get) return fail(responder, 405, "", "allowed: GET");
  char* end = nullptr;
  const long long id = std::strtoll(seg[2].c_str(), &end, 10);
  auto view = seg[2].empty() || *end != '\0' ? Result<store::CallView>(make_error("", ""))
                                             : store_.call(id);
  if (!view || view->project_id != caller.project) {
    return fail(responder, 404, "id", "no call " + seg[2]);
  }
  auto call_json = [&](const store::CallView& v) {
    json j = {{"id", v.id},
              {"run", v.run_id},
              {"state", std::string(store::to_string(v.state))},
              {"exit_code", opt(v.exit_code)},
              {"error", opt(v.error)},
              {"enqueued_at", v.enqueued_at},
              {"finished_at", opt(v.finished_at)}};
    if (v.result_json) j["result"] = json::parse(*v.result_json, nullptr, false);
    return j;
  };
  auto ended = [](store::CallState s) {
    return s != store::CallState::queued && s != store::CallState::claimed &&
           s != store::CallState::running;
  };
  if (request[http::field::accept].find("text/event-stream") == boost::beast::string_view::npos) {
    std::string out, err;
    int64_t seq = 0;
    while (true) {
      auto chunks = store_.output(id, seq);
      if (!chunks || chunks->empty()) break;
      for (const auto& c : *chunks) {
        (c.stream == store::Stream::out ? out : err) += c.data;
        seq = c.seq;
      }
    }
    json j = call_json(*view);
    put_bytes(j, "stdout", out);
    put_bytes(j, "stderr", err);
    return answer(responder, 200, j);
  }
  if (!responder.begin_stream(200, "text/event-stream")) return;
  int64_t seq = 0;
  while (true) {
    const uint32_t seen = store_.call_version(id);
    auto now = store_.call(id);  // the state first: output written before it is then complete
    auto chunks = store_.output(id, seq);
    if (chunks && !chunks->empty()) {
      for (const auto& c : *chunks) {
        json j;
        put_bytes(j, "data", c.data);
        if (!responder.write_chunk(std::string("event: ") +
                                   (c.stream == store::Stream::out ? "stdout" : "stderr") +
                                   "\ndata: " + j.dump() + "\n\n")) {
          return;
        }
        seq = c.seq;
      }
      continue;
    }
    if (!now) break;
    if (ended(now->state)) {
      (void)responder.write_chunk("event: end\ndata: " + call_json(*now).dump() + "\n\n");
      break;
    }
    store_.wait_for_call(id, seen, std::chrono::milliseconds(500));
    if (responder.client_gone()) return;
  }
  (void)responder.end_stream();
}

void Api::route_audit_proofs(const Caller& caller, const Target& t, const Request& request,
                             Responder& responder) {
  (void)caller;
  const auto& seg = t.segments;
  if (request.method() != http::verb::get) return fail(responder, 405, "", "allowed: GET");
  if (options_.signing_key == nullptr)
    return fail(responder, 503, "", "this server has no signing key");
  proof::ProofLog log(store_, *options_.signing_key, proof::default_origin());
  auto number = [&](const char* name) -> std::optional<int64_t> {
    const auto it = t.query.find(name);
    if (it == t.query.end()) return std::nullopt;
    char* end = nullptr;
    const long long v = std::strtoll(it->second.c_str(), &end, 10);
    if (end == it->second.c_str() || *end != '\0' || v < 0) return -1;
    return v;
  };
  Result<json> out = make_error("", "");
  if (seg.size() == 3 && seg[2] == "checkpoint") {
    auto note = log.checkpoint();
    if (!note) return fail(responder, 500, "", note.error().to_string());
    return answer(responder, 200, {{"checkpoint", *note}});
  } else if (seg.size() == 4 && seg[2] == "proofs" && seg[3] == "inclusion") {
    const auto seq = number("seq");
    if (!seq || *seq <= 0) return fail(responder, 400, "seq", "a positive event number is needed");
    out = log.inclusion(*seq);
    if (!out && out.error().code == ErrorCode::kNotFound)
      return fail(responder, 404, "seq", out.error().to_string());
  } else if (seg.size() == 4 && seg[2] == "proofs" && seg[3] == "consistency") {
    const auto from = number("from"), to = number("to");
    if (!from || *from <= 0) return fail(responder, 400, "from", "a positive tree size is needed");
    if (to && *to < 0) return fail(responder, 400, "to", "a tree size is needed");
    out = log.consistency(static_cast<uint64_t>(*from), static_cast<uint64_t>(to.value_or(0)));
    if (!out) return fail(responder, 400, "from", out.error().to_string());
  } else {
    return fail(responder, 404, "", "no such resource");
  }
  if (!out) return fail(responder, 500, "", out.error().to_string());
  return answer(responder, 200, *out);
}

}  // namespace rf::api
