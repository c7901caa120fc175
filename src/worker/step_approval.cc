#include "worker/step_approval.h"

#include "core/log.h"
#include "core/units.h"
#include "store/workflow_store.h"

namespace rf::worker {

using nlohmann::json;

std::string Answer::not_approved_text(std::chrono::milliseconds within) const {
  if (verdict == Verdict::kDenied) {
    return "approval " + std::to_string(id) + " was denied by " + (by.empty() ? "?" : by) +
           (reason.empty() ? "" : ": " + reason);
  }
  return "approval " + std::to_string(id) + " got no answer within " + format_duration(within) +
         ", so it counts as denied";
}

Answer ask_person(const WorkflowServices& s, const StepRequest& r, const Question& q) {
  store::WorkflowStore wf(*s.store);
  Answer out;
  auto existing = wf.approval_for_step(r.run_id, r.step->id);
  if (!existing) {
    out.error = existing.error().to_string();
    return out;
  }
  if (*existing && (**existing).kind == q.kind &&
      (**existing).state != store::ApprovalState::expired) {
    out.id = (**existing).id;
  } else {
    store::ApprovalRow a;
    a.project_id = r.project;
    a.run_id = r.run_id;
    a.step_id = r.step->id;
    a.kind = q.kind;
    json request = q.request.is_object() ? q.request : json::object();
    request["message"] = q.message;
    a.request_json = request.dump();
    a.expires_at = s.store->clock_now() + q.within.count();
    auto made = wf.request_approval(a);
    if (!made) {
      out.error = made.error().to_string();
      return out;
    }
    out.id = *made;
  }
  store::Event e;
  e.kind = "step.approval";
  e.project_id = r.project;
  e.run_id = r.run_id;
  e.worker_id = s.worker_id;
  e.detail_json =
      json{{"step", r.step->id}, {"approval", out.id}, {"kind", q.kind}, {"message", q.message}}
          .dump();
  warn_unless_ok(s.store->append_event(e), "recording approval request");
  const auto deadline = std::chrono::steady_clock::now() + q.within;
  for (;;) {
    const uint32_t seen = s.store->run_version(r.run_id);
    auto a = wf.approval(out.id);
    if (!a) {
      out.verdict = Answer::Verdict::kError;
      out.error = a.error().to_string();
      return out;
    }
    if (a->state == store::ApprovalState::approved || a->state == store::ApprovalState::denied) {
      out.verdict = a->state == store::ApprovalState::approved ? Answer::Verdict::kApproved
                                                               : Answer::Verdict::kDenied;
      out.by = a->decided_by.value_or("");
      out.reason = a->reason.value_or("");
      return out;
    }
    if (a->state == store::ApprovalState::expired || std::chrono::steady_clock::now() >= deadline) {
      (void)wf.expire_approval(out.id);
      out.verdict = Answer::Verdict::kExpired;
      return out;
    }
    if (r.control->stopped()) {
      (void)wf.expire_approval(out.id);
      out.verdict = Answer::Verdict::kStopped;
      out.error = r.control->why();
      return out;
    }
    s.store->wait_for_run(r.run_id, seen, std::chrono::milliseconds(200));
  }
}

}  // namespace rf::worker
