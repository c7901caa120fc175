// Sandbox modes (worker side): which sandbox a tool call runs in.
//   none        a fresh local sandbox (scratch dir, scrubbed env) per call
//   per_tool    a fresh sandbox per call, from the warm pool, destroyed after
//   per_run     one sandbox per run, reused by that run's calls, destroyed when
//               the run ends or stays idle past the idle timeout
//   per_worker  one long-lived sandbox, pinned to one project
// A sandbox is never shared between runs or projects.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "sandbox/sandbox.h"
#include "worker/pool.h"
#include "worker/sandbox_ledger.h"
#include "worker/settings.h"

namespace rf::worker {

// A sandbox lent to one call. per_tool/none sandboxes die with the lease.
struct SandboxLease {
  std::shared_ptr<Sandbox> sandbox;
  bool destroy_after = false;
};

class SandboxRouter {
 public:
  // `pool` may be null (mode none, or no warm pool); `project` pins per_worker;
  // `ledger` (may be null) hears of every sandbox bound to a call or run and
  // of every one destroyed.
  SandboxRouter(SandboxMode mode, Backend& backend, SandboxSpec spec, WarmPool* pool,
                std::string project, std::chrono::milliseconds idle_timeout,
                SandboxLedger* ledger = nullptr);
  ~SandboxRouter();

  // `image`: the call's own sandbox image (an agent's override); "" or the
  // worker's image take the usual path (and the pool). A run keeps the image
  // of its first call; a later call asking for another one is refused.
  // `dedicated`: a sandbox of this call's own, destroyed after it, whatever
  // the mode (a per_worker worker's identity-scoped call: its values must not
  // stay in a sandbox other runs share).
  // `intercept`: the call has proxy-delivered keys, so its sandbox must trust a
  // CA of its own (spec tls_intercept): a fresh one (never the pool's), and
  // a run's existing sandbox only if it was made so.
  Result<SandboxLease> acquire(const std::string& project, const std::string& run,
                               const std::string& image = "", bool dedicated = false,
                               bool intercept = false);
  void release(SandboxLease&& lease);
  // Ends the sandbox now (a hard revocation): the calls in it end; a run's
  // sandbox is forgotten, so the run's next call gets a new one.
  void discard(const std::shared_ptr<Sandbox>& sandbox);
  // The run ended: its per_run sandbox goes.
  void end_run(const std::string& run);
  // per_run sandboxes idle past the timeout go. Returns the runs whose sandbox went.
  std::vector<std::string> reap_idle();
  std::vector<std::string> live_runs() const;
  void destroy_all();
  SandboxMode mode() const { return mode_; }

 private:
  // A new sandbox (from the pool when there is one), bound to project/run.
  Result<std::shared_ptr<Sandbox>> fresh(const std::string& project, const std::string& run,
                                         const std::string& image, bool intercept);
  void destroy(const std::shared_ptr<Sandbox>& sandbox);

  struct RunSandbox {
    std::shared_ptr<Sandbox> sandbox;
    std::string project;
    std::string image;
    std::chrono::steady_clock::time_point last_used;
    int in_use = 0;
  };

  const SandboxMode mode_;
  Backend& backend_;
  const SandboxSpec spec_;
  WarmPool* pool_;
  const std::string pinned_project_;
  const std::chrono::milliseconds idle_timeout_;
  SandboxLedger* ledger_;
  mutable std::mutex mu_;
  std::map<std::string, RunSandbox> runs_;      // per_run: by run id; per_worker: one entry ""
  std::vector<std::shared_ptr<Sandbox>> lent_;  // none/per_tool sandboxes out with a call
};

}  // namespace rf::worker
