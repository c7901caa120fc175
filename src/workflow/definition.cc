#include "workflow/definition.h"

#include <algorithm>
#include <array>

namespace rf::workflow {
namespace {

constexpr std::array<std::pair<ExecutionMode, std::string_view>, 5> kModes{{
    {ExecutionMode::kInProcess, "in_process"},
    {ExecutionMode::kSandboxed, "sandboxed"},
    {ExecutionMode::kIdentityScoped, "identity_scoped"},
    {ExecutionMode::kCliAgent, "cli_agent"},
    {ExecutionMode::kCliAgentJit, "cli_agent_jit"},
}};

constexpr std::array<std::pair<ErrorKind, std::string_view>, 13> kErrorKinds{{
    {ErrorKind::kNone, "none"},
    {ErrorKind::kExit, "exit"},
    {ErrorKind::kTimeout, "timeout"},
    {ErrorKind::kSandbox, "sandbox"},
    {ErrorKind::kNetwork, "network"},
    {ErrorKind::kHttp, "http"},
    {ErrorKind::kModel, "model"},
    {ErrorKind::kIdentity, "identity"},
    {ErrorKind::kArtifact, "artifact"},
    {ErrorKind::kInterrupted, "interrupted"},
    {ErrorKind::kTemplate, "template"},
    {ErrorKind::kApproval, "approval"},
    {ErrorKind::kInternal, "internal"},
}};

}  // namespace

std::string_view to_string(ExecutionMode m) {
  for (const auto& [mode, name] : kModes) {
    if (mode == m) return name;
  }
  return "?";
}

Result<ExecutionMode> parse_execution_mode(std::string_view text) {
  for (const auto& [mode, name] : kModes) {
    if (name == text) return mode;
  }
  return make_error("mode", "unknown execution mode \"" + std::string(text) +
                                "\" (expected in_process, sandboxed, identity_scoped, cli_agent "
                                "or cli_agent_jit)");
}

std::string_view to_string(StepKind k) {
  switch (k) {
    case StepKind::kNone:
      return "";
    case StepKind::kTemplate:
      return "template";
    case StepKind::kJson:
      return "json";
    case StepKind::kHttp:
      return "http";
    case StepKind::kLlm:
      return "llm";
    case StepKind::kApproval:
      return "approval";
    case StepKind::kSleep:
      return "sleep";
  }
  return "?";
}

std::string_view to_string(ArtifactDest d) {
  switch (d) {
    case ArtifactDest::kGit:
      return "git";
    case ArtifactDest::kS3:
      return "s3";
    case ArtifactDest::kLocal:
      return "local";
    case ArtifactDest::kStore:
      return "none";
  }
  return "?";
}

bool runs_in_sandbox(ExecutionMode m) { return m != ExecutionMode::kInProcess; }
bool takes_identity(ExecutionMode m) {
  return m == ExecutionMode::kIdentityScoped || runs_agent(m);
}
bool runs_agent(ExecutionMode m) {
  return m == ExecutionMode::kCliAgent || m == ExecutionMode::kCliAgentJit;
}

std::vector<std::string> side_effects(const StepDef& step) {
  std::vector<std::string> out;
  const std::string agent = step.agent.empty() ? "" : " agent " + step.agent;
  switch (step.mode) {
    case ExecutionMode::kIdentityScoped:
      out.push_back("identity_scoped: it runs" + agent +
                    " with the run's identity, whose credentials reach beyond its sandbox");
      break;
    case ExecutionMode::kCliAgent:
      out.push_back("cli_agent: it runs" + agent +
                    " with the run's identity, whose credentials reach beyond its sandbox");
      break;
    case ExecutionMode::kCliAgentJit:
      out.push_back("cli_agent_jit: it runs" + agent +
                    " with the run's identity and may ask for more credentials");
      break;
    case ExecutionMode::kInProcess:
    case ExecutionMode::kSandboxed:
      break;
  }
  if (step.kind == StepKind::kHttp) {
    const std::string method = step.http_spec.value("method", "GET");
    if (method != "GET" && method != "HEAD") {
      out.push_back("http " + method + " " + step.http_spec.value("url", "") +
                    ": it may change what the server holds");
    }
  }
  if (step.artifact) {
    const ArtifactDef& a = *step.artifact;
    switch (a.dest) {
      case ArtifactDest::kGit:
        out.push_back("it pushes an artifact to git " + a.url + " (branch " + a.branch + ")");
        break;
      case ArtifactDest::kS3:
        out.push_back("it uploads an artifact to s3 " + a.bucket + "/" + a.key +
                      (a.endpoint.empty() ? "" : " at " + a.endpoint));
        break;
      case ArtifactDest::kLocal:
        out.push_back("it writes an artifact to " + a.path + " under the worker's --artifact-root");
        break;
      case ArtifactDest::kStore:
        break;
    }
  }
  return out;
}

std::string Where::to_string() const {
  std::string out = file;
  if (line > 0) out += ":" + std::to_string(line);
  if (!key.empty()) out += ": " + key;
  return out;
}

std::string_view to_string(ErrorKind k) {
  for (const auto& [kind, name] : kErrorKinds) {
    if (kind == k) return name;
  }
  return "?";
}

Result<ErrorKind> parse_error_kind(std::string_view text) {
  for (const auto& [kind, name] : kErrorKinds) {
    if (name == text && kind != ErrorKind::kNone && kind != ErrorKind::kInterrupted) return kind;
  }
  return make_error("", "unknown error kind \"" + std::string(text) +
                            "\" (expected exit, timeout, sandbox, network, http, model, identity, "
                            "artifact, template, approval or internal; interrupted is "
                            "retry.on_interrupt)");
}

bool RetryPolicy::retries(ErrorKind k) const {
  if (k == ErrorKind::kInterrupted) return on_interrupt;
  return std::find(on.begin(), on.end(), k) != on.end();
}

std::string RetryPolicy::interrupted_not_run_again(int attempt) const {
  if (!on_interrupt) return "not run again: set retry.on_interrupt: true to allow it";
  return "not run again: attempt " + std::to_string(attempt) +
         " was the last of retry.attempts: " + std::to_string(attempts) +
         " (raise retry.attempts to allow another)";
}

const StepDef* WorkflowDef::step(std::string_view id) const {
  for (const auto& s : steps) {
    if (s.id == id) return &s;
  }
  return nullptr;
}

const InputDef* WorkflowDef::input(std::string_view name) const {
  for (const auto& i : inputs) {
    if (i.name == name) return &i;
  }
  return nullptr;
}

}  // namespace rf::workflow
