#include "cli/call_wait.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "worker/worker.h"

namespace rf::cli {
namespace {

std::string this_host() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

// A worker of this host whose process is gone died without stopping (kill -9):
// its row says running until another worker starts and sweeps it.
bool process_gone(const store::WorkerRow& w, const std::string& host) {
  if (w.hostname != host || w.pid <= 0) return false;
  return ::kill(static_cast<pid_t>(w.pid), 0) != 0 && errno == ESRCH;
}

}  // namespace

Result<bool> live_worker_serves(store::Store& store, const std::string& project,
                                const store::Labels& labels, int64_t now_ms) {
  auto workers = store.workers_serving(project, now_ms - kWorkerStaleAfter.count());
  if (!workers) return workers.take_error();
  const std::string host = this_host();
  return std::any_of(workers->begin(), workers->end(), [&](const store::WorkerRow& w) {
    return !process_gone(w, host) && store::labels_match(labels, w.labels);
  });
}

std::string no_worker_notice(const QueueWatchOptions& o) {
  std::string text =
      "ringfence: call " + std::to_string(o.call_id) + " waits: no live worker serves project " +
      o.project + (o.labels.empty() ? "" : " with labels " + store::labels_text(o.labels)) +
      " in store " + o.store_path +
      (o.labels.empty() ? "; it runs when one starts"
       : o.wait_timeout ? "; it runs if one starts within --wait-timeout " + o.wait_timeout_text +
                              ", else it is cancelled"
                        : "; it runs if one starts, else a live worker fails it within seconds "
                          "naming what each lacks");
  if (o.labels.empty()) {
    text += o.wait_timeout ? " (or is cancelled after --wait-timeout " + o.wait_timeout_text + ")"
                           : " (no --wait-timeout: it waits until then)";
  }
  text += "\nringfence: start one with: ringfence worker start --state-dir " + o.state_dir;
  // On the store this call is in (issue 40: the hint sent workers to the
  // state dir's SQLite file while the call waited in PostgreSQL).
  if (o.store_path != worker::store_path(o.state_dir)) text += " --store " + o.store_path;
  text += " --project-environment " + std::string(store::to_string(o.environment));
  for (const auto& [k, v] : o.labels) text += " --label " + k + "=" + v;
  text += "\n";
  return text;
}

QueueWatch::QueueWatch(QueueWatchOptions options)
    : o_(std::move(options)),
      enqueued_(std::chrono::steady_clock::now()),
      next_look_(enqueued_ + kLookForWorkersAfter) {}

std::chrono::milliseconds QueueWatch::next_look(std::chrono::milliseconds at_most) const {
  if (claimed_) return at_most;
  const auto now = std::chrono::steady_clock::now();
  auto due = next_look_;
  // Past the deadline a cancel that failed (a busy store) is tried at most every `at_most`.
  if (o_.wait_timeout && enqueued_ + *o_.wait_timeout > now)
    due = std::min(due, enqueued_ + *o_.wait_timeout);
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(due - now);
  return std::clamp(left, std::chrono::milliseconds(1), at_most);
}

void QueueWatch::look_for_workers(store::Store& store) {
  auto live = live_worker_serves(store, o_.project, o_.labels, store::now_ms());
  if (!live) {
    if (!look_failed_)  // said once; the call still waits, and the next look may work
      std::fprintf(stderr, "ringfence: call %lld waits; looking for live workers failed: %s\n",
                   static_cast<long long>(o_.call_id), live.error().to_string().c_str());
    look_failed_ = true;
    return;
  }
  if (*live) {
    announced_ = false;  // a later stretch without one is said again
    return;
  }
  if (announced_) return;
  announced_ = true;
  std::fputs(no_worker_notice(o_).c_str(), stderr);
}

QueueWatch::Verdict QueueWatch::still_queued(store::Store& store) {
  if (claimed_) return Verdict::keep_waiting;
  const auto now = std::chrono::steady_clock::now();
  if (o_.wait_timeout && now >= enqueued_ + *o_.wait_timeout) {
    auto cancelled = store.cancel_queued_call(
        o_.call_id, "no worker claimed it within --wait-timeout " + o_.wait_timeout_text);
    if (cancelled && *cancelled) return Verdict::cancelled;
    if (!cancelled) {
      if (!cancel_failed_)
        std::fprintf(stderr, "ringfence: call %lld: %s; trying again\n",
                     static_cast<long long>(o_.call_id), cancelled.error().to_string().c_str());
      cancel_failed_ = true;
      return Verdict::keep_waiting;  // tried again on the next look
    }
    claimed_ = true;  // a worker took it first: it runs, and the client waits for it
    return Verdict::keep_waiting;
  }
  if (now >= next_look_) {
    next_look_ = now + kLookAgainEvery;
    look_for_workers(store);
  }
  return Verdict::keep_waiting;
}

}  // namespace rf::cli
