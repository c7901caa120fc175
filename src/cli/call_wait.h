// `ringfence call` while its call waits in the queue (client side): whether any
// live worker serves the call's project, the notice that says none does and
// how to start one, and --wait-timeout, which cancels a call no worker claimed.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "core/result.h"
#include "store/store.h"

namespace rf::cli {

// A worker is live while it is registered running, has heartbeat within
// store::kLiveWorkerWindow, and, on this host, its pid exists.
inline constexpr std::chrono::milliseconds kWorkerStaleAfter = store::kLiveWorkerWindow;
// A call still queued this long makes the client look for live workers (a live
// one claims within milliseconds; the fast path never looks).
inline constexpr std::chrono::milliseconds kLookForWorkersAfter{1'000};
inline constexpr std::chrono::milliseconds kLookAgainEvery{1'000};

// Whether a live worker may claim calls of `project` that require `labels` at `now_ms`.
Result<bool> live_worker_serves(store::Store& store, const std::string& project,
                                const store::Labels& labels, int64_t now_ms);

struct QueueWatchOptions {
  int64_t call_id = 0;
  std::string project;
  store::Labels labels;  // the call requires them of its worker
  std::string store_path;
  std::string state_dir;
  store::Environment environment = store::Environment::development;
  // Give up when no worker claimed the call within this long; nullopt: never.
  std::optional<std::chrono::milliseconds> wait_timeout;
  std::string wait_timeout_text;  // as the user wrote it, for the messages
};

class QueueWatch {
 public:
  enum class Verdict { keep_waiting, cancelled };

  explicit QueueWatch(QueueWatchOptions options);
  // The client saw the call still queued: prints the notice when no live worker
  // serves it (once per stretch without one), and past --wait-timeout cancels
  // it. A cancel that loses to a claim returns keep_waiting: the call runs.
  Verdict still_queued(store::Store& store);
  // A worker took the call: no notice and no timeout from now on.
  void claimed() { claimed_ = true; }
  // How long the client may sleep before it must look again.
  std::chrono::milliseconds next_look(std::chrono::milliseconds at_most) const;

 private:
  void look_for_workers(store::Store& store);

  QueueWatchOptions o_;
  std::chrono::steady_clock::time_point enqueued_;
  std::chrono::steady_clock::time_point next_look_;
  bool announced_ = false;
  bool claimed_ = false;
  bool cancel_failed_ = false;  // said once
  bool look_failed_ = false;    // said once
};

// The notice's two lines, for a call no live worker serves.
std::string no_worker_notice(const QueueWatchOptions& o);

}  // namespace rf::cli
