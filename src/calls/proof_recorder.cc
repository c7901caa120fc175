#include "calls/proof_recorder.h"

#include <spdlog/spdlog.h>

#include <chrono>

namespace rf::calls {

ProofRecorder::ProofRecorder(store::Store& store, proof::SigningKey key, std::string actor)
    : store_(store),
      key_(std::move(key)),
      log_(store_, key_, proof::default_origin()),
      actor_(std::move(actor)),
      thread_([this] { loop(); }) {}

ProofRecorder::~ProofRecorder() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void ProofRecorder::loop() {
  // At most this many receipts in one transaction: a bounded wait for the
  // store's other writers, and a bounded loss when the store refuses it.
  constexpr size_t kMaxBatch = 64;
  // A busy worker (receipts filed within kBusy) lets receipts gather for up
  // to kLinger before filing them together: one transaction, and one turn on
  // the audit chain's head, for several calls. An idle one files at once.
  constexpr auto kBusy = std::chrono::milliseconds(100);
  constexpr auto kLinger = std::chrono::milliseconds(20);
  std::chrono::steady_clock::time_point last_filed{};
  // Idle, the thread makes the nonces of the signatures to come
  // (proof/signing_key.h): a receipt is then signed in ~5 us instead of
  // ~25-50. One at a time, so a task that comes meanwhile waits ~20 us at most.
  constexpr size_t kNoncesAhead = 16;
  std::unique_lock lock(mu_);
  for (;;) {
    while (queue_.empty() && !stopping_ && key_.prepared() < kNoncesAhead) {
      lock.unlock();
      key_.prepare(key_.prepared() + 1);
      lock.lock();
    }
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything is filed
    if (queue_.front().receipt && std::chrono::steady_clock::now() - last_filed < kBusy) {
      // Only receipts queued: anything else (a report a call waits for) ends the wait.
      cv_.wait_for(lock, kLinger, [&] {
        return stopping_ || queue_.size() >= kMaxBatch || !queue_.back().receipt;
      });
    }
    std::function<void()> run;
    std::vector<Receipt> receipts;
    while (!queue_.empty() && queue_.front().receipt && receipts.size() < kMaxBatch) {
      receipts.push_back(std::move(*queue_.front().receipt));
      queue_.pop_front();
    }
    if (receipts.empty()) {
      run = std::move(queue_.front().run);
      queue_.pop_front();
    }
    busy_ = true;
    lock.unlock();
    if (run) run();
    if (!receipts.empty()) {
      file_receipts(receipts);
      last_filed = std::chrono::steady_clock::now();
    }
    lock.lock();
    busy_ = false;
    idle_cv_.notify_all();
  }
}

void ProofRecorder::file_receipts(std::vector<Receipt>& batch) {
  std::vector<proof::Signed> signed_receipts;
  std::vector<std::string> calls;
  for (auto& r : batch) {
    Report report;
    {
      std::lock_guard lock(mu_);
      // Queued after the sandbox's report: it is made by the time this runs.
      const auto it = reports_.find(r.sandbox_id);
      if (it != reports_.end()) report = it->second;
    }
    if (report.seq == 0) {
      spdlog::warn("call {}: no receipt: its sandbox {} has no boundary report{}", r.record.call,
                   r.sandbox_id, report.error.empty() ? "" : ": " + report.error);
      continue;
    }
    r.record.report_sha256 = report.sha256;
    calls.push_back(r.record.call);
    signed_receipts.push_back(log_.sign_receipt(r.record, report.seq, r.ctx));
  }
  if (auto filed = log_.file(signed_receipts); !filed.ok()) {
    for (const auto& call : calls)
      spdlog::warn("call {}: receipt not filed: {}", call, filed.error().to_string());
  }
}

void ProofRecorder::drain() {
  std::unique_lock lock(mu_);
  idle_cv_.wait(lock, [&] { return queue_.empty() && !busy_; });
}

void ProofRecorder::make_report(Sandbox& sandbox, const proof::EventContext& ctx) {
  Report r;
  r.done = true;
  auto recorded = log_.record_sandbox_report(sandbox, ctx);
  if (recorded) {
    r.sha256 = recorded->sha256;
    r.seq = recorded->seq;
  } else {
    r.error = recorded.error().to_string();
    spdlog::warn("sandbox {}: no boundary report: {}", sandbox.id(), r.error);
  }
  std::lock_guard lock(mu_);
  reports_[sandbox.id()] = std::move(r);
}

void ProofRecorder::report_now(Sandbox& sandbox) {
  proof::EventContext c;
  c.actor = actor_;
  make_report(sandbox, c);
}

void ProofRecorder::sandbox_in_use(const std::shared_ptr<Sandbox>& sandbox,
                                   const proof::EventContext& ctx) {
  {
    std::lock_guard lock(mu_);
    // Sandboxes that end with their run are not told apart here: past a
    // bound, the made reports go (a sandbox still in use then gets a new one).
    if (reports_.size() > 4096)
      std::erase_if(reports_, [](const auto& r) { return r.second.done; });
    if (!reports_.emplace(sandbox->id(), Report{}).second) return;
    proof::EventContext c = ctx;
    c.actor = actor_;
    c.call_id.reset();
    queue_.push_back({[this, sandbox, c] { make_report(*sandbox, c); }, std::nullopt});
  }
  cv_.notify_one();
}

void ProofRecorder::call_finished(const std::string& sandbox_id, proof::CallRecord record,
                                  proof::EventContext ctx) {
  ctx.actor = actor_;
  {
    std::lock_guard lock(mu_);
    queue_.push_back({{}, Receipt{sandbox_id, std::move(record), std::move(ctx)}});
  }
  cv_.notify_one();
}

void ProofRecorder::wait_for_report(const std::string& sandbox_id) {
  std::unique_lock lock(mu_);
  idle_cv_.wait(lock, [&] {
    const auto it = reports_.find(sandbox_id);
    return it == reports_.end() || it->second.done;
  });
}

void ProofRecorder::sandbox_gone(const std::string& sandbox_id) {
  {
    std::lock_guard lock(mu_);
    // After what is queued for it: its last receipt still needs the report.
    queue_.push_back({[this, sandbox_id] {
                        std::lock_guard lock(mu_);
                        reports_.erase(sandbox_id);
                      },
                      std::nullopt});
  }
  cv_.notify_one();
}

}  // namespace rf::calls
