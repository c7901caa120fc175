// Asking a person about a step (worker side, issues 12 and 40): an approval
// step's question, and a replay's before it runs a side-effecting step again
// (an approval of kind step too, whose request names `replay_of` and the
// `side_effects`).
// The request goes to the approvals queue (`ringfence approvals`,
// /v1/approvals); the step waits for the answer, its deadline, or a stop. A
// step asks once per run: a resumed run's step waits on the request it made
// before (unless that one expired).
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "worker/step_context.h"

namespace rf::worker {

struct Question {
  std::string kind = "step";  // the approval's kind
  std::string message;
  nlohmann::json request = nlohmann::json::object();  // its other fields
  std::chrono::milliseconds within{0};                // then it counts as denied
};

struct Answer {
  enum class Verdict { kApproved, kDenied, kExpired, kStopped, kError };
  Verdict verdict = Verdict::kError;
  int64_t id = 0;
  std::string by, reason;
  std::string error;  // kStopped: why; kError: what failed

  // "approval 3 was denied by alice: not now", "approval 3 got no answer within
  // 1h, so it counts as denied"; for a step's error.
  std::string not_approved_text(std::chrono::milliseconds within) const;
};

// Asks (or finds the request this step made before) and waits.
Answer ask_person(const WorkflowServices& services, const StepRequest& request, const Question& q);

}  // namespace rf::worker
