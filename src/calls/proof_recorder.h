// The worker's proof (issue 15, docs/proof.md): a boundary report for every
// sandbox a call runs in, made as the warm pool warms it up (report_now) or
// else on the recorder's thread beside the sandbox's first call, and
// a signed receipt for every call, filed in the audit log after the call's
// result (off the client's path). Reports and receipts are signed with the
// state dir's key (proof/signing_key.h); `ringfence call --receipt` and
// `ringfence audit receipt CALL_ID` read them back.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "proof/proof_log.h"
#include "proof/signing_key.h"
#include "sandbox/sandbox.h"
#include "store/store.h"

namespace rf::calls {

class ProofRecorder {
 public:
  ProofRecorder(store::Store& store, proof::SigningKey key, std::string actor);
  ~ProofRecorder();  // files what is queued, then stops

  // Makes the report of a sandbox the warm pool has just started, on the
  // caller's thread (the pool's refill), before any call can run in it.
  void report_now(Sandbox& sandbox);
  // Starts the report of `sandbox` unless it has one (made or under way).
  void sandbox_in_use(const std::shared_ptr<Sandbox>& sandbox, const proof::EventContext& ctx);
  // Queues the receipt of a finished call in `sandbox` (its report digest is
  // filled in once the report is made).
  void call_finished(const std::string& sandbox_id, proof::CallRecord record,
                     proof::EventContext ctx);
  // Waits until the report of `sandbox_id` under way is made or has failed
  // (at once when none is): a sandbox about to be destroyed right after its
  // first call (per_tool) must outlive its self-probe.
  void wait_for_report(const std::string& sandbox_id);
  // Forgets a destroyed sandbox's report.
  void sandbox_gone(const std::string& sandbox_id);
  // Waits until everything queued so far is filed (tests, shutdown).
  void drain();

 private:
  struct Report {
    bool done = false;
    std::string sha256, error;
    int64_t seq = 0;
  };
  // A finished call's receipt, waiting to be signed and filed.
  struct Receipt {
    std::string sandbox_id;
    proof::CallRecord record;
    proof::EventContext ctx;
  };
  // What the recorder's thread does, in order: a report, a receipt, or a
  // sandbox forgotten. Consecutive receipts are filed in one transaction.
  struct Task {
    std::function<void()> run;       // a report, a sandbox forgotten
    std::optional<Receipt> receipt;  // or this
  };
  void loop();
  void make_report(Sandbox& sandbox, const proof::EventContext& ctx);
  void file_receipts(std::vector<Receipt>& batch);

  store::Store& store_;
  proof::SigningKey key_;
  proof::ProofLog log_;
  std::string actor_;
  std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  std::deque<Task> queue_;
  std::map<std::string, Report> reports_;  // by sandbox id
  bool busy_ = false, stopping_ = false;
  std::thread thread_;
};

}  // namespace rf::calls
