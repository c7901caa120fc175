// One sandbox's proof, for the commands that hand out receipts (`sandbox exec
// --receipt`): the signing key and the audit log under the state dir, the
// boundary report made on a thread of its own while the first call runs (off
// the critical path; the runner binary's digest from the session's start),
// and the receipt file of a call.
#pragma once

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "core/result.h"
#include "proof/proof_log.h"
#include "proof/signing_key.h"
#include "sandbox/sandbox.h"
#include "store/store.h"

namespace rf::cli {

class ProofSession {
 public:
  static Result<std::unique_ptr<ProofSession>> open(const std::string& state_dir);
  ~ProofSession();  // joins the report's thread

  // Gathers, judges, signs and files `sandbox`'s boundary report, on a thread.
  void start_report(Sandbox& sandbox);
  // Files the receipt of `call` (its report digest filled in here) and
  // returns the receipt file. Waits for the report.
  Result<nlohmann::json> receipt(proof::CallRecord call);
  // Joins the report's thread (before the sandbox goes).
  void join();

 private:
  ProofSession(std::unique_ptr<store::Store> store, proof::SigningKey key,
               std::string runner_digest_cache);
  std::unique_ptr<store::Store> store_;
  proof::SigningKey key_;
  proof::ProofLog log_;
  std::thread thread_;
  std::optional<Result<proof::Recorded>> report_;  // set by the thread
  // The runner binary's digest, from the start (proof::warm_runner_sha256,
  // through keys/runner.sha256), and the signatures' nonces, while the
  // sandbox is made and the command runs, not on the report's path.
  std::thread runner_digest_;
};

// Writes `bundle` to `path` (pretty JSON) atomically: all of it or nothing,
// fsync'ed. Errors name `flag` (the option that gave the path) and the path.
Status write_receipt_file(const std::string& path, const nlohmann::json& bundle,
                          const std::string& flag = "--receipt");
// Fails (naming --receipt and the directory) when `path` cannot be written:
// checked before anything runs.
Status check_receipt_path(const std::string& path);
// The receipt file of call `call_id`, once the worker that ran it has filed
// its receipt (it does so just after the call's result): waits up to `within`.
Result<nlohmann::json> wait_for_call_receipt(store::Store& store, const std::string& state_dir,
                                             int64_t call_id, std::chrono::milliseconds within);

}  // namespace rf::cli
