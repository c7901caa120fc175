#include "worker/in_process_steps.h"

#include <thread>

#include "core/log.h"
#include "core/units.h"
#include "in_process/json_step.h"
#include "store/workflow_store.h"

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
  json parsed = json::parse(*out, nullptr, false);
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

// Asks a human, then waits for the answer, the step's timeout, or a stop. A
// resumed run's step waits on the request it made before.
StepOutcome approval_step(const WorkflowServices& s, const StepRequest& r) {
  store::WorkflowStore wf(*s.store);
  auto message = r.render(r.step->approval_message.empty()
                              ? "Approve step " + r.step->id + " of run {{run.id}}?"
                              : r.step->approval_message);
  if (!message) return StepOutcome::failed(ErrorKind::kTemplate, message.error().to_string());
  auto existing = wf.approval_for_step(r.run_id, r.step->id);
  if (!existing) return StepOutcome::failed(ErrorKind::kInternal, existing.error().to_string());
  int64_t id = 0;
  if (*existing && (**existing).state != store::ApprovalState::expired) {
    id = (**existing).id;
  } else {
    store::ApprovalRow a;
    a.project_id = r.project;
    a.run_id = r.run_id;
    a.step_id = r.step->id;
    a.kind = "step";
    a.request_json =
        json{{"message", *message}, {"workflow", r.def->name}, {"approvers", r.step->approvers}}
            .dump();
    a.expires_at = s.store->clock_now() + r.timeout.count();
    auto made = wf.request_approval(a);
    if (!made) return StepOutcome::failed(ErrorKind::kInternal, made.error().to_string());
    id = *made;
  }
  store::Event e;
  e.kind = "step.approval";
  e.project_id = r.project;
  e.run_id = r.run_id;
  e.worker_id = s.worker_id;
  e.detail_json = json{{"step", r.step->id}, {"approval", id}, {"message", *message}}.dump();
  warn_unless_ok(s.store->append_event(e), "recording approval request");
  const auto deadline = std::chrono::steady_clock::now() + r.timeout;
  for (;;) {
    const uint32_t seen = s.store->run_version(r.run_id);
    auto a = wf.approval(id);
    if (!a) return StepOutcome::failed(ErrorKind::kInternal, a.error().to_string());
    if (a->state == store::ApprovalState::approved) {
      StepOutcome o;
      o.outputs["output"] = "approved";
      o.outputs["json"] = {{"approved", true},
                           {"approval", id},
                           {"by", a->decided_by.value_or("")},
                           {"reason", a->reason.value_or("")}};
      return o;
    }
    if (a->state == store::ApprovalState::denied) {
      StepOutcome o = StepOutcome::failed(
          ErrorKind::kApproval, "approval " + std::to_string(id) + " was denied by " +
                                    a->decided_by.value_or("?") +
                                    (a->reason && !a->reason->empty() ? ": " + *a->reason : ""));
      o.outputs["json"] = {
          {"approved", false}, {"approval", id}, {"by", a->decided_by.value_or("")}};
      return o;
    }
    if (a->state == store::ApprovalState::expired || std::chrono::steady_clock::now() >= deadline) {
      (void)wf.expire_approval(id);
      return StepOutcome::failed(ErrorKind::kApproval,
                                 "approval " + std::to_string(id) + " got no answer within " +
                                     format_duration(r.timeout) + ", so it counts as denied");
    }
    if (r.control->stopped()) {
      (void)wf.expire_approval(id);
      StepOutcome o = StepOutcome::failed(ErrorKind::kNone, r.control->why());
      o.state = store::AttemptState::cancelled;
      return o;
    }
    s.store->wait_for_run(r.run_id, seen, std::chrono::milliseconds(200));
  }
}

}  // namespace

bool StepControl::sleep_for(std::chrono::milliseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
    if (stopped()) return false;
    std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(
        std::chrono::milliseconds(20), std::chrono::duration_cast<std::chrono::milliseconds>(
                                           until - std::chrono::steady_clock::now()) +
                                           std::chrono::milliseconds(1)));
  }
  return !stopped();
}

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
    case StepKind::kLlm:
      return StepOutcome::failed(
          ErrorKind::kInternal,
          std::string(to_string(request.step->kind)) + " steps are not available in this build");
    case StepKind::kNone:
      break;
  }
  return StepOutcome::failed(ErrorKind::kInternal, "the step has no kind");
}

}  // namespace rf::worker
