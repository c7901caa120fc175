#include "cli/proof_session.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>

#include "cli/client_store.h"
#include "core/io.h"
#include "core/unique_fd.h"
#include "proof/boundary_facts.h"

namespace rf::cli {

Result<std::unique_ptr<ProofSession>> ProofSession::open(const std::string& state_dir) {
  auto key = proof::SigningKey::load_or_create(state_dir);
  if (!key) return key.take_error();
  auto st = open_client_store(state_dir);
  if (!st) return st.take_error();
  proof::keep_runner_sha256_in(state_dir + "/keys/runner.sha256");
  return std::unique_ptr<ProofSession>(
      new ProofSession(std::move(*st), std::move(*key), state_dir + "/keys/runner.sha256"));
}

ProofSession::ProofSession(std::unique_ptr<store::Store> store, proof::SigningKey key,
                           std::string runner_digest_cache)
    : store_(std::move(store)),
      key_(std::move(key)),
      log_(*store_, key_, proof::default_origin()),
      runner_digest_([this, cache = std::move(runner_digest_cache)] {
        proof::warm_runner_sha256(cache);
        // The report's, the receipt's and the checkpoints' signatures, made
        // ahead here (proof/signing_key.h), beside the sandbox's creation.
        key_.prepare(4);
      }) {}

ProofSession::~ProofSession() {
  join();
  runner_digest_.join();
}

void ProofSession::join() {
  if (thread_.joinable()) thread_.join();
}

void ProofSession::start_report(Sandbox& sandbox) {
  // The self-probe the sandbox started with (probe_at_start), or, from a
  // backend that has none, one sent here, before the command: it runs beside
  // it, not behind it.
  thread_ = std::thread([this, &sandbox, probe = proof::start_self_probe(sandbox)]() mutable {
    report_ = log_.record_sandbox_report(sandbox, proof::EventContext{}, std::move(probe));
  });
}

Result<nlohmann::json> ProofSession::receipt(proof::CallRecord call) {
  join();
  if (!report_) return make_error("receipt", "no boundary report was made");
  if (!*report_) return make_error("receipt", report_->error().to_string());
  call.report_sha256 = (*report_)->sha256;
  auto rec = log_.record_receipt(call, (*report_)->seq, proof::EventContext{});
  if (!rec) return rec.take_error();
  return log_.bundle(rec->seq, (*report_)->seq);
}

Status check_receipt_path(const std::string& path) {
  const auto slash = path.rfind('/');
  const std::string parent = slash == std::string::npos ? "."
                             : slash == 0               ? "/"
                                                        : path.substr(0, slash);
  if (::access(parent.c_str(), W_OK) != 0) {
    return Error{"--receipt " + path, parent + ": " + std::strerror(errno) + " (nothing was run)"};
  }
  return ok_status();
}

Result<nlohmann::json> wait_for_call_receipt(store::Store& store, const std::string& state_dir,
                                             int64_t call_id, std::chrono::milliseconds within) {
  auto key = proof::SigningKey::load(state_dir);
  if (!key) return key.take_error();
  proof::ProofLog log(store, *key, proof::default_origin());
  const auto deadline = std::chrono::steady_clock::now() + within;
  for (;;) {
    auto bundle = log.bundle_for_call(call_id);
    if (!bundle) return bundle.take_error();
    if (*bundle) return std::move(**bundle);
    if (std::chrono::steady_clock::now() >= deadline) {
      return make_error("receipt of call " + std::to_string(call_id),
                        "the worker filed none within " + std::to_string(within.count() / 1000) +
                            " s (its log says why)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

Status write_receipt_file(const std::string& path, const nlohmann::json& bundle,
                          const std::string& flag) {
  // Through a temporary file, fsync'ed, then renamed: after a crash the file
  // is the old receipt or the new one, never an empty or a part of one.
  if (auto w = write_file_atomic(path, bundle.dump(2) + "\n", 0644); !w)
    return make_error(flag + " " + path, w.error().to_string());
  return ok_status();
}

}  // namespace rf::cli
