// The store's workflow tables (issue 12): workflow runs (queued, held by a
// worker under a lease like a call, finished), the attempts of their steps,
// approvals a human answers, and artifacts. Every write is one transaction
// and all-or-nothing, as in store.h; errors read "<operation>: <what>".
//
// Crash safety: a run whose worker died (its lease ran out, or a restart of
// the same worker found it) goes back to the queue; the attempts it had
// running become interrupted, never silently repeated (the run's executor
// decides from the step's retry.on_interrupt).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "store/store.h"

namespace rf::store {

enum class WorkflowRunState { queued, running, succeeded, failed, cancelled };
enum class AttemptState { running, succeeded, failed, interrupted, skipped, cancelled };
enum class ApprovalState { pending, approved, denied, expired };

std::string_view to_string(WorkflowRunState s);
std::string_view to_string(AttemptState s);
std::string_view to_string(ApprovalState s);

struct NewWorkflowRun {
  std::string run_id;  // "" = generated: "wr-" + 12 hex digits
  std::string project;
  std::string workflow;    // its name
  std::string file;        // as given, for messages
  std::string definition;  // the file's text
  std::string inputs_json = "{}";
  std::string user;
  std::chrono::milliseconds timeout{3600'000};  // the run's wall clock
  std::optional<std::string> replay_of;
};

struct WorkflowRunRow {
  std::string run_id;
  std::string project_id;
  std::string workflow;
  std::string file;
  std::string definition;
  std::string inputs_json;
  std::string user;
  std::chrono::milliseconds timeout{0};
  WorkflowRunState state = WorkflowRunState::queued;
  std::optional<std::string> worker_id;
  std::optional<std::string> error;
  std::optional<std::string> replay_of;
  bool cancel_requested = false;
  int64_t claims = 0;  // how many times a worker took it (> 1: it was resumed)
  int64_t enqueued_at = 0;
  std::optional<int64_t> started_at;
  std::optional<int64_t> finished_at;
  std::optional<int64_t> deadline_at;
  std::optional<int64_t> lease_expires_at;
  // Running, held by `worker_id`, its lease not expired at `now`.
  bool held_by(const std::string& worker, int64_t now) const {
    return state == WorkflowRunState::running && worker_id == worker && lease_expires_at &&
           *lease_expires_at >= now;
  }
  bool ended() const {
    return state != WorkflowRunState::queued && state != WorkflowRunState::running;
  }
  // A new run of the same definition, inputs, user and timeout, marked as a
  // replay of this one (`run replay`, POST /v1/runs/{id}:replay).
  NewWorkflowRun replay() const {
    NewWorkflowRun again;
    again.project = project_id;
    again.workflow = workflow;
    again.file = file;
    again.definition = definition;
    again.inputs_json = inputs_json;
    again.user = user;
    again.timeout = timeout;
    again.replay_of = run_id;
    return again;
  }
};

struct AttemptRow {
  std::string run_id;
  std::string step_id;
  int64_t attempt = 1;
  std::string mode;
  std::string kind;
  AttemptState state = AttemptState::running;
  std::optional<std::string> worker_id;
  std::optional<std::string> sandbox_id;
  std::optional<int64_t> call_id;
  std::string inputs_digest;
  std::optional<std::string> identity_json;
  std::optional<std::string> image_digest;
  std::optional<std::string> exchanges_json;
  std::optional<std::string> outputs_json;
  std::optional<std::string> error;
  std::optional<std::string> error_kind;
  int64_t started_at = 0;
  std::optional<int64_t> finished_at;
};

// What a replay did with a step (`run replay`, docs/workflows.md "Replay"):
// the worker keeps it in the attempt's outputs as {"replay": {"action", "why"}}.
struct ReplayLine {
  std::string step;
  // re-run | re-run (approved) | answered from record | asked again |
  // skipped (side effect, not approved) | not run
  std::string action;
  std::string why;
};
// Per step, in the order the attempts list them: its newest attempt's note;
// a step whose newest attempt has none (skipped after a failure, cancelled)
// is "not run", with that attempt's error as why.
std::vector<ReplayLine> replay_report(const std::vector<AttemptRow>& attempts);

// How an attempt ended (finish_attempt).
struct AttemptEnd {
  AttemptState state = AttemptState::succeeded;
  std::optional<std::string> outputs_json;
  std::optional<std::string> error;
  std::optional<std::string> error_kind;
  std::optional<std::string> exchanges_json;
  std::optional<std::string> identity_json;
  std::optional<std::string> image_digest;
};

struct ApprovalRow {
  int64_t id = 0;
  std::string project_id;
  std::optional<std::string> run_id;
  std::optional<std::string> step_id;
  std::string kind = "step";  // step | credential
  std::string request_json = "{}";
  ApprovalState state = ApprovalState::pending;
  std::optional<std::string> decided_by;
  std::optional<std::string> reason;
  int64_t created_at = 0;
  std::optional<int64_t> expires_at;
  std::optional<int64_t> decided_at;
};

struct ArtifactRow {
  std::string run_id;
  std::string step_id;
  int64_t attempt = 1;
  std::string dest;
  std::string ref_json = "{}";
  std::optional<std::string> data;  // dest none: the workspace as a tar
  int64_t size = 0;
  std::string sha256;
  int64_t created_at = 0;
};

class WorkflowStore {
 public:
  explicit WorkflowStore(Store& store) : store_(store) {}

  // ---- runs, client side
  // Queues the run: its project must exist, its id must be new (the run is
  // created open, as a call's). Returns the run id.
  Result<std::string> enqueue_run(const NewWorkflowRun& run);
  // enqueue_run's checks of `run` alone (its id, inputs, timeout), for a client
  // to make before it writes anything for a run that would be refused.
  static Status check_new_run(const NewWorkflowRun& run);
  Result<WorkflowRunRow> run(const std::string& run_id);
  // Newest first; `project` empty: every project.
  Result<std::vector<WorkflowRunRow>> runs(const std::string& project, int limit = 50);
  // A queued run is cancelled at once; a running one is asked to stop (its
  // worker ends its steps and marks it cancelled). Returns its state after.
  Result<WorkflowRunState> request_cancel(const std::string& run_id, const std::string& why);

  // ---- runs, worker side
  // Takes the oldest queued run whose required labels (a hand-off's) are
  // among `labels`: running, held by the worker until now + lease; its
  // deadline is fixed by the first claim (now + its timeout).
  Result<std::optional<WorkflowRunRow>> claim_run(const std::string& worker_id,
                                                  std::chrono::milliseconds lease,
                                                  const Labels& labels = {});
  // The worker holds the run and lacks the labels its next step requires: the
  // run goes back to the queue requiring them, for a worker that has them
  // (its finished steps stay done). `why` goes into the run's events.
  Status hand_off_run(const std::string& run_id, const std::string& worker_id, const Labels& labels,
                      const std::string& why);
  // Runs handed off before `handed_before` that no running worker
  // heartbeating since `heartbeat_since` (serving the run's project) may take
  // fail, naming what each live worker lacks. Returns how many.
  Result<int> fail_unmatched_runs(int64_t handed_before, int64_t heartbeat_since);
  // A held run ends (succeeded, failed, cancelled); its runs row ends too.
  // Refused ("lease lost") when the worker no longer holds it.
  Status finish_run(const std::string& run_id, const std::string& worker_id, WorkflowRunState state,
                    const std::optional<std::string>& error);
  // Runs held by the worker go back to the queue; their running attempts
  // become interrupted with `why`. Returns how many runs.
  Result<int> requeue_runs_of_worker(const std::string& worker_id, const std::string& why);
  // The same for runs whose lease expired before `now` (their worker stopped
  // heartbeating).
  // `sparing`: the sweeping worker's own runs stay (it is alive).
  Result<int> requeue_orphaned_runs(int64_t now, const std::string& sparing = "");

  // ---- attempts (of a run the worker holds)
  Status start_attempt(const AttemptRow& row);
  // The attempt got its sandbox and the call that carries its output.
  Status attempt_placed(const std::string& run_id, const std::string& step_id, int64_t attempt,
                        const std::optional<std::string>& sandbox_id,
                        const std::optional<int64_t>& call_id);
  Status finish_attempt(const std::string& run_id, const std::string& step_id, int64_t attempt,
                        const std::string& worker_id, const AttemptEnd& end);
  // Every attempt of the run, by step in order of attempt.
  Result<std::vector<AttemptRow>> attempts(const std::string& run_id);

  // ---- approvals
  Result<int64_t> request_approval(const ApprovalRow& row);
  Result<ApprovalRow> approval(int64_t id);
  // The newest approval a step of a run asked for (a resumed run's step
  // waits on the request it made before).
  Result<std::optional<ApprovalRow>> approval_for_step(const std::string& run_id,
                                                       const std::string& step_id);
  // Pending ones (project "" = all), oldest first.
  Result<std::vector<ApprovalRow>> pending_approvals(const std::string& project);
  // Approved or denied by `who`: refused when it is no longer pending. The
  // decision's audit event (approval.approve, approval.deny: the approval,
  // its kind, the reason) is written in the same transaction.
  Status decide_approval(int64_t id, bool approve, const std::string& who,
                         const std::string& reason);
  // Pending past its expiry: expired. Returns whether it changed.
  Result<bool> expire_approval(int64_t id);
  // Pending, but whoever asked has gone (a JIT asker that was killed):
  // expired at once, decided by `by` (e.g. "asker") for `why`, which
  // `approvals show` then says. Returns whether it changed.
  Result<bool> withdraw_approval(int64_t id, const std::string& by, const std::string& why);

  // ---- artifacts
  Status put_artifact(const ArtifactRow& row);
  // The newest attempt's artifact of the step.
  Result<std::optional<ArtifactRow>> artifact(const std::string& run_id,
                                              const std::string& step_id);

 private:
  Store& store_;
};

}  // namespace rf::store
