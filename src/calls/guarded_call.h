// The guarded call path (issue 39): what every tool call goes through once
// its door has checked its principal and policy and its sandbox is known,
// whoever sent it (a queued call, a workflow step's command, an API client's
// exec). In order:
//   1. the sandbox's boundary report is under way (proof);
//   2. its output is redacted of every value the sandbox holds (identity it
//      was given, and JIT grants mid-call), digested for the receipt as
//      delivered, written to the store in batches, and teed to the door;
//   3. JIT requests are served while it runs (cli_agent_jit, call --jit);
//   4. after it: the identity values in its environment are wiped, the
//      redactions audited, a hard revocation that ended it said, its record
//      ended (finished, failed or revoked: every text redacted) and its
//      receipt queued.
// Identity is prepared and injected by the caller before (a step injects
// once for several commands): the values come in the call's environment.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "calls/call_output.h"
#include "calls/identity_calls.h"
#include "calls/jit_broker.h"
#include "calls/proof_recorder.h"
#include "calls/result_spool.h"
#include "redact/patterns.h"
#include "sandbox/sandbox.h"
#include "store/store.h"

namespace rf::calls {

// The parts every guarded call uses (the worker's).
struct CallPath {
  store::Store* store = nullptr;
  std::string worker_id;
  OutputFlusher* flusher = nullptr;
  IdentityCalls* identity = nullptr;
  JitBroker* jit = nullptr;        // null: JIT calls are refused
  ProofRecorder* proof = nullptr;  // null: no reports or receipts
  ResultSpool* spool = nullptr;    // null: an end the store cannot take is retried in memory only
};

// One call on its way into a sandbox.
struct GuardedCall {
  int64_t call_id = 0;  // its record in the store (claimed or started by this worker)
  // Or, with call_id 0: makes the record, while the command starts (the
  // store's write is then off the call's path); its output is held until.
  std::function<Result<int64_t>()> record;
  IdentityUse use;          // project, run and identity scope (call_id is set from above)
  ExecCall exec;            // with the identity values the caller injected
  bool jit = false;         // the sandbox may ask for credentials (rf-cred) while it runs
  std::string step, agent;  // for the JIT policy and the approval queue
  std::string notice;       // lines for the call's stderr, before its output
  // Merged into the result's JSON (mode, backend, step).
  nlohmann::json result_extra = nlohmann::json::object();
  // Also gets every byte as delivered (redacted): a step's capture, a client's stream.
  OutputSink* tee = nullptr;
  // The most of its output its record keeps (0: all): a background process's.
  uint64_t stored_output_max = 0;
  // Asked after the call: a reason it must end failed though it ran (its
  // step was stopped), or nullopt.
  std::function<std::optional<std::string>()> stopped;
  // Asked when the call failed: the failure as the record says it.
  std::function<std::string(const std::string& error)> explain_failure;
  // Told how the call ended (its output all delivered to `tee`) before its
  // record is written: a door that streams answers its client first.
  std::function<void(const Result<ExecResult>& result)> on_result;
};

struct GuardedOutcome {
  Result<ExecResult> result = make_error("", "not run");
  std::optional<std::string> revoked;  // a hard revocation ended it: why
  // What the sandbox's texts must be redacted of from now on (null: nothing).
  std::shared_ptr<const redact::Patterns> patterns;
  std::string redacted(std::string text) const;
};

// Runs `call` in `sandbox` (steps 1 to 4 above).
GuardedOutcome run_guarded(const CallPath& path, GuardedCall call,
                           const std::shared_ptr<Sandbox>& sandbox);

// Ends a call that never reached a sandbox (identity refused, no sandbox to
// be had) as failed, its error redacted of `patterns`.
void fail_unrun(const CallPath& path, int64_t call_id, const std::string& why,
                const std::shared_ptr<const redact::Patterns>& patterns = nullptr);

}  // namespace rf::calls
