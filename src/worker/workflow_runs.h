// Workflow runs on a worker (worker side, issue 12): claims queued runs (as
// many as max_runs at once, each under a lease its heartbeat keeps) and
// runs each with a RunExecutor on a thread of its own. Runs whose worker
// died go back to the queue (the housekeeping sweep, and a restart of the
// same host's worker), and are taken again here.
#pragma once

#include <atomic>
#include <condition_variable>
#include <list>
#include <memory>
#include <mutex>
#include <thread>

#include "worker/run_executor.h"
#include "worker/step_context.h"

namespace rf::worker {

class WorkflowRuns {
 public:
  explicit WorkflowRuns(WorkflowServices services);
  ~WorkflowRuns();
  void start();
  // Stops claiming; running steps get `grace` to finish (no new step
  // starts), then are ended (their attempts interrupted). The runs go back to
  // the queue, for the next worker to continue.
  void stop(std::chrono::milliseconds grace = std::chrono::milliseconds(0));
  // Runs not yet ended here (a draining worker waits for none).
  size_t live() {
    std::lock_guard lock(mu_);
    size_t n = 0;
    for (const Running& r : running_) n += r.done ? 0 : 1;
    return n;
  }

 private:
  void claim_loop();

  WorkflowServices s_;
  std::mutex mu_;
  struct Running {
    std::unique_ptr<RunExecutor> executor;
    std::thread thread;
    std::atomic<bool> done{false};
  };
  std::list<Running> running_;
  std::atomic<bool> stopping_{false};
  std::thread claimer_;
};

}  // namespace rf::worker
