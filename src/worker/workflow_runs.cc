#include "worker/workflow_runs.h"

#include "core/log.h"
#include "store/workflow_store.h"

namespace rf::worker {

WorkflowRuns::WorkflowRuns(WorkflowServices services) : s_(std::move(services)) {}

WorkflowRuns::~WorkflowRuns() { stop(); }

void WorkflowRuns::start() {
  claimer_ = std::thread([this] { claim_loop(); });
}

void WorkflowRuns::claim_loop() {
  store::WorkflowStore wf(*s_.store);
  while (!stopping_) {
    size_t live = 0;
    {
      std::lock_guard lock(mu_);
      for (auto it = running_.begin(); it != running_.end();) {
        if (it->done) {
          it->thread.join();
          it = running_.erase(it);
        } else {
          ++it;
        }
      }
      live = running_.size();
    }
    // The runs' queue: queued calls do not wake this claimer.
    const uint32_t seen = s_.store->queue_version(store::Store::Queue::runs);
    if (live < static_cast<size_t>(s_.max_runs)) {
      auto claimed = wf.claim_run(s_.worker_id, s_.lease,
                                  s_.settings ? s_.settings->labels.value : store::Labels{});
      if (!claimed) {
        spdlog::warn("claiming a workflow run: {}", claimed.error().to_string());
      } else if (*claimed) {
        spdlog::info("workflow run {} ({}) claimed", (**claimed).run_id, (**claimed).workflow);
        std::lock_guard lock(mu_);
        Running& r = running_.emplace_back();
        r.executor = std::make_unique<RunExecutor>(s_, std::move(**claimed));
        r.thread = std::thread([&r] {
          r.executor->run();
          r.done = true;
        });
        continue;  // look again at once: more may be queued
      }
    }
    if (!stopping_) {
      s_.store->wait_for_queue(seen, std::chrono::milliseconds(250), store::Store::Queue::runs);
    }
  }
}

void WorkflowRuns::stop(std::chrono::milliseconds grace) {
  if (stopping_.exchange(true)) return;
  s_.store->wake_queue_waiters();
  if (claimer_.joinable()) claimer_.join();
  {
    std::lock_guard lock(mu_);
    for (auto& r : running_) r.executor->drain();
  }
  const auto deadline = std::chrono::steady_clock::now() + grace;
  for (;;) {
    bool all = true;
    {
      std::lock_guard lock(mu_);
      for (auto& r : running_) all = all && r.done;
    }
    if (all || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  {
    std::lock_guard lock(mu_);
    for (auto& r : running_) r.executor->stop("the worker stopped while the step ran");
  }
  for (auto& r : running_) {
    if (r.thread.joinable()) r.thread.join();
  }
  running_.clear();
  // What is left goes back to the queue: the next worker continues it.
  store::WorkflowStore wf(*s_.store);
  auto n = wf.requeue_runs_of_worker(s_.worker_id, "worker " + s_.worker_id + " stopped");
  if (n && *n > 0) spdlog::warn("{} workflow runs go back to the queue", *n);
}

}  // namespace rf::worker
