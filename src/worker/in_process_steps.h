// in_process steps (worker side, issue 12): the declarative kinds that run in
// the worker's own process. None runs user code or a shell here:
//   template  mustache over the run's values
//   json      pointer, patch and schema over a JSON text
//   http      one request, through the same egress policy as a sandbox
//   llm       one model call (OpenAI chat / responses, Anthropic messages)
//   approval  waits for a human (`ringfence approvals approve|deny ID`)
//   sleep     waits
#pragma once

#include "worker/step_context.h"

namespace rf::worker {

StepOutcome run_in_process(const WorkflowServices& services, const StepRequest& request);

}  // namespace rf::worker
