// The worker's record of its sandboxes in the store (worker side), so that
// `ringfence sandbox list --state-dir` shows each one's project, run and mode.
// Writes are batched: a per_tool sandbox lives for milliseconds, and one store
// transaction per create and per destroy would halve the worker's throughput.
// A flush every `period` writes what changed in one transaction; a sandbox
// created and destroyed between two flushes was never listable and is not
// written at all. A per_run or per_worker sandbox is written at once.
//
// Every create and destroy also goes to the audit log (sandbox.create,
// sandbox.destroy, with the time it happened), per_tool ones included: the
// lifecycle record is complete even where the listing is not. Appended in
// the same flush, one transaction for the lot.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "store/audit_log.h"
#include "store/store.h"

namespace rf::worker {

class SandboxLedger {
 public:
  SandboxLedger(store::Store& store, std::string worker_id, std::chrono::milliseconds period);
  ~SandboxLedger();  // flushes

  // A sandbox went to work for `project`/`run` (run empty: none) in `mode`.
  // A front door's (mode api) keeps its spec, and its creation says who
  // asked (`actor`, "" for the worker itself).
  void bound(const std::string& id, const std::string& backend, const std::string& project,
             const std::string& run, const std::string& mode, int host_pid,
             const std::string& spec_json = "", const std::string& actor = "");
  void destroyed(const std::string& id, const std::string& actor = "",
                 const std::string& project = "", const std::string& reason = "");
  // Writes what changed now.
  void flush();

 private:
  void loop();

  store::Store& store_;
  const std::string worker_id_;
  const std::chrono::milliseconds period_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<store::SandboxRow> created_;
  std::vector<std::string> destroyed_;
  std::vector<store::AuditEvent> lifecycle_;
  bool stopping_ = false;
  bool urgent_ = false;  // a long-lived sandbox waits to be written
  std::mutex flush_mu_;  // one flush at a time, so a destroy never precedes its create
  std::thread thread_;
};

}  // namespace rf::worker
