#include "store/workflow_store.h"

#include <sodium.h>

#include <map>
#include <nlohmann/json.hpp>

#include "store/audit_log.h"
#include "store/sql.h"

namespace rf::store {
namespace {

using namespace sql;
using nlohmann::json;

constexpr std::string_view kRunStates[] = {"queued", "running", "succeeded", "failed", "cancelled"};
constexpr std::string_view kAttemptStates[] = {"running",     "succeeded", "failed",
                                               "interrupted", "skipped",   "cancelled"};
constexpr std::string_view kApprovalStates[] = {"pending", "approved", "denied", "expired"};

template <class E, size_t N>
Result<E> parse_enum(const std::string_view (&names)[N], std::string_view text, const char* what) {
  for (size_t i = 0; i < N; ++i) {
    if (names[i] == text) return static_cast<E>(i);
  }
  return fail("unknown " + std::string(what) + " \"" + std::string(text) + "\"");
}

constexpr std::string_view kRunColumns =
    "run_id, project_id, workflow, file, definition, inputs_json, user_id, state, worker_id, "
    "error, replay_of, cancel_requested, claims, enqueued_at, started_at, finished_at, "
    "deadline_at, timeout_ms, lease_expires_at";

Result<WorkflowRunRow> read_run(const Statement& st) {
  WorkflowRunRow r;
  r.run_id = st.text(0);
  r.project_id = st.text(1);
  r.workflow = st.text(2);
  r.file = st.text(3);
  r.definition = st.text(4);
  r.inputs_json = st.text(5);
  r.user = st.text(6);
  auto state = parse_enum<WorkflowRunState>(kRunStates, st.text(7), "workflow run state");
  if (!state.ok()) return state.take_error();
  r.state = *state;
  r.worker_id = st.opt_text(8);
  r.error = st.opt_text(9);
  r.replay_of = st.opt_text(10);
  r.cancel_requested = st.int64(11) != 0;
  r.claims = st.int64(12);
  r.enqueued_at = st.int64(13);
  r.started_at = st.opt_int64(14);
  r.finished_at = st.opt_int64(15);
  r.deadline_at = st.opt_int64(16);
  r.timeout = std::chrono::milliseconds(st.int64(17));
  r.lease_expires_at = st.opt_int64(18);
  return r;
}

constexpr std::string_view kAttemptColumns =
    "run_id, step_id, attempt, mode, kind, state, worker_id, sandbox_id, call_id, inputs_digest, "
    "identity_json, image_digest, exchanges_json, outputs_json, error, error_kind, started_at, "
    "finished_at";

Result<AttemptRow> read_attempt(const Statement& st) {
  AttemptRow a;
  a.run_id = st.text(0);
  a.step_id = st.text(1);
  a.attempt = st.int64(2);
  a.mode = st.text(3);
  a.kind = st.text(4);
  auto state = parse_enum<AttemptState>(kAttemptStates, st.text(5), "attempt state");
  if (!state.ok()) return state.take_error();
  a.state = *state;
  a.worker_id = st.opt_text(6);
  a.sandbox_id = st.opt_text(7);
  a.call_id = st.opt_int64(8);
  a.inputs_digest = st.text(9);
  a.identity_json = st.opt_text(10);
  a.image_digest = st.opt_text(11);
  a.exchanges_json = st.opt_text(12);
  a.outputs_json = st.opt_text(13);
  a.error = st.opt_text(14);
  a.error_kind = st.opt_text(15);
  a.started_at = st.int64(16);
  a.finished_at = st.opt_int64(17);
  return a;
}

constexpr std::string_view kApprovalColumns =
    "id, project_id, run_id, step_id, kind, request_json, state, decided_by, reason, created_at, "
    "expires_at, decided_at";

Result<ApprovalRow> read_approval(const Statement& st) {
  ApprovalRow a;
  a.id = st.int64(0);
  a.project_id = st.text(1);
  a.run_id = st.opt_text(2);
  a.step_id = st.opt_text(3);
  a.kind = st.text(4);
  a.request_json = st.text(5);
  auto state = parse_enum<ApprovalState>(kApprovalStates, st.text(6), "approval state");
  if (!state.ok()) return state.take_error();
  a.state = *state;
  a.decided_by = st.opt_text(7);
  a.reason = st.opt_text(8);
  a.created_at = st.int64(9);
  a.expires_at = st.opt_int64(10);
  a.decided_at = st.opt_int64(11);
  return a;
}

Result<ArtifactRow> read_artifact(const Statement& st) {
  ArtifactRow a;
  a.run_id = st.text(0);
  a.step_id = st.text(1);
  a.attempt = st.int64(2);
  a.dest = st.text(3);
  a.ref_json = st.text(4);
  if (!st.is_null(5)) a.data = st.blob(5);
  a.size = st.int64(6);
  a.sha256 = st.text(7);
  a.created_at = st.int64(8);
  return a;
}

std::string new_run_id() {
  unsigned char bytes[6];
  randombytes_buf(bytes, sizeof bytes);
  static const char* hex = "0123456789abcdef";
  std::string out = "wr-";
  for (unsigned char b : bytes) {
    out += hex[b >> 4];
    out += hex[b & 15];
  }
  return out;
}

bool valid_id(const std::string& id) {
  if (id.empty() || id.size() > 128) return false;
  for (unsigned char c : id) {
    if (c <= 0x20 || c >= 0x7f || c == '/' || c == '\\') return false;
  }
  return true;
}

Result<WorkflowRunRow> run_in(Db& db, const std::string& run_id) {
  auto r = first_row<WorkflowRunRow>(
      db, read_run, "SELECT " + std::string(kRunColumns) + " FROM workflow_runs WHERE run_id = ?1",
      run_id);
  if (!r.ok()) return r.take_error();
  if (!*r) return fail("workflow run " + run_id + " does not exist");
  return std::move(**r);
}

// The run must be running and held by `worker` (a lease that ran out is
// still its own until a sweep requeues the run), and the writer must hold
// the worker's fence: `fence` (the epoch this
// process registered the worker under; nullopt: not this process) must be
// the worker's current one, or a worker restarted under the same id would
// share its runs with the process it replaced.
Status require_held_run(Db& db, const std::string& run_id, const std::string& worker,
                        std::optional<int64_t> fence) {
  struct Held {
    std::string state, holder;
    std::optional<int64_t> epoch;
  };
  auto read = [](const Statement& st) -> Result<Held> {
    return Held{st.text(0), st.text(1), st.opt_int64(2)};
  };
  auto h = first_row<Held>(
      db, read,
      "SELECT r.state, coalesce(r.worker_id, ''), w.epoch "
      "FROM workflow_runs r LEFT JOIN workers w ON w.id = r.worker_id WHERE r.run_id = ?1",
      run_id);
  if (!h.ok()) return h.take_error();
  if (!*h) return fail("workflow run " + run_id + " does not exist");
  const Held& held = **h;
  const std::string lost =
      "workflow run " + run_id + " is not held by worker " + worker + " (lease lost): ";
  if (held.state != "running") return lease_lost(lost + "it is " + held.state);
  if (held.holder != worker) return lease_lost(lost + "worker " + held.holder + " holds it");
  if (fence && held.epoch && *held.epoch != *fence) return fenced(worker, *fence, *held.epoch);
  return ok_status();
}

// Held runs (by worker, or by expired lease) go back to the queue; their
// running attempts become interrupted, with why(worker) as the error.
// Returns the run ids.
template <class Why, class... Args>
Result<std::vector<std::string>> requeue_where(Db& db, int64_t now, Why why,
                                               const std::string& where_sql, const Args&... args) {
  auto read = [](const Statement& st) -> Result<std::pair<std::string, std::string>> {
    return std::pair(st.text(0), st.text(1));
  };
  auto held = rows<std::pair<std::string, std::string>>(
      db, read,
      "SELECT run_id, coalesce(worker_id, '') FROM workflow_runs WHERE state = 'running' AND " +
          where_sql,
      args...);
  if (!held.ok()) return held.take_error();
  std::vector<std::string> ids;
  for (const auto& [id, worker] : *held) {
    RF_TRY(exec(db,
                "UPDATE step_attempts SET state = 'interrupted', error = ?3, "
                "error_kind = 'interrupted', finished_at = ?2 "
                "WHERE run_id = ?1 AND state = 'running'",
                id, now, why(worker)));
    RF_TRY(exec(db,
                "UPDATE workflow_runs SET state = 'queued', worker_id = NULL, "
                "lease_expires_at = NULL WHERE run_id = ?1",
                id));
    ids.push_back(id);
  }
  return ids;
}

}  // namespace

std::string_view to_string(WorkflowRunState s) { return kRunStates[static_cast<int>(s)]; }
std::string_view to_string(AttemptState s) { return kAttemptStates[static_cast<int>(s)]; }
std::string_view to_string(ApprovalState s) { return kApprovalStates[static_cast<int>(s)]; }

Status WorkflowStore::check_new_run(const NewWorkflowRun& r) {
  const std::string operation = "enqueue workflow run " + r.run_id;
  if (!r.run_id.empty() && !valid_id(r.run_id))
    return make_error(operation, "a run id is 1-128 printable characters, no '/'");
  if (r.project.empty()) return make_error(operation, "the project id is empty");
  if (r.workflow.empty()) return make_error(operation, "the workflow has no name");
  if (!json::accept(r.inputs_json)) return make_error(operation, "the inputs are not valid JSON");
  if (r.timeout.count() <= 0) return make_error(operation, "the timeout must be positive");
  return ok_status();
}

Result<std::string> WorkflowStore::enqueue_run(const NewWorkflowRun& r) {
  const std::string id = r.run_id.empty() ? new_run_id() : r.run_id;
  const std::string operation = "enqueue workflow run " + id;
  RF_TRY(check_new_run(r));
  auto id_out = store_.locked([&](Db& db) -> Result<std::string> {
    return within(operation, write_transaction(db, [&]() -> Result<std::string> {
                    const int64_t at = store_.clock_now();
                    auto project = first_row<std::string>(
                        db, read_text0, "SELECT id FROM projects WHERE id = ?1", r.project);
                    if (!project.ok()) return project.take_error();
                    if (!*project) return fail("project " + r.project + " does not exist");
                    auto exists = first_row<std::string>(db, read_text0,
                                                         "SELECT id FROM runs WHERE id = ?1", id);
                    if (!exists.ok()) return exists.take_error();
                    if (*exists) return fail("run " + id + " exists already");
                    RF_TRY(exec(db,
                                "INSERT INTO runs (id, project_id, state, created_at) "
                                "VALUES (?1, ?2, 'open', ?3)",
                                id, r.project, at));
                    RF_TRY(exec(db,
                                "INSERT INTO workflow_runs (run_id, project_id, workflow, file, "
                                "definition, inputs_json, user_id, state, replay_of, enqueued_at, "
                                "timeout_ms) "
                                "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'queued', ?8, ?9, ?10)",
                                id, r.project, r.workflow, r.file, r.definition, r.inputs_json,
                                r.user, r.replay_of, at, int64_t{r.timeout.count()}));
                    return id;
                  }));
  });
  if (id_out.ok()) {
    store_.ring_run_queue();
    store_.ring_run(id);
  }
  return id_out;
}

Result<WorkflowRunRow> WorkflowStore::run(const std::string& run_id) {
  return store_.locked(
      [&](Db& db) { return within("read workflow run " + run_id, run_in(db, run_id)); });
}

Result<std::vector<WorkflowRunRow>> WorkflowStore::runs(const std::string& project, int limit) {
  return store_.locked([&](Db& db) {
    return within("list workflow runs",
                  rows<WorkflowRunRow>(db, read_run,
                                       "SELECT " + std::string(kRunColumns) +
                                           " FROM workflow_runs WHERE (?1 = '' OR project_id = ?1) "
                                           "ORDER BY enqueued_at DESC, run_id LIMIT ?2",
                                       project, int64_t{limit}));
  });
}

Result<WorkflowRunState> WorkflowStore::request_cancel(const std::string& run_id,
                                                       const std::string& why) {
  auto out = store_.locked([&](Db& db) -> Result<WorkflowRunState> {
    return within("cancel workflow run " + run_id,
                  write_transaction(db, [&]() -> Result<WorkflowRunState> {
                    auto r = run_in(db, run_id);
                    if (!r.ok()) return r.take_error();
                    const int64_t at = store_.clock_now();
                    if (r->state == WorkflowRunState::queued) {
                      // A claim takes no write lock: only a run still queued
                      // is cancelled here; one claimed meanwhile is running.
                      RF_TRY(exec(db,
                                  "UPDATE workflow_runs SET state = 'cancelled', error = ?2, "
                                  "finished_at = ?3 WHERE run_id = ?1 AND state = 'queued'",
                                  run_id, why, at));
                      if (db.changes() == 0) {
                        r = run_in(db, run_id);
                        if (!r.ok()) return r.take_error();
                      }
                    }
                    if (r->state == WorkflowRunState::queued) {
                      RF_TRY(exec(db,
                                  "UPDATE runs SET state = 'ended', ended_at = ?2 "
                                  "WHERE id = ?1 AND state = 'open'",
                                  run_id, at));
                      return WorkflowRunState::cancelled;
                    }
                    if (r->state == WorkflowRunState::running) {
                      RF_TRY(exec(db,
                                  "UPDATE workflow_runs SET cancel_requested = 1, "
                                  "error = coalesce(error, ?2) WHERE run_id = ?1",
                                  run_id, why));
                    }
                    return r->state;
                  }));
  });
  if (out.ok()) store_.ring_run(run_id);
  return out;
}

Result<std::optional<WorkflowRunRow>> WorkflowStore::claim_run(const std::string& worker_id,
                                                               std::chrono::milliseconds lease,
                                                               const Labels& labels) {
  // A claim transaction, as a call's (store.h): no write lock; on PostgreSQL
  // the queued row is locked, skipping those another claimer holds, and the
  // worker's row share-locked, so claims on many hosts do not wait for every
  // writer (a worker looks for runs each time it looks for calls).
  auto out = store_.locked([&](Db& db) -> Result<std::optional<WorkflowRunRow>> {
    // Most looks find no run queued (a worker looks each time a call is
    // queued): one read, outside a transaction, says so.
    auto any =
        first_row<std::string>(db, read_text0,
                               "SELECT run_id FROM workflow_runs WHERE state = 'queued' AND " +
                                   labels_held(db, "requires_json", 1) + " LIMIT 1",
                               labels_json(labels));
    if (!any.ok()) return within("claim a workflow run", std::move(any)).take_error();
    if (!*any) return Result<std::optional<WorkflowRunRow>>(std::nullopt);
    return within(
        "claim a workflow run",
        claim_transaction(db, [&]() -> Result<std::optional<WorkflowRunRow>> {
          if (lease.count() <= 0) return fail("the lease must be positive");
          auto w = running_worker(db, worker_id, store_.fence_of(worker_id));
          if (!w.ok()) return w.take_error();
          if (!w->takes_work()) return std::optional<WorkflowRunRow>();  // cordoned, draining
          auto next = first_row<std::string>(
              db, read_text0,
              "SELECT run_id FROM workflow_runs WHERE state = 'queued' AND " +
                  labels_held(db, "requires_json", 1) + " ORDER BY enqueued_at, run_id LIMIT 1" +
                  skip_locked(db),
              labels_json(labels));
          if (!next.ok()) return next.take_error();
          if (!*next) return std::optional<WorkflowRunRow>();
          const int64_t at = store_.clock_now();
          RF_TRY(exec(db,
                      "UPDATE workflow_runs SET state = 'running', worker_id = ?2, "
                      "lease_expires_at = ?3, claims = claims + 1, "
                      "started_at = coalesce(started_at, ?4), "
                      "deadline_at = coalesce(deadline_at, ?4 + timeout_ms) WHERE run_id = ?1",
                      **next, worker_id, at + lease.count(), at));
          auto r = run_in(db, **next);
          if (!r.ok()) return r.take_error();
          return std::optional<WorkflowRunRow>(std::move(*r));
        }));
  });
  if (out.ok() && *out) store_.ring_run((**out).run_id);
  return out;
}

Status WorkflowStore::finish_run(const std::string& run_id, const std::string& worker_id,
                                 WorkflowRunState state, const std::optional<std::string>& error) {
  if (state == WorkflowRunState::queued || state == WorkflowRunState::running) {
    return make_error("finish workflow run " + run_id, "a run ends succeeded, failed or cancelled");
  }
  auto out = store_.locked([&](Db& db) -> Status {
    return within(
        "finish workflow run " + run_id, write_transaction(db, [&]() -> Status {
          const int64_t at = store_.clock_now();
          RF_TRY(require_held_run(db, run_id, worker_id, store_.fence_of(worker_id)));
          RF_TRY(exec(db,
                      "UPDATE workflow_runs SET state = ?2, error = ?3, finished_at = ?4, "
                      "lease_expires_at = NULL WHERE run_id = ?1",
                      run_id, std::string(to_string(state)), error, at));
          // Its calls are all done; the run ends as a call's run would.
          return exec(db,
                      "UPDATE runs SET state = 'ended', ended_at = ?2 "
                      "WHERE id = ?1 AND state = 'open'",
                      run_id, at);
        }));
  });
  if (out.ok()) store_.ring_run(run_id);
  return out;
}

Status WorkflowStore::hand_off_run(const std::string& run_id, const std::string& worker_id,
                                   const Labels& labels, const std::string& why) {
  auto out = store_.locked([&](Db& db) -> Status {
    return within("hand workflow run " + run_id + " off", write_transaction(db, [&]() -> Status {
                    const int64_t at = store_.clock_now();
                    RF_TRY(require_held_run(db, run_id, worker_id, store_.fence_of(worker_id)));
                    RF_TRY(exec(db,
                                "UPDATE workflow_runs SET state = 'queued', worker_id = NULL, "
                                "lease_expires_at = NULL, requires_json = ?2, handed_off_at = ?3 "
                                "WHERE run_id = ?1",
                                run_id, labels_json(labels), at));
                    return ok_status();
                  }));
  });
  if (!out.ok()) return out;
  (void)store_.append_event(Event{0, 0, "run.handoff", std::nullopt, run_id, std::nullopt,
                                  std::nullopt, worker_id,
                                  nlohmann::json{{"labels", labels}, {"why", why}}.dump()});
  store_.ring_run_queue();
  return out;
}

Result<int> WorkflowStore::fail_unmatched_runs(int64_t handed_before, int64_t heartbeat_since) {
  // Every worker asks this every second: a read first, the rest only when a
  // handed-off run waits.
  auto waiting = store_.locked([&](Db& db) {
    return first_row<std::string>(db, read_text0,
                                  "SELECT run_id FROM workflow_runs WHERE state = 'queued' "
                                  "AND requires_json <> '{}' AND handed_off_at < ?1 LIMIT 1",
                                  handed_before);
  });
  if (!waiting.ok()) return waiting.take_error();
  if (!*waiting) return 0;
  auto live = store_.workers();  // outside the store's lock: its own read
  if (!live.ok()) return live.take_error();
  std::erase_if(*live, [&](const WorkerRow& w) {
    return w.state != WorkerState::running || w.heartbeat_at < heartbeat_since;
  });
  std::vector<std::string> ids;
  auto out = store_.locked([&](Db& db) -> Result<int> {
    return within(
        "fail workflow runs no live worker may take", write_transaction(db, [&]() -> Result<int> {
          struct Waiting {
            std::string run_id, project, labels;
          };
          auto read = [](const Statement& st) -> Result<Waiting> {
            return Waiting{st.text(0), st.text(1), st.text(2)};
          };
          auto waiting =
              rows<Waiting>(db, read,
                            "SELECT run_id, project_id, requires_json FROM workflow_runs "
                            "WHERE state = 'queued' AND requires_json <> '{}' "
                            "AND handed_off_at < ?1 LIMIT 1000",
                            handed_before);
          if (!waiting.ok()) return waiting.take_error();
          const int64_t at = store_.clock_now();
          for (const Waiting& w : *waiting) {
            auto labels = labels_from_json(w.labels);
            if (!labels.ok()) continue;
            auto why = unmatched_reason(*live, w.project, *labels, "run's next step");
            if (!why) continue;
            RF_TRY(exec(db,
                        "UPDATE workflow_runs SET state = 'failed', error = ?2, finished_at = ?3 "
                        "WHERE run_id = ?1 AND state = 'queued'",
                        w.run_id, *why, at));
            RF_TRY(exec(db,
                        "UPDATE runs SET state = 'ended', ended_at = ?2 "
                        "WHERE id = ?1 AND state = 'open'",
                        w.run_id, at));
            ids.push_back(w.run_id);
          }
          return static_cast<int>(ids.size());
        }));
  });
  for (const auto& id : ids) store_.ring_run(id);
  return out;
}

Result<int> WorkflowStore::requeue_runs_of_worker(const std::string& worker_id,
                                                  const std::string& why) {
  std::vector<std::string> ids;
  auto out = store_.locked([&](Db& db) -> Result<int> {
    return within("requeue the workflow runs of worker " + worker_id,
                  write_transaction(db, [&]() -> Result<int> {
                    const int64_t at = store_.clock_now();
                    auto found = requeue_where(
                        db, at, [&](const std::string&) { return why; }, "worker_id = ?1",
                        worker_id);
                    if (!found.ok()) return found.take_error();
                    ids = *found;
                    return static_cast<int>(ids.size());
                  }));
  });
  for (const auto& id : ids) store_.ring_run(id);
  if (!ids.empty()) store_.ring_run_queue();
  return out;
}

Result<int> WorkflowStore::requeue_orphaned_runs(int64_t now, const std::string& sparing) {
  std::vector<std::string> ids;
  auto out = store_.locked([&](Db& db) -> Result<int> {
    return within("requeue workflow runs whose lease ran out",
                  write_transaction(db, [&]() -> Result<int> {
                    auto found = requeue_where(
                        db, now,
                        [](const std::string& w) {
                          return "worker " + w + " stopped heartbeating while the step ran";
                        },
                        "lease_expires_at < ?1 AND coalesce(worker_id, '') <> ?2", now, sparing);
                    if (!found.ok()) return found.take_error();
                    ids = *found;
                    return static_cast<int>(ids.size());
                  }));
  });
  for (const auto& id : ids) store_.ring_run(id);
  if (!ids.empty()) store_.ring_run_queue();
  return out;
}

Status WorkflowStore::start_attempt(const AttemptRow& a) {
  auto out = store_.locked([&](Db& db) -> Status {
    return within("start step " + a.step_id + " (attempt " + std::to_string(a.attempt) +
                      ") of run " + a.run_id,
                  write_transaction(db, [&]() -> Status {
                    const int64_t at = store_.clock_now();
                    RF_TRY(require_held_run(db, a.run_id, a.worker_id.value_or(""),
                                            store_.fence_of(a.worker_id.value_or(""))));
                    return exec(
                        db,
                        "INSERT INTO step_attempts (run_id, step_id, attempt, mode, kind, "
                        "state, worker_id, sandbox_id, call_id, inputs_digest, "
                        "identity_json, image_digest, started_at) "
                        "VALUES (?1, ?2, ?3, ?4, ?5, 'running', ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                        a.run_id, a.step_id, a.attempt, a.mode, a.kind, a.worker_id, a.sandbox_id,
                        a.call_id, a.inputs_digest, a.identity_json, a.image_digest,
                        a.started_at != 0 ? a.started_at : at);
                  }));
  });
  if (out.ok()) store_.ring_run(a.run_id);
  return out;
}

Status WorkflowStore::attempt_placed(const std::string& run_id, const std::string& step_id,
                                     int64_t attempt, const std::optional<std::string>& sandbox_id,
                                     const std::optional<int64_t>& call_id) {
  auto out = store_.locked([&](Db& db) -> Status {
    return within("place step " + step_id + " of run " + run_id,
                  write_transaction(db, [&]() -> Status {
                    return exec(db,
                                "UPDATE step_attempts SET sandbox_id = coalesce(?4, sandbox_id), "
                                "call_id = coalesce(?5, call_id) "
                                "WHERE run_id = ?1 AND step_id = ?2 AND attempt = ?3",
                                run_id, step_id, attempt, sandbox_id, call_id);
                  }));
  });
  if (out.ok()) store_.ring_run(run_id);
  return out;
}

Status WorkflowStore::finish_attempt(const std::string& run_id, const std::string& step_id,
                                     int64_t attempt, const std::string& worker_id,
                                     const AttemptEnd& e) {
  if (e.state == AttemptState::running) {
    return make_error("finish step " + step_id, "an attempt does not end running");
  }
  if (e.outputs_json && !json::accept(*e.outputs_json)) {
    return make_error("finish step " + step_id, "its outputs are not valid JSON");
  }
  auto out = store_.locked([&](Db& db) -> Status {
    return within(
        "finish step " + step_id + " (attempt " + std::to_string(attempt) + ") of run " + run_id,
        write_transaction(db, [&]() -> Status {
          const int64_t at = store_.clock_now();
          RF_TRY(require_held_run(db, run_id, worker_id, store_.fence_of(worker_id)));
          auto state = first_row<std::string>(
              db, read_text0,
              "SELECT state FROM step_attempts WHERE run_id = ?1 AND step_id = ?2 AND attempt = ?3",
              run_id, step_id, attempt);
          if (!state.ok()) return state.take_error();
          if (!*state) {
            // Skipped and cancelled steps never started: recorded as they end.
            return exec(db,
                        "INSERT INTO step_attempts (run_id, step_id, attempt, mode, kind, state, "
                        "worker_id, error, error_kind, started_at, finished_at) "
                        "VALUES (?1, ?2, ?3, '', '', ?4, ?5, ?6, ?7, ?8, ?8)",
                        run_id, step_id, attempt, std::string(to_string(e.state)), worker_id,
                        e.error, e.error_kind, at);
          }
          if (**state != "running") return fail("it is " + **state + " already");
          return exec(db,
                      "UPDATE step_attempts SET state = ?4, outputs_json = ?5, error = ?6, "
                      "error_kind = ?7, exchanges_json = coalesce(?8, exchanges_json), "
                      "identity_json = coalesce(?9, identity_json), "
                      "image_digest = coalesce(?10, image_digest), finished_at = ?11 "
                      "WHERE run_id = ?1 AND step_id = ?2 AND attempt = ?3",
                      run_id, step_id, attempt, std::string(to_string(e.state)), e.outputs_json,
                      e.error, e.error_kind, e.exchanges_json, e.identity_json, e.image_digest, at);
        }));
  });
  if (out.ok()) store_.ring_run(run_id);
  return out;
}

std::vector<ReplayLine> replay_report(const std::vector<AttemptRow>& attempts) {
  std::vector<ReplayLine> out;
  std::map<std::string, size_t> index;
  for (const auto& a : attempts) {
    auto [it, fresh] = index.emplace(a.step_id, out.size());
    if (fresh) out.push_back({a.step_id, "", ""});
    ReplayLine& line = out[it->second];
    const json outputs =
        a.outputs_json ? json::parse(*a.outputs_json, nullptr, false) : json::object();
    const json note =
        outputs.is_object() && outputs.contains("replay") ? outputs["replay"] : json();
    if (note.is_object()) {
      line.action = note.value("action", "");
      line.why = note.value("why", "");
    } else {
      line.action = "not run";
      line.why = a.error.value_or("");
    }
  }
  return out;
}

Result<std::vector<AttemptRow>> WorkflowStore::attempts(const std::string& run_id) {
  return store_.locked([&](Db& db) {
    return within("read the steps of run " + run_id,
                  rows<AttemptRow>(db, read_attempt,
                                   "SELECT " + std::string(kAttemptColumns) +
                                       " FROM step_attempts WHERE run_id = ?1 "
                                       "ORDER BY started_at, " +
                                       insertion_order(db),
                                   run_id));
  });
}

Result<int64_t> WorkflowStore::request_approval(const ApprovalRow& a) {
  if (!json::accept(a.request_json)) {
    return make_error("request approval", "the request is not valid JSON");
  }
  auto out = store_.locked([&](Db& db) -> Result<int64_t> {
    return within("request approval", write_transaction(db, [&]() -> Result<int64_t> {
                    return inserted_id(db,
                                       "INSERT INTO approvals (project_id, run_id, step_id, kind, "
                                       "request_json, state, created_at, expires_at) "
                                       "VALUES (?1, ?2, ?3, ?4, ?5, 'pending', ?6, ?7) "
                                       "RETURNING id",
                                       a.project_id, a.run_id, a.step_id, a.kind, a.request_json,
                                       store_.clock_now(), a.expires_at);
                  }));
  });
  if (out.ok() && a.run_id) store_.ring_run(*a.run_id);
  return out;
}

Result<ApprovalRow> WorkflowStore::approval(int64_t id) {
  return store_.locked([&](Db& db) -> Result<ApprovalRow> {
    auto a = first_row<ApprovalRow>(
        db, read_approval,
        "SELECT " + std::string(kApprovalColumns) + " FROM approvals WHERE id = ?1", id);
    if (!a.ok()) return a.take_error();
    if (!*a) return make_error("", "approval " + std::to_string(id) + " does not exist");
    return std::move(**a);
  });
}

Result<std::optional<ApprovalRow>> WorkflowStore::approval_for_step(const std::string& run_id,
                                                                    const std::string& step_id) {
  return store_.locked([&](Db& db) {
    return within("read the approval of step " + step_id,
                  first_row<ApprovalRow>(db, read_approval,
                                         "SELECT " + std::string(kApprovalColumns) +
                                             " FROM approvals WHERE run_id = ?1 AND step_id = ?2 "
                                             "ORDER BY id DESC LIMIT 1",
                                         run_id, step_id));
  });
}

Result<std::vector<ApprovalRow>> WorkflowStore::pending_approvals(const std::string& project) {
  return store_.locked([&](Db& db) {
    return within("list approvals",
                  rows<ApprovalRow>(db, read_approval,
                                    "SELECT " + std::string(kApprovalColumns) +
                                        " FROM approvals WHERE state = 'pending' AND "
                                        "(?1 = '' OR project_id = ?1) ORDER BY id",
                                    project));
  });
}

Status WorkflowStore::decide_approval(int64_t id, bool approve, const std::string& who,
                                      const std::string& reason) {
  std::optional<std::string> run;
  const std::string name = "approval " + std::to_string(id);
  auto out = store_.locked([&](Db& db) -> Status {
    return within(
        (approve ? "approve " : "deny ") + name, write_transaction(db, [&]() -> Status {
          auto a = first_row<ApprovalRow>(
              db, read_approval,
              "SELECT " + std::string(kApprovalColumns) + " FROM approvals WHERE id = ?1", id);
          if (!a.ok()) return a.take_error();
          if (!*a) return fail(name + " does not exist");
          if ((*a)->state != ApprovalState::pending) {
            return fail(name + " is " + std::string(to_string((*a)->state)) + " already" +
                        ((*a)->decided_by ? " (by " + *(*a)->decided_by + ")" : ""));
          }
          run = (*a)->run_id;
          const int64_t now = store_.clock_now();
          RF_TRY(exec(db,
                      "UPDATE approvals SET state = ?2, decided_by = ?3, reason = ?4, "
                      "decided_at = ?5 WHERE id = ?1",
                      id, std::string(approve ? "approved" : "denied"), who, reason, now));
          // On record with the decision, in its transaction.
          AuditEvent e;
          e.kind = approve ? "approval.approve" : "approval.deny";
          e.actor = who;
          e.project_id = (*a)->project_id;
          e.run_id = (*a)->run_id;
          e.detail_json =
              nlohmann::json{{"approval", id}, {"kind", (*a)->kind}, {"reason", reason}}.dump();
          return write_audit_in(db, {e}, now);
        }));
  });
  if (out.ok() && run) store_.ring_run(*run);
  return out;
}

Result<bool> WorkflowStore::expire_approval(int64_t id) {
  return store_.locked([&](Db& db) -> Result<bool> {
    return within("expire approval " + std::to_string(id),
                  write_transaction(db, [&]() -> Result<bool> {
                    RF_TRY(exec(db,
                                "UPDATE approvals SET state = 'expired', decided_at = ?2 "
                                "WHERE id = ?1 AND state = 'pending'",
                                id, store_.clock_now()));
                    return db.changes() == 1;
                  }));
  });
}

Result<bool> WorkflowStore::withdraw_approval(int64_t id, const std::string& by,
                                              const std::string& why) {
  return store_.locked([&](Db& db) -> Result<bool> {
    return within("withdraw approval " + std::to_string(id),
                  write_transaction(db, [&]() -> Result<bool> {
                    RF_TRY(exec(db,
                                "UPDATE approvals SET state = 'expired', decided_by = ?2, "
                                "reason = ?3, decided_at = ?4 WHERE id = ?1 AND state = 'pending'",
                                id, by, why, store_.clock_now()));
                    return db.changes() == 1;
                  }));
  });
}

Status WorkflowStore::put_artifact(const ArtifactRow& a) {
  if (!json::accept(a.ref_json)) return make_error("record artifact", "its reference is not JSON");
  return store_.locked([&](Db& db) -> Status {
    return within("record the artifact of step " + a.step_id + " of run " + a.run_id,
                  write_transaction(db, [&]() -> Status {
                    auto st = query(db,
                                    "INSERT INTO artifacts (run_id, step_id, attempt, dest, "
                                    "ref_json, data, size, sha256, created_at) "
                                    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) "
                                    "ON CONFLICT (run_id, step_id, attempt) DO UPDATE SET "
                                    "dest = excluded.dest, ref_json = excluded.ref_json, "
                                    "data = excluded.data, size = excluded.size, "
                                    "sha256 = excluded.sha256, created_at = excluded.created_at",
                                    a.run_id, a.step_id, a.attempt, a.dest, a.ref_json);
                    if (!st.ok()) return st.take_error();
                    if (a.data) {
                      st->bind_blob(6, *a.data);
                    } else {
                      st->bind_null(6);
                    }
                    st->bind(7, a.size).bind(8, a.sha256).bind(9, store_.clock_now());
                    return st->run();
                  }));
  });
}

Result<std::optional<ArtifactRow>> WorkflowStore::artifact(const std::string& run_id,
                                                           const std::string& step_id) {
  return store_.locked([&](Db& db) {
    return within("read the artifact of step " + step_id + " of run " + run_id,
                  first_row<ArtifactRow>(db, read_artifact,
                                         "SELECT run_id, step_id, attempt, dest, ref_json, data, "
                                         "size, sha256, created_at FROM artifacts "
                                         "WHERE run_id = ?1 AND step_id = ?2 "
                                         "ORDER BY attempt DESC LIMIT 1",
                                         run_id, step_id));
  });
}

}  // namespace rf::store
