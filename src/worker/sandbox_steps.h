// Steps that run in a sandbox (worker side, issue 12):
//   sandboxed        a command (run: a shell line, argv: a list) with an empty
//                    environment: the step's plain env only
//   identity_scoped  the same, or an agent, with the values of the identity
//                    cascade in that sandbox's environment only
//   cli_agent        a CLI coding agent (agents/*.yaml adapters) with identity,
//                    then its artifact (git, s3, local, the store)
//   cli_agent_jit    the same, and the agent may ask for the keys its profiles
//                    deliver by jit: rf-cred, answered by the JIT policy (issue 13)
// Each command is a tool call of the run (started held by this worker, so its
// output streams into the store as any call's, and `run show` lists it);
// output of a sandbox that received identity values is redacted.
#pragma once

#include "worker/step_context.h"
#include "worker/step_sandboxes.h"

namespace rf::worker {

StepOutcome run_sandbox_step(const WorkflowServices& services, const StepRequest& request,
                             StepSandboxes& sandboxes);

// The worker's spec (`base`) with the step's sandbox settings; the error
// names the setting. `memory_floor`: an agent's minimum.
Result<SandboxSpec> step_spec(const SandboxSpec& base, const workflow::StepDef& step,
                              std::chrono::milliseconds timeout, uint64_t memory_floor = 0);

}  // namespace rf::worker
