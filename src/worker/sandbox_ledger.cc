#include "worker/sandbox_ledger.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/log.h"

namespace rf::worker {

SandboxLedger::SandboxLedger(store::Store& store, std::string worker_id,
                             std::chrono::milliseconds period)
    : store_(store),
      worker_id_(std::move(worker_id)),
      period_(period),
      thread_([this] { loop(); }) {}

SandboxLedger::~SandboxLedger() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
  flush();
}

void SandboxLedger::bound(const std::string& id, const std::string& backend,
                          const std::string& project, const std::string& run,
                          const std::string& mode, int host_pid, const std::string& spec_json,
                          const std::string& actor) {
  store::SandboxRow row;
  row.id = id;
  row.backend = backend;
  row.project_id = project;
  if (!run.empty()) row.run_id = run;
  row.mode = mode;
  row.worker_id = worker_id_;
  if (host_pid > 0) row.host_pid = host_pid;
  row.state = store::SandboxState::active;
  if (!spec_json.empty()) row.spec_json = spec_json;
  // A run's, a worker's or a front door's sandbox lives long and comes once:
  // written at once, so `sandbox list` (and every serve) shows it right away.
  const bool soon = mode == "per_run" || mode == "per_worker" || mode == "api";
  store::AuditEvent e;
  e.at = store::now_ms();
  e.kind = "sandbox.create";
  e.actor = "worker " + worker_id_;
  e.project_id = project;
  if (!run.empty()) e.run_id = run;
  e.sandbox_id = id;
  nlohmann::json detail = {{"backend", backend}, {"mode", mode}};
  if (!actor.empty()) detail["by"] = actor;
  e.detail_json = detail.dump();
  {
    std::lock_guard lock(mu_);
    lifecycle_.push_back(std::move(e));
    created_.push_back(std::move(row));
    urgent_ = urgent_ || soon;
  }
  if (soon) cv_.notify_all();
}

void SandboxLedger::destroyed(const std::string& id, const std::string& actor,
                              const std::string& project, const std::string& reason) {
  store::AuditEvent e;
  e.at = store::now_ms();
  e.kind = "sandbox.destroy";
  e.actor = "worker " + worker_id_;
  e.sandbox_id = id;
  nlohmann::json detail = nlohmann::json::object();
  if (!actor.empty()) detail["by"] = actor;
  if (!reason.empty()) detail["reason"] = reason;  // why it ended: "timeout", "idle"
  if (!detail.empty()) e.detail_json = detail.dump();
  if (!project.empty()) e.project_id = project;
  std::lock_guard lock(mu_);
  lifecycle_.push_back(std::move(e));
  // Created since the last flush: it was never written, and never will be.
  auto it =
      std::find_if(created_.begin(), created_.end(), [&](const auto& r) { return r.id == id; });
  if (it != created_.end()) {
    created_.erase(it);
    return;
  }
  destroyed_.push_back(id);
}

void SandboxLedger::flush() {
  std::lock_guard flushing(flush_mu_);
  std::vector<store::SandboxRow> created;
  std::vector<std::string> destroyed;
  std::vector<store::AuditEvent> lifecycle;
  {
    std::lock_guard lock(mu_);
    created.swap(created_);
    destroyed.swap(destroyed_);
    lifecycle.swap(lifecycle_);
  }
  if (!created.empty() || !destroyed.empty()) {
    if (auto s = store_.record_sandboxes(created, destroyed); !s) {
      spdlog::warn("recording {} new and {} destroyed sandboxes: {}", created.size(),
                   destroyed.size(), s.error().to_string());
    }
  }
  if (!lifecycle.empty()) {
    if (auto s = store::AuditLog(store_).append_all(lifecycle); !s) {
      spdlog::warn("auditing {} sandbox lifecycle events: {}", lifecycle.size(),
                   s.error().to_string());
    }
  }
}

void SandboxLedger::loop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, period_, [&] { return stopping_ || urgent_; });
    if (stopping_) break;
    urgent_ = false;
    if (created_.empty() && destroyed_.empty() && lifecycle_.empty()) continue;
    lock.unlock();
    flush();
    lock.lock();
  }
}

}  // namespace rf::worker
