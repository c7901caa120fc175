// A workflow against a project's operator policy (issue 39), step by step:
// each step's execution mode and in_process kind, its sandbox's network,
// allow rules and limits, its timeout, an http step's allow rules, an llm
// step's base URL (an IP literal there is an egress rule of its own) and
// the worker environment variable its key would come from. The door that
// takes a run checks it first; the worker checks it again before the run's
// first step (a run queued before the policy changed, or by another door).
#pragma once

#include "core/result.h"
#include "policy/operator_policy.h"
#include "workflow/definition.h"

namespace rf::policy {

// The first step that the policy does not allow, with its file, line and key.
Status check_workflow(const OperatorPolicy& policy, const workflow::WorkflowDef& def);

// The egress rule an llm step's base URL stands for ("127.0.0.1:9"), when its
// host is an IP literal; "" for a name (which the proxy's address check
// keeps to public space).
std::string base_url_rule(const std::string& base_url);

}  // namespace rf::policy
