// What a worker serves calls with (worker side): the placement (backend and
// sandbox mode, after fallback), its warm pool and its router. The worker
// replaces it as a whole when the backend turns unhealthy while running
// (fallback) or well again (recovery); a call in flight keeps the one it
// started with, and the last call out destroys an old one's sandboxes.
#pragma once

#include <atomic>
#include <memory>

#include "worker/pool.h"
#include "worker/sandbox_ledger.h"
#include "worker/sandbox_router.h"
#include "worker/settings.h"

namespace rf::worker {

// The backend and mode a worker actually runs with, after fallback.
struct Placement {
  std::unique_ptr<Backend> backend;
  SandboxMode mode = SandboxMode::kNone;
  std::vector<std::string> warnings;  // one per fallback step, with the reason
};

struct Serving {
  // `on_warm`: given to the warm pool (WarmPool::OnWarm).
  static std::shared_ptr<Serving> make(Placement placement, const WorkerSettings& settings,
                                       SandboxLedger* ledger, WarmPool::OnWarm on_warm = nullptr);
  ~Serving() { shutdown(); }
  // Destroys its sandboxes (pooled, per_run, per_worker) and stops the pool's
  // refill; the router then has nothing to lend and must not be asked.
  void shutdown();

  // Sandbox creations that failed in a row, on the call path or in the pool.
  int failures_in_a_row() const;
  bool serves(BackendKind backend, SandboxMode mode) const;

  Placement placement;
  SandboxSpec spec;  // what its sandboxes are made from (workflow steps start from it)
  std::unique_ptr<WarmPool> pool;
  std::unique_ptr<SandboxRouter> router;
  std::atomic<int> call_path_failures{0};
};

}  // namespace rf::worker
