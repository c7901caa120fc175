// A cli_agent step's artifact (worker side, issue 12), sent after the agent
// succeeded:
//   git    the workspace pushed over smart HTTP from inside the sandbox, with
//          the token from identity (artifact.token_key); the commit comes back
//   s3     the workspace as a tar, PUT (multipart when large) with SigV4, the
//          keys from identity; the endpoint must be in the step's allow rules
//   local  the workspace copied under the worker's --artifact-root
//   none   the workspace as a tar in the store (`ringfence run artifact`)
// Every artifact is recorded in the store (artifacts) with its reference.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "redact/patterns.h"
#include "sandbox/sandbox.h"
#include "worker/step_context.h"

namespace rf::worker {

struct ArtifactJob {
  const WorkflowServices& services;
  const StepRequest& request;
  const workflow::ArtifactDef& def;
  std::shared_ptr<Sandbox> sandbox;
  const std::map<std::string, std::string>& identity_env;
  std::shared_ptr<const redact::Patterns> patterns;
  const SandboxSpec& spec;
  // Runs a command in the sandbox as a new call of the run (its output
  // streamed and redacted); returns the exit code and what it printed.
  std::function<Result<std::pair<int, std::string>>(const std::vector<std::string>& argv,
                                                    const std::map<std::string, std::string>& env,
                                                    const std::string& cwd)>
      run;
};

// The artifact's reference ({"dest", "url", "commit", ...}); errors name the
// destination and never hold a token.
Result<nlohmann::json> deliver_artifact(const ArtifactJob& job);

}  // namespace rf::worker
