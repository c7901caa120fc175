#include "worker/in_process_steps.h"

#include <sodium.h>

#include <thread>

#include "core/json_input.h"
#include "core/log.h"
#include "core/units.h"
#include "in_process/http_step.h"
#include "in_process/json_step.h"
#include "redact/stream_redactor.h"
#include "store/workflow_store.h"
#include "worker/step_approval.h"

namespace rf::worker {
namespace {

using nlohmann::json;
using workflow::ErrorKind;
using workflow::StepKind;

// A step's result text: a string stays itself, anything else its JSON.
std::string text_of(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

StepOutcome template_step(const StepRequest& r) {
  auto out = r.render(r.step->template_text);
  if (!out) return StepOutcome::failed(ErrorKind::kTemplate, out.error().to_string());
  StepOutcome o;
  o.outputs["output"] = *out;
  json parsed = rf::parse_json_or_discarded(*out);
  if (!parsed.is_discarded()) o.outputs["json"] = std::move(parsed);
  return o;
}

StepOutcome json_step(const StepRequest& r) {
  const json& spec = r.step->json_spec;
  in_process::JsonStepSpec js;
  if (spec.contains("input")) {
    auto text = r.render(spec["input"].get<std::string>());
    if (!text) return StepOutcome::failed(ErrorKind::kTemplate, text.error().to_string());
    js.input_text = std::move(*text);
  } else if (spec.contains("input_value")) {
    js.input = spec["input_value"];
  }
  if (spec.contains("patch")) js.patch = spec["patch"];
  if (spec.contains("pointer")) js.pointer = spec["pointer"].get<std::string>();
  if (spec.contains("schema")) js.schema = spec["schema"];
  auto value = in_process::run_json_step(js);
  if (!value) return StepOutcome::failed(ErrorKind::kModel, value.error().to_string());
  StepOutcome o;
  o.outputs["output"] = text_of(*value);
  o.outputs["json"] = std::move(*value);
  return o;
}

StepOutcome sleep_step(const StepRequest& r) {
  if (!r.control->sleep_for(r.step->duration)) {
    StepOutcome o = StepOutcome::failed(ErrorKind::kNone, r.control->why());
    o.state = store::AttemptState::cancelled;
    return o;
  }
  StepOutcome o;
  o.outputs["output"] = "slept " + format_duration(r.step->duration);
  return o;
}

// Asks a human (step_approval.h), then waits for the answer, the step's
// timeout, or a stop. A replay asks again: an approval is never answered from
// the record.
StepOutcome approval_step(const WorkflowServices& s, const StepRequest& r) {
  auto message = r.render(r.step->approval_message.empty()
                              ? "Approve step " + r.step->id + " of run {{run.id}}?"
                              : r.step->approval_message);
  if (!message) return StepOutcome::failed(ErrorKind::kTemplate, message.error().to_string());
  Question q;
  q.kind = "step";
  q.message = *message;
  q.request = {{"workflow", r.def->name}, {"approvers", r.step->approvers}};
  q.within = r.timeout;
  const Answer a = ask_person(s, r, q);
  switch (a.verdict) {
    case Answer::Verdict::kApproved: {
      StepOutcome o;
      o.outputs["output"] = "approved";
      o.outputs["json"] = {
          {"approved", true}, {"approval", a.id}, {"by", a.by}, {"reason", a.reason}};
      return o;
    }
    case Answer::Verdict::kDenied: {
      StepOutcome o = StepOutcome::failed(ErrorKind::kApproval, a.not_approved_text(r.timeout));
      o.outputs["json"] = {{"approved", false}, {"approval", a.id}, {"by", a.by}};
      return o;
    }
    case Answer::Verdict::kExpired:
      return StepOutcome::failed(ErrorKind::kApproval, a.not_approved_text(r.timeout));
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

// The outputs of an http or llm answer.
StepOutcome answered(const in_process::StepAnswer& a) {
  StepOutcome o;
  o.outputs["output"] = a.output;
  if (a.json) o.outputs["json"] = *a.json;
  if (a.status != 0) o.outputs["status_code"] = a.status;
  o.exchanges = json::array({a.exchange});
  return o;
}

Result<std::string> rendered(const StepRequest& r, const json& spec, const char* key) {
  if (!spec.contains(key)) return std::string();
  return r.render(spec[key].get<std::string>());
}

// Every string in a JSON value, rendered.
Result<json> render_json(const StepRequest& r, const json& v) {
  if (v.is_string()) {
    auto s = r.render(v.get<std::string>());
    if (!s) return s.take_error();
    return json(*s);
  }
  if (v.is_array() || v.is_object()) {
    json out = v;
    for (auto it = out.begin(); it != out.end(); ++it) {
      auto sub = render_json(r, *it);
      if (!sub) return sub.take_error();
      *it = std::move(*sub);
    }
    return out;
  }
  return v;
}

StepOutcome http_step(const WorkflowServices& s, const StepRequest& r) {
  const json& spec = r.step->http_spec;
  in_process::HttpStepSpec h;
  h.method = spec.value("method", "GET");
  auto url = rendered(r, spec, "url");
  if (!url) return StepOutcome::failed(ErrorKind::kTemplate, "url: " + url.error().to_string());
  h.url = *url;
  if (spec.contains("headers")) {
    for (const auto& [k, v] : spec["headers"].items()) {
      auto value = r.render(v.get<std::string>());
      if (!value)
        return StepOutcome::failed(ErrorKind::kTemplate,
                                   "headers." + k + ": " + value.error().to_string());
      h.headers.emplace_back(k, *value);
    }
  }
  if (spec.contains("body")) {
    auto body = rendered(r, spec, "body");
    if (!body)
      return StepOutcome::failed(ErrorKind::kTemplate, "body: " + body.error().to_string());
    h.body = *body;
  } else if (spec.contains("body_json")) {
    auto body = render_json(r, spec["body_json"]);
    if (!body)
      return StepOutcome::failed(ErrorKind::kTemplate, "body: " + body.error().to_string());
    h.body = body->dump();
    h.headers.emplace_back("Content-Type", "application/json");
  }
  if (spec.contains("allow")) h.allow = spec["allow"].get<std::vector<std::string>>();
  // Loaded runs were checked whole; this is the request the worker makes.
  if (auto allowed = r.policy->check_egress_rules(h.allow, "http.allow"); !allowed) {
    return StepOutcome::failed(ErrorKind::kHttp, allowed.error().to_string());
  }
  h.resolve = s.resolve;
  h.timeout = r.timeout;
  bool retryable = false;
  auto a = in_process::run_http_step(h, &retryable);
  if (!a) {
    return StepOutcome::failed(retryable ? ErrorKind::kNetwork : ErrorKind::kHttp,
                               a.error().to_string());
  }
  return answered(*a);
}

StepOutcome llm_step(const WorkflowServices& s, const StepRequest& r) {
  const workflow::ModelDef& m = *r.step->model;
  in_process::LlmStepSpec l;
  l.api = m.api;
  l.base_url = m.base_url;
  l.model = m.model;
  l.max_tokens = m.max_tokens;
  l.temperature = m.temperature;
  auto prompt = r.render(r.step->prompt);
  if (!prompt)
    return StepOutcome::failed(ErrorKind::kTemplate, "prompt: " + prompt.error().to_string());
  l.prompt = *prompt;
  auto system = r.render(r.step->system_prompt);
  if (!system)
    return StepOutcome::failed(ErrorKind::kTemplate, "system: " + system.error().to_string());
  l.system = *system;
  // The key: from the step's identity when it names one, else the worker's environment.
  std::optional<json> identity;
  if (!m.key_env.empty()) {
    if (r.step->identity) {
      store::IdentityScope scope{r.step->identity->workflow,
                                 r.step->identity->user.empty() ? r.user : r.step->identity->user};
      auto p = s.identity->resolve_for_worker(calls::IdentityUse{0, r.project, r.run_id, scope});
      if (!p) return StepOutcome::failed(ErrorKind::kIdentity, p.error().to_string());
      // The worker's own request, in no sandbox: a gateway or proxy entry's
      // real value, not the placeholder a sandbox would get.
      const auto& values =
          p->resolved.edge.count(m.key_env) != 0 ? p->resolved.edge : p->resolved.env;
      auto it = values.find(m.key_env);
      if (it == values.end()) {
        return StepOutcome::failed(ErrorKind::kIdentity,
                                   "model.key_env " + m.key_env + " is not in the step's identity");
      }
      l.key = std::string(it->second.reveal());
      json keys = json::array();
      for (const auto& e : p->resolved.plan.entries) {
        if (e.key == m.key_env)
          keys.push_back({{"key", e.key}, {"secret", e.secret}, {"version", e.version}});
      }
      identity = json{{"keys", keys}};
    } else if (auto allowed = r.policy->check_worker_env(m.key_env, "model.key_env"); !allowed) {
      // The worker's own environment (cloud keys, VAULT_TOKEN) is never a
      // tenant's to name: only what the operator listed.
      return StepOutcome::failed(ErrorKind::kIdentity, allowed.error().to_string());
    } else if (const char* v = std::getenv(m.key_env.c_str()); v != nullptr && *v != '\0') {
      l.key = v;
    } else {
      return StepOutcome::failed(ErrorKind::kIdentity,
                                 "model.key_env " + m.key_env +
                                     " is not set in the worker's environment (or give the step "
                                     "identity: to take it from a profile)");
    }
  }
  l.resolve = s.resolve;
  l.timeout = r.timeout;
  bool retryable = false;
  auto a = in_process::run_llm_step(l, &retryable);
  sodium_memzero(l.key.data(), l.key.size());
  if (!a) {
    return StepOutcome::failed(retryable ? ErrorKind::kNetwork : ErrorKind::kModel,
                               a.error().to_string());
  }
  StepOutcome o = answered(*a);
  o.identity = std::move(identity);
  return o;
}

}  // namespace

StepOutcome run_in_process(const WorkflowServices& services, const StepRequest& request) {
  switch (request.step->kind) {
    case StepKind::kTemplate:
      return template_step(request);
    case StepKind::kJson:
      return json_step(request);
    case StepKind::kSleep:
      return sleep_step(request);
    case StepKind::kApproval:
      return approval_step(services, request);
    case StepKind::kHttp:
      return http_step(services, request);
    case StepKind::kLlm:
      return llm_step(services, request);
    case StepKind::kNone:
      break;
  }
  return StepOutcome::failed(ErrorKind::kInternal, "the step has no kind");
}

}  // namespace rf::worker
