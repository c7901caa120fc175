#include "worker/sandbox_router.h"

#include "core/log.h"

namespace rf::worker {

SandboxRouter::SandboxRouter(SandboxMode mode, Backend& backend, SandboxSpec spec, WarmPool* pool,
                             std::string project, std::chrono::milliseconds idle_timeout,
                             SandboxLedger* ledger)
    : mode_(mode),
      backend_(backend),
      spec_(std::move(spec)),
      pool_(pool),
      pinned_project_(std::move(project)),
      idle_timeout_(idle_timeout),
      ledger_(ledger) {}

SandboxRouter::~SandboxRouter() { destroy_all(); }

Result<std::shared_ptr<Sandbox>> SandboxRouter::fresh(const std::string& project,
                                                      const std::string& run,
                                                      const std::string& image, bool intercept) {
  Result<std::unique_ptr<Sandbox>> sb = make_error("sandbox", "not made");
  if (pool_ && image == spec_.image && !intercept) {
    sb = pool_->acquire();  // made before its project was known: the store has it
  } else {
    SandboxSpec spec = spec_;
    spec.labels["project"] = project;
    if (!run.empty()) spec.labels["run"] = run;
    spec.image = image;
    // Only with network proxy: elsewhere identity refuses the keys, naming why.
    spec.tls_intercept = intercept && spec.network == NetworkPolicy::kProxy;
    sb = backend_.create(spec);
    if (!sb && image != spec_.image)
      return make_error("sandbox_image " + image, sb.error().to_string());
  }
  if (!sb) return sb.take_error();
  std::shared_ptr<Sandbox> out(std::move(*sb));
  if (ledger_)
    ledger_->bound(out->id(), backend_.name(), project, run, to_string(mode_), out->init_pid());
  return out;
}

void SandboxRouter::destroy(const std::shared_ptr<Sandbox>& sandbox) {
  warn_unless_ok(sandbox->destroy(), "destroying sandbox " + sandbox->id());
  if (ledger_) ledger_->destroyed(sandbox->id());
}

Result<SandboxLease> SandboxRouter::acquire(const std::string& project, const std::string& run,
                                            const std::string& requested_image, bool dedicated,
                                            bool intercept) {
  const std::string image = requested_image.empty() ? spec_.image : requested_image;
  if (mode_ == SandboxMode::kNone && image != spec_.image) {
    return make_error("sandbox_image " + image,
                      "sandbox mode none runs calls in a local scratch directory, with no image");
  }
  if (mode_ == SandboxMode::kPerWorker && project != pinned_project_) {
    return make_error("project " + project, "this worker is per_worker for project " +
                                                pinned_project_ + " and serves no other");
  }
  if (mode_ == SandboxMode::kNone || mode_ == SandboxMode::kPerTool || dedicated) {
    auto sb = fresh(project, run, image, intercept);
    if (!sb) return sb.take_error();
    std::lock_guard lock(mu_);
    lent_.push_back(*sb);
    return SandboxLease{std::move(*sb), /*destroy_after=*/true};
  }
  const std::string key = mode_ == SandboxMode::kPerWorker ? "" : run;
  std::lock_guard lock(mu_);
  auto it = runs_.find(key);
  if (it != runs_.end() && it->second.project != project) {
    // The store ties a run to one project; refuse rather than share if it ever did not.
    return make_error("run " + run,
                      "belongs to project " + it->second.project + ", not " + project);
  }
  if (it != runs_.end() && it->second.image != image) {
    return make_error("sandbox_image " + image,
                      (mode_ == SandboxMode::kPerWorker ? std::string("this worker's sandbox")
                                                        : "run " + run + "'s sandbox") +
                          " runs image " + it->second.image + "; one sandbox has one image");
  }
  if (it == runs_.end()) {
    // Under the lock: two calls of a new run must not make two sandboxes.
    auto sb = fresh(project, mode_ == SandboxMode::kPerWorker ? "" : run, image, intercept);
    if (!sb) return sb.take_error();
    it = runs_.emplace(key, RunSandbox{std::move(*sb), project, image, {}, 0}).first;
  }
  it->second.in_use++;
  it->second.last_used = std::chrono::steady_clock::now();
  return SandboxLease{it->second.sandbox, false};
}

void SandboxRouter::release(SandboxLease&& lease) {
  if (lease.destroy_after) {
    {
      std::lock_guard lock(mu_);
      std::erase(lent_, lease.sandbox);
    }
    destroy(lease.sandbox);
    return;
  }
  std::lock_guard lock(mu_);
  for (auto& [_, rs] : runs_) {
    if (rs.sandbox == lease.sandbox) {
      rs.in_use--;
      rs.last_used = std::chrono::steady_clock::now();
    }
  }
}

void SandboxRouter::discard(const std::shared_ptr<Sandbox>& sandbox) {
  std::shared_ptr<Sandbox> gone;
  {
    std::lock_guard lock(mu_);
    for (auto it = runs_.begin(); it != runs_.end(); ++it) {
      if (it->second.sandbox == sandbox) {
        gone = std::move(it->second.sandbox);
        runs_.erase(it);
        break;
      }
    }
  }
  if (gone) return destroy(gone);
  // Lent to a call: ended now; release() reports it destroyed (destroy is idempotent).
  warn_unless_ok(sandbox->destroy(), "destroying sandbox " + sandbox->id());
}

void SandboxRouter::end_run(const std::string& run) {
  std::shared_ptr<Sandbox> gone;
  {
    std::lock_guard lock(mu_);
    auto it = runs_.find(run);
    if (it == runs_.end() || mode_ != SandboxMode::kPerRun) return;
    gone = std::move(it->second.sandbox);
    runs_.erase(it);
  }
  destroy(gone);
}

std::vector<std::string> SandboxRouter::reap_idle() {
  std::vector<std::string> reaped;
  std::vector<std::shared_ptr<Sandbox>> gone;
  {
    std::lock_guard lock(mu_);
    if (mode_ != SandboxMode::kPerRun) return reaped;
    const auto now = std::chrono::steady_clock::now();
    for (auto it = runs_.begin(); it != runs_.end();) {
      if (it->second.in_use == 0 && now - it->second.last_used >= idle_timeout_) {
        reaped.push_back(it->first);
        gone.push_back(std::move(it->second.sandbox));
        it = runs_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& sb : gone) destroy(sb);
  return reaped;
}

std::vector<std::string> SandboxRouter::live_runs() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const auto& [run, _] : runs_) out.push_back(run);
  return out;
}

void SandboxRouter::destroy_all() {
  std::map<std::string, RunSandbox> all;
  std::vector<std::shared_ptr<Sandbox>> lent;
  {
    std::lock_guard lock(mu_);
    all.swap(runs_);
    lent = lent_;  // their calls still hold them and release them later
  }
  for (auto& [_, rs] : all) destroy(rs.sandbox);
  for (auto& sb : lent) destroy(sb);
}

}  // namespace rf::worker
