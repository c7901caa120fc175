// Waiting for a workflow run (cli side, issue 12), and with --follow telling
// its story as it happens: each step's start and mode, its sandbox, its
// output (each line prefixed with the step), and its end. Reads the run's
// events and its steps' calls from the store, sleeping on the run's doorbell.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "store/store.h"
#include "store/workflow_store.h"

namespace rf::cli {

struct FollowOptions {
  bool follow = false;  // print the story; else only the end
  std::string state_dir;
};

// Returns the run's end state (queued/running only if the store failed).
Result<store::WorkflowRunRow> wait_for_run(store::Store& store, const std::string& run_id,
                                           const FollowOptions& options);

// Waits (following or not), then prints the end (the steps table, or with
// `as_json` the run as JSON). Returns the exit code: 0 when the run
// succeeded, 1 when it failed or was cancelled, 125 when the store failed.
int follow_to_end(store::Store& store, const std::string& run_id, const FollowOptions& options,
                  bool as_json);

// A replay's report (`run replay --follow` prints it at the end): per step
// what was done (re-run, answered from record, skipped ..., store::ReplayLine).
void print_replay_report(store::Store& store, const store::WorkflowRunRow& run);

// `run show`'s table of a workflow run's steps (a replay's report first).
void print_workflow_run(store::Store& store, const store::WorkflowRunRow& run);
// The same as JSON: the run, its steps with every attempt, their artifacts.
nlohmann::json workflow_run_json(store::Store& store, const store::WorkflowRunRow& run);

}  // namespace rf::cli
