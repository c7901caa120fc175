#include "worker/step_sandboxes.h"

#include "core/log.h"
#include "worker/pool.h"

namespace rf::worker {

StepSandboxes::StepSandboxes(std::shared_ptr<Serving> serving, SandboxLedger* ledger,
                             std::string project, std::string run)
    : serving_(std::move(serving)),
      ledger_(ledger),
      project_(std::move(project)),
      run_(std::move(run)) {}

StepSandboxes::~StepSandboxes() { destroy_all(); }

std::string StepSandboxes::backend_name() const { return serving_->placement.backend->name(); }
SandboxMode StepSandboxes::worker_mode() const { return serving_->placement.mode; }

std::string StepSandboxes::image_digest(const std::string& image) {
  {
    std::lock_guard lock(mu_);
    auto it = image_digests_.find(image);
    if (it != image_digests_.end()) return it->second;
  }
  std::string digest = image;
  if (image != "host") {
    auto report = serving_->placement.backend->prepare_image(image);
    digest = report ? image + " (" + report->description + ")"
                    : image + " (" + report.error().to_string() + ")";
  }
  std::lock_guard lock(mu_);
  image_digests_[image] = digest;
  return digest;
}

Result<StepSandbox> StepSandboxes::acquire(const SandboxSpec& requested, bool per_run,
                                           const std::string& scope) {
  const std::string key = pool_key(requested) + "\n" + scope;
  if (per_run) {
    std::lock_guard lock(mu_);
    auto it = kept_.find(key);
    if (it != kept_.end()) {
      ++in_use_[key];
      return StepSandbox{it->second, true, true};
    }
  }
  Backend& backend = *serving_->placement.backend;
  Result<std::unique_ptr<Sandbox>> made = make_error("sandbox", "not made");
  WarmPool* pool = serving_->pool.get();
  if (pool != nullptr && pool->key() == pool_key(requested)) {
    made = pool->acquire();  // has run nothing yet: it may receive identity values
  } else {
    SandboxSpec spec = requested;
    spec.labels["project"] = project_;
    spec.labels["run"] = run_;
    spec.labels["mode"] = per_run ? "per_run" : "per_tool";
    made = backend.create(spec);
  }
  if (!made) return made.take_error();
  std::shared_ptr<Sandbox> sb(std::move(*made));
  if (ledger_) {
    ledger_->bound(sb->id(), backend.name(), project_, run_, per_run ? "per_run" : "per_tool",
                   sb->init_pid());
  }
  if (per_run) {
    std::lock_guard lock(mu_);
    auto [it, fresh] = kept_.emplace(key, sb);
    if (!fresh) {
      // Another step of the run made one meanwhile: use that, drop ours.
      ++in_use_[key];
      auto theirs = it->second;
      destroy(sb);
      return StepSandbox{theirs, true, true};
    }
    ++in_use_[key];
  }
  return StepSandbox{std::move(sb), per_run, false};
}

void StepSandboxes::release(StepSandbox&& lease) {
  if (!lease.sandbox) return;
  if (!lease.per_run) return destroy(lease.sandbox);
  std::lock_guard lock(mu_);
  for (auto& [key, sb] : kept_) {
    if (sb == lease.sandbox && in_use_[key] > 0) --in_use_[key];
  }
}

void StepSandboxes::discard(const std::shared_ptr<Sandbox>& sandbox) {
  {
    std::lock_guard lock(mu_);
    for (auto it = kept_.begin(); it != kept_.end(); ++it) {
      if (it->second == sandbox) {
        in_use_.erase(it->first);
        kept_.erase(it);
        break;
      }
    }
  }
  destroy(sandbox);
}

std::vector<std::string> StepSandboxes::destroy_all() {
  std::map<std::string, std::shared_ptr<Sandbox>> all;
  {
    std::lock_guard lock(mu_);
    all.swap(kept_);
    in_use_.clear();
  }
  std::vector<std::string> ids;
  for (auto& [key, sb] : all) {
    ids.push_back(sb->id());
    destroy(sb);
  }
  return ids;
}

void StepSandboxes::destroy(const std::shared_ptr<Sandbox>& sandbox) {
  warn_unless_ok(sandbox->destroy(), "destroying sandbox " + sandbox->id());
  if (ledger_) ledger_->destroyed(sandbox->id());
}

}  // namespace rf::worker
