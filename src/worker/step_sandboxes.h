// The sandboxes of one workflow run's steps (worker side, issue 12). A step's
// sandbox is the worker's spec with the step's own changes (image, limits,
// network, allow rules):
//   per_tool (the default)  a sandbox for this step alone, destroyed after it
//   per_run                 kept for the run's later steps that ask for the
//                           same spec and the same identity scope; destroyed
//                           when the run ends
// A sandbox is never shared with another run or project, and one that
// received identity values is never lent to a step of another scope. A step
// whose spec is the worker's own takes a warm sandbox from the pool (it has
// run nothing, so it may receive identity values).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "sandbox/sandbox.h"
#include "worker/serving.h"

namespace rf::worker {

struct StepSandbox {
  std::shared_ptr<Sandbox> sandbox;
  bool per_run = false;
  bool reused = false;  // a per_run sandbox an earlier step made
};

class StepSandboxes {
 public:
  // `serving` is the worker's serving when the run started: its backend,
  // pool and ledger serve the whole run.
  StepSandboxes(std::shared_ptr<Serving> serving, SandboxLedger* ledger, std::string project,
                std::string run);
  ~StepSandboxes();
  StepSandboxes(const StepSandboxes&) = delete;
  StepSandboxes& operator=(const StepSandboxes&) = delete;

  // `scope`: the identity scope the step will inject ("" = none).
  Result<StepSandbox> acquire(const SandboxSpec& spec, bool per_run, const std::string& scope);
  // per_tool sandboxes are destroyed; per_run ones stay for the run.
  void release(StepSandbox&& lease);
  // Ends it now (cancel, hard revocation); a per_run one is forgotten.
  void discard(const std::shared_ptr<Sandbox>& sandbox);
  // The run ended: every sandbox it kept goes. Returns their ids.
  std::vector<std::string> destroy_all();
  // The backend the run's sandboxes come from ("native", "docker", "local").
  std::string backend_name() const;
  SandboxMode worker_mode() const;
  // What an image is, for a step's record: "host" for the native host image,
  // else what the backend says of it (docker: its digest). Asked once per run.
  std::string image_digest(const std::string& image);
  // The spec the worker's sandboxes are made from: a step's starts from it.
  const SandboxSpec& base_spec() const { return serving_->spec; }

 private:
  void destroy(const std::shared_ptr<Sandbox>& sandbox);

  std::shared_ptr<Serving> serving_;
  SandboxLedger* ledger_;
  const std::string project_, run_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Sandbox>> kept_;  // per_run: by spec key + scope
  std::map<std::string, int> in_use_;                     // per_run: steps using each now
  std::map<std::string, std::string> image_digests_;
};

}  // namespace rf::worker
