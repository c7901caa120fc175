#include "worker/serving.h"

#include <spdlog/spdlog.h>

namespace rf::worker {

std::shared_ptr<Serving> Serving::make(Placement placement, const WorkerSettings& s,
                                       SandboxLedger* ledger, WarmPool::OnWarm on_warm) {
  auto out = std::make_shared<Serving>();
  out->placement = std::move(placement);
  const SandboxMode mode = out->placement.mode;
  Backend& backend = *out->placement.backend;
  SandboxSpec spec = s.sandbox_spec();
  if (mode == SandboxMode::kNone) spec = SandboxSpec{.backend = BackendKind::kLocal};
  // The backend that serves (a fallback may stand in for the configured one).
  if (mode != SandboxMode::kNone) spec.backend = backend.kind();
  // native has one image: a docker image cannot follow a fallback onto it.
  if (spec.backend == BackendKind::kNative && spec.image != "host") {
    spdlog::warn("backend native serves with its host image; image {} is not used here",
                 spec.image);
    spec.image = "host";
  }
  spec.labels["mode"] = to_string(mode);
  // Every sandbox a call runs in gets a boundary report (ProofRecorder): its
  // self-probe starts with it (runner/self_probe.h, "At the start").
  spec.probe_at_start = true;
  out->spec = spec;
  if ((mode == SandboxMode::kPerTool || mode == SandboxMode::kPerRun) && s.pool_target.value > 0) {
    out->pool = std::make_unique<WarmPool>(backend, spec, s.pool_target.value, s.pool_max.value,
                                           std::move(on_warm));
    out->pool->start();
  }
  out->router = std::make_unique<SandboxRouter>(mode, backend, spec, out->pool.get(),
                                                s.project.value, s.idle_timeout.value, ledger);
  return out;
}

void Serving::shutdown() {
  if (router) router->destroy_all();
  pool.reset();
}

int Serving::failures_in_a_row() const {
  return call_path_failures.load() + (pool ? pool->failures_in_a_row() : 0);
}

bool Serving::serves(BackendKind backend, SandboxMode mode) const {
  return placement.backend->kind() == backend && placement.mode == mode;
}

}  // namespace rf::worker
