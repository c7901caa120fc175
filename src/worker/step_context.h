// What a workflow step runs with (worker side, issue 12): the worker's
// services, the step's rendered view of the run, and how it ends. The run
// executor (run_executor.h) makes one per attempt; the mode's runner
// (in_process_steps.h, sandbox_steps.h) fills in the outcome.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "calls/identity_calls.h"
#include "calls/jit_broker.h"
#include "net/resolve_override.h"
#include "policy/operator_policy.h"
#include "store/store.h"
#include "store/workflow_store.h"
#include "worker/serving.h"
#include "worker/settings.h"
#include "workflow/definition.h"
#include "workflow/template.h"

namespace rf::calls {
class ProofRecorder;
class OutputFlusher;
}  // namespace rf::calls

namespace rf::worker {

class StepSandboxes;

// The worker's parts a workflow run uses.
struct WorkflowServices {
  store::Store* store = nullptr;
  std::string worker_id;
  std::chrono::milliseconds lease{30'000};
  std::function<std::shared_ptr<Serving>()> serving;
  const WorkerSettings* settings = nullptr;
  calls::IdentityCalls* identity = nullptr;
  calls::JitBroker* jit = nullptr;  // cli_agent_jit steps' rf-cred requests
  SandboxLedger* ledger = nullptr;
  calls::OutputFlusher* flusher = nullptr;
  // Reports of step sandboxes and receipts of their calls (issue 15); null: none.
  calls::ProofRecorder* proof = nullptr;
  std::string artifact_root;  // --artifact-root: where `local` artifacts go ("" = refused)
  std::string agents_dir;     // where claude-code.yaml, codex.yaml are
  // sandbox.proxy_resolve, parsed once: the names the worker's own requests
  // (http and llm steps, S3 artifacts) resolve as its egress proxy does.
  net::ResolveOverride resolve;
  int max_runs = 4;  // workflow runs executing at once
};

// Stopping a step from outside: the run was cancelled, its wall clock ran
// out, or the worker stops. `on_stop` (set by the step while it runs) ends
// what it waits on (its sandbox, its wait).
class StepControl {
 public:
  bool stopped() const { return stopped_.load(); }
  std::string why() const {
    std::lock_guard lock(mu_);
    return why_;
  }
  void stop(const std::string& why) {
    std::function<void()> hook;
    {
      std::lock_guard lock(mu_);
      if (stopped_.exchange(true)) return;
      why_ = why;
      hook = on_stop_;
    }
    if (hook) hook();
  }
  // Runs now when already stopped.
  void on_stop(std::function<void()> hook) {
    {
      std::lock_guard lock(mu_);
      if (!stopped_) {
        on_stop_ = std::move(hook);
        return;
      }
    }
    if (hook) hook();
  }
  void clear_on_stop() {
    std::lock_guard lock(mu_);
    on_stop_ = nullptr;
  }
  // Sleeps up to `d`; false when stopped meanwhile.
  bool sleep_for(std::chrono::milliseconds d);

 private:
  mutable std::mutex mu_;
  std::atomic<bool> stopped_{false};
  std::string why_;
  std::function<void()> on_stop_;
};

// One attempt of one step.
struct StepRequest {
  const workflow::WorkflowDef* def = nullptr;
  const workflow::StepDef* step = nullptr;
  std::string project;
  std::string run_id;
  std::string user;
  int64_t attempt = 1;
  // {"inputs": ..., "steps": {ID: outputs}, "run": ..., "workflow": ...}
  const nlohmann::json* context = nullptr;
  std::chrono::milliseconds timeout{0};
  StepControl* control = nullptr;
  // The project's operator policy, read when the run started: what the
  // step's own requests may reach and read (never null while a step runs).
  const policy::OperatorPolicy* policy = nullptr;
  // Tells the store where the attempt runs (sandbox id, the call of its output).
  std::function<void(const std::optional<std::string>& sandbox_id,
                     const std::optional<int64_t>& call_id)>
      placed;

  Result<std::string> render(const std::string& text,
                             workflow::Escape escape = workflow::Escape::kNone) const {
    return workflow::render_template(text, *context, escape);
  }
};

struct StepOutcome {
  store::AttemptState state = store::AttemptState::succeeded;
  workflow::ErrorKind error_kind = workflow::ErrorKind::kNone;
  std::string error;
  // output, stdout, stderr, exit_code, json, artifact
  nlohmann::json outputs = nlohmann::json::object();
  std::optional<nlohmann::json> exchanges;  // in_process http/llm: for replay
  std::optional<nlohmann::json> identity;   // keys, secrets, versions, fingerprints
  std::optional<std::string> image_digest;
  // A replay did not run the step again (a side effect, not approved): the
  // original's outputs, when it has them, stand in (run_executor.h).
  bool stood_in = false;

  static StepOutcome failed(workflow::ErrorKind kind, std::string why) {
    StepOutcome o;
    o.state = store::AttemptState::failed;
    o.error_kind = kind;
    o.error = std::move(why);
    return o;
  }
};

}  // namespace rf::worker
