// A workflow as plain data (issue 12): what `workflow validate` checks and the
// worker runs. Parsed from YAML or JSON by parse.h, checked by validate.h;
// nothing here runs anything.
//
// Every step names its execution mode (docs/workflows.md):
//   in_process       in the worker, declarative kinds only (template, json,
//                    http, llm, approval, sleep): never user code, never a shell
//   sandboxed        a command in a sandbox with an empty environment
//   identity_scoped  a command (or an agent) in a sandbox, with identity values
//   cli_agent        a CLI coding agent in a sandbox, with identity, and an artifact
//   cli_agent_jit    the same, and the agent may ask for credentials (issue 13)
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/labels.h"
#include "core/result.h"

namespace rf::workflow {

enum class ExecutionMode { kInProcess, kSandboxed, kIdentityScoped, kCliAgent, kCliAgentJit };
enum class StepKind { kNone, kTemplate, kJson, kHttp, kLlm, kApproval, kSleep };
enum class ArtifactDest { kGit, kS3, kLocal, kStore };

std::string_view to_string(ExecutionMode m);
std::string_view to_string(StepKind k);
std::string_view to_string(ArtifactDest d);
Result<ExecutionMode> parse_execution_mode(std::string_view text);
bool runs_in_sandbox(ExecutionMode m);
bool takes_identity(ExecutionMode m);
bool runs_agent(ExecutionMode m);  // cli_agent, cli_agent_jit

// Where a value sits in the workflow file, for errors: "file:line: key".
struct Where {
  std::string file;
  int line = 0;
  std::string key;  // dotted: "steps[1].sandbox.mem"
  std::string to_string() const;
};

// Why an attempt failed, for `retry.on` (docs/workflows.md, "Retries").
enum class ErrorKind {
  kNone,
  kExit,         // the command or agent exited non-zero
  kTimeout,      // the step's timeout
  kSandbox,      // the sandbox could not be had or set up
  kNetwork,      // an upstream was unreachable, or answered 5xx or 429
  kHttp,         // an upstream answered another error status
  kModel,        // the model's answer could not be used
  kIdentity,     // identity refused (revoked, unknown): never retried
  kArtifact,     // the artifact could not be delivered
  kInterrupted,  // the worker died while the attempt ran (retry.on_interrupt)
  kTemplate,     // a template could not be rendered: never retried
  kApproval,     // a human denied it, or nobody answered in time
  kInternal,
};
std::string_view to_string(ErrorKind k);
Result<ErrorKind> parse_error_kind(std::string_view text);

struct InputDef {
  std::string name;
  std::string type = "string";  // string | number | boolean | object | array
  bool required = true;         // false when a default is given
  std::optional<nlohmann::json> default_value;
  std::string description;
  Where where;
};

struct RetryPolicy {
  int attempts = 1;  // in all, the first included
  std::chrono::milliseconds backoff{1000};
  double factor = 2.0;  // backoff grows by this after each attempt
  std::vector<ErrorKind> on{ErrorKind::kSandbox, ErrorKind::kNetwork};
  // A worker death mid-attempt may start another attempt. With it, attempts
  // defaults to 2 (one more), unless the file gives attempts.
  bool on_interrupt = false;
  bool retries(ErrorKind k) const;
  // Why attempt `attempt`, interrupted, is not run again (for the step's
  // error): "not run again: set retry.on_interrupt: true to allow it", or,
  // with on_interrupt, that it was the last of retry.attempts.
  std::string interrupted_not_run_again(int attempt) const;
};

// An in_process llm step's model, and the key: `key_env` names an
// environment key the worker has (its own environment, or the step's identity).
struct ModelDef {
  std::string api;  // openai_chat | openai_responses | anthropic_messages
  std::string base_url;
  std::string model;
  std::string key_env;
  int max_tokens = 1024;
  std::optional<double> temperature;
};

// A step's sandbox: the worker's spec with these changed.
struct SandboxDef {
  std::string mode;   // per_tool (default: a sandbox for this step alone) | per_run
  std::string image;  // "" = the worker's
  std::optional<uint64_t> memory_bytes;
  std::optional<double> cpus;
  std::optional<uint64_t> pids;
  std::optional<uint64_t> disk_bytes;
  std::string network;  // "" (none, or proxy when allow is given) | none | proxy | host
  std::vector<std::string> allow;
  Where where;
};

struct IdentityDef {
  std::string workflow;  // "" = no workflow level
  std::string user;      // "" = the run's user (workflow run --user)
};

struct ArtifactDef {
  ArtifactDest dest = ArtifactDest::kStore;
  std::string path;  // the workspace path to send ("" = /workspace); local: the target under
                     // --artifact-root
  // git
  std::string url, branch = "main", token_key, message;
  // s3
  std::string endpoint, bucket, key, region = "us-east-1", access_key_key = "AWS_ACCESS_KEY_ID",
                                     secret_key_key = "AWS_SECRET_ACCESS_KEY", session_token_key;
  uint64_t max_bytes = 256ull << 20;
  Where where;
};

struct StepDef {
  std::string id;
  Where where;
  std::vector<std::string> needs;
  ExecutionMode mode = ExecutionMode::kInProcess;
  StepKind kind = StepKind::kNone;

  // in_process kinds
  std::string template_text;  // template
  nlohmann::json json_spec;   // json: {input, pointer, patch, schema}
  nlohmann::json http_spec;   // http: {method, url, headers, body, allow}
  std::optional<ModelDef> model;
  std::string system_prompt;              // llm
  std::string approval_message;           // approval (it waits up to the step's timeout)
  std::vector<std::string> approvers;     // approval: who may answer (empty: anyone)
  std::chrono::milliseconds duration{0};  // sleep

  // sandbox steps
  std::string run;                // a shell command (sandboxed, identity_scoped)
  std::vector<std::string> argv;  // or an argv
  std::string prompt;             // llm, cli_agent
  std::string agent;              // claude-code | codex | a path to an adapter file
  std::optional<IdentityDef> identity;
  std::optional<SandboxDef> sandbox;
  std::map<std::string, std::string> env;  // plain, non-secret values
  std::optional<ArtifactDef> artifact;

  std::chrono::milliseconds timeout{0};  // 0 = the default for its mode
  RetryPolicy retry;
  // requires: {labels: {...}}: the step runs on a worker with these labels
  // (core/labels.h); a worker without them hands the run to one that has them.
  Labels requires_labels;
  bool allow_failure = false;  // the run goes on (and may succeed) when this step fails

  // The keys the file gave this step, with their lines: what validate checks
  // against the mode and kind.
  std::map<std::string, int> keys;
};

// Why running `step` may change something outside its sandbox and the store,
// one reason each, as a person reads them; empty: running it again changes
// nothing outside. A replay runs such a step again only with a person's
// approval (docs/workflows.md, "Replay"). Side-effecting: a step with the
// run's identity (identity_scoped, cli_agent, cli_agent_jit), an http step
// whose method is not GET or HEAD, and an artifact sent to git, S3 or a host
// path (dest none stays in the store).
std::vector<std::string> side_effects(const StepDef& step);

struct WorkflowDef {
  std::string name;
  std::string file;    // as given, for errors
  std::string source;  // the file's text, stored with each run
  std::string description;
  std::vector<InputDef> inputs;
  std::vector<StepDef> steps;                   // in file order
  std::chrono::milliseconds timeout{3600'000};  // the whole run's wall clock
  int max_parallel = 4;                         // steps running at once

  const StepDef* step(std::string_view id) const;
  const InputDef* input(std::string_view name) const;
};

}  // namespace rf::workflow
