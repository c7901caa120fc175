// One workflow run on the worker that claimed it (worker side, issue 12).
//
// The run's steps form a DAG; a step starts once every step it needs has
// succeeded (or failed with allow_failure), up to max_parallel at once, each
// on a thread of its own, in the execution mode it names. Every attempt is
// recorded (step_attempts) with a digest of its inputs, its identity versions,
// image, exchanges, outputs and error; events (step.start, step.sandbox,
// step.end, run.end) let `workflow run --follow` tell the story as it happens.
//
// Retries: an attempt that failed with an error kind in retry.on starts
// again after the backoff, up to retry.attempts in all.
//
// Crash safety: the executor starts from what the store says. A run taken
// again after its worker died finds its finished steps done (never re-run)
// and the attempt that was running marked interrupted; that step runs again
// only with retry.on_interrupt: true, otherwise it failed, and the run
// continues or fails as for any failure.
//
// Labels (issue 16): a step that requires labels this worker lacks does not
// start here. The worker lets its running steps end, then hands the run back
// to the queue requiring them; a worker that has them takes it and resumes it
// as above (per_run sandboxes do not move: the step gets a fresh one there).
//
// Replay (`run replay`, docs/workflows.md "Replay"): a run marked replay_of
// another takes each step's last succeeded attempt there as its record, and
// decides per step, when the step is ready:
//   - an approval step asks again: never answered from the record;
//   - a side-effecting step (workflow::side_effects) runs again only once a
//     person approves it (a step approval whose request names the replay and
//     the side effects); denied, or unanswered within its timeout (1h if it gives none), it
//     is not run: its attempt is skipped and the original's outputs stand in,
//     so the steps after it read what the original run did, and say so (a
//     step with no such outputs fails the run);
//   - another in_process step is answered from the record when nothing it
//     reads (every step upstream of it) changed: each upstream step was
//     answered from the record, stood in, or ran again with the original's
//     outputs; otherwise (or with no record) it runs again;
//   - any other step runs again.
// Each attempt notes what was done (outputs.replay: action, why), which
// `run show`, `--follow` and the API report (store::replay_report).
//
// Ends: succeeded when every step succeeded (or failed with allow_failure);
// failed at the first failure (running steps finish, the rest are skipped),
// when its wall clock passes, or when its definition cannot be read;
// cancelled on `run cancel`. A run whose lease was lost stops without
// writing (another worker holds it now). When the worker stops, running
// steps are ended and the run goes back to the queue.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "store/workflow_store.h"
#include "worker/step_context.h"
#include "worker/step_sandboxes.h"
#include "workflow/definition.h"

namespace rf::worker {

class RunExecutor {
 public:
  RunExecutor(const WorkflowServices& services, store::WorkflowRunRow row);
  ~RunExecutor();
  RunExecutor(const RunExecutor&) = delete;
  RunExecutor& operator=(const RunExecutor&) = delete;

  // To the run's end (or a lost lease, or stop()).
  void run();
  // The worker stops: running steps end (their attempts become interrupted)
  // and the run is left for the queue.
  void stop(const std::string& why);
  // The worker drains: no step starts; run() returns once the running ones
  // ended, leaving the run for the queue (its next steps run elsewhere).
  void drain();
  const std::string& run_id() const { return row_.run_id; }

 private:
  enum class Status { kPending, kRunning, kSucceeded, kFailed, kSkipped, kCancelled };
  // A replay's way with a step, decided as it starts (see above).
  struct ReplayPlan {
    enum class Way { kRun, kFromRecord, kAskFirst };
    Way way = Way::kRun;
    std::string action;  // the note's action for kRun: "re-run" or "asked again"
    std::string why;
    std::vector<std::string> side_effects;  // kAskFirst
  };
  struct Recorded {
    nlohmann::json outputs;
    nlohmann::json exchanges;
  };
  struct StepState {
    const workflow::StepDef* def = nullptr;
    Status status = Status::kPending;
    int64_t attempts = 0;  // made so far
    std::chrono::steady_clock::time_point not_before{};
    std::string error;
    workflow::ErrorKind error_kind = workflow::ErrorKind::kNone;
    std::unique_ptr<StepControl> control;
    std::thread thread;
    bool done = false;  // the thread finished; join it
    std::optional<StepOutcome> outcome;
    // A replay: how this attempt goes (set before its thread starts); whether
    // its outputs differ from the record's (or it has none); whether it was
    // not run again and the record's outputs stand in.
    ReplayPlan replay;
    bool changed = false;
    bool stood_in = false;
  };

  bool load();
  void restore_from_store();
  void launch(StepState& s);
  ReplayPlan replay_plan(const StepState& s) const;
  void attempt(StepState& s, int64_t number, StepControl* control);
  StepOutcome ask_then_run(const StepState& s, const StepRequest& req, nlohmann::json* note);
  bool differs_from_record(const std::string& step, const nlohmann::json& outputs) const;
  void log_attempt(const workflow::StepDef& step, int64_t number, const StepOutcome& outcome,
                   std::chrono::milliseconds took) const;
  void settle(StepState& s);
  bool needs_met(const StepState& s, bool* blocked) const;
  std::chrono::milliseconds timeout_of(const workflow::StepDef& step) const;
  void stop_all(const std::string& why);
  void skip_rest(const std::string& why);
  void finish(store::WorkflowRunState state, const std::optional<std::string>& error);
  void event(const std::string& kind, nlohmann::json detail);
  void join_done();

  const WorkflowServices& s_;
  store::WorkflowRunRow row_;
  store::WorkflowStore wf_;
  workflow::WorkflowDef def_;
  std::shared_ptr<const policy::OperatorPolicy> policy_;  // read by load()
  std::unique_ptr<StepSandboxes> sandboxes_;
  std::map<std::string, StepState> steps_;
  // A replay: each step's last succeeded attempt in the original, and every
  // step upstream of each step.
  std::map<std::string, Recorded> recorded_;
  std::map<std::string, std::set<std::string>> upstream_;
  nlohmann::json context_;
  std::mutex mu_;  // steps_' status and outcome, context_
  std::condition_variable cv_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> draining_{false};
  // The labels of a ready step this worker lacks: no step starts, and once the
  // running ones end the run is handed to a worker that has them.
  std::optional<Labels> handoff_;
  std::string stop_why_;
  bool lease_lost_ = false;
  std::chrono::steady_clock::time_point started_{};
};

}  // namespace rf::worker
