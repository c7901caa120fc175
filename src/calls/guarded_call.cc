#include "calls/guarded_call.h"

#include <sodium.h>

#include "calls/redacting_sink.h"
#include "core/counters.h"
#include "core/log.h"
#include "identity/audit_events.h"
#include "proof/output_digest.h"
#include "proof/receipt.h"
#include "redact/stream_redactor.h"
#include "sandbox/result_json.h"

namespace rf::calls {
namespace {

// The store's record, and the door's own copy when it wants one.
class Tee final : public OutputSink {
 public:
  Tee(OutputSink& store, OutputSink* door) : store_(store), door_(door) {}
  void on_started(uint32_t call_id, int pid) override {
    if (door_ != nullptr && door_->wants_started()) door_->on_started(call_id, pid);
  }
  bool wants_started() const override { return door_ != nullptr && door_->wants_started(); }
  void on_stdout(std::string_view d) override {
    store_.on_stdout(d);
    if (door_ != nullptr) door_->on_stdout(d);
  }
  void on_stderr(std::string_view d) override {
    store_.on_stderr(d);
    if (door_ != nullptr) door_->on_stderr(d);
  }

 private:
  OutputSink& store_;
  OutputSink* door_;
};

void warn_if_not(const Status& s, int64_t call_id) {
  if (!s) spdlog::warn("call {}: {}", call_id, s.error().to_string());
}

// The call's end into the store (its held output with it). While the store
// is unreachable the end is kept in the spool as well (result_spool.h): a
// worker that gives up retrying, or dies, loses nothing; it goes once filed.
Status end_call(const CallPath& path, CallOutput& output, SpooledEnd end) {
  bool spooled = false;
  Status ended = output.close([&](const std::vector<store::PendingChunk>& rest) {
    end.output = rest;
    Status written = write_end(*path.store, end);
    if (!written.ok() && written.error().code == ErrorCode::kUnavailable && path.spool != nullptr &&
        !spooled) {
      end.epoch = path.store->registration(path.worker_id).value_or(-1);
      if (auto kept = path.spool->put(end); kept.ok()) {
        spooled = true;
      } else {
        spdlog::warn("call {}: {}", end.call_id, kept.error().to_string());
      }
    }
    return written;
  });
  if (spooled) {
    if (ended.ok() || ended.error().code != ErrorCode::kUnavailable) {
      path.spool->drop(end.call_id);
    } else {
      path.spool->let_go(end.call_id);  // the worker's housekeeping files it
    }
  }
  return ended;
}

SpooledEnd end_of(const CallPath& path, int64_t call_id, std::string state) {
  SpooledEnd end;
  end.call_id = call_id;
  end.worker_id = path.worker_id;
  end.state = std::move(state);
  return end;
}

}  // namespace

std::string GuardedOutcome::redacted(std::string text) const {
  return patterns ? redact::redact_all(*patterns, text) : text;
}

void fail_unrun(const CallPath& path, int64_t call_id, const std::string& why,
                const std::shared_ptr<const redact::Patterns>& patterns) {
  counters::add(R"(ringfence_worker_calls_total{outcome="failed"})");
  CallOutput output(*path.store, call_id, path.worker_id, nullptr);
  SpooledEnd end = end_of(path, call_id, "failed");
  end.error = patterns ? redact::redact_all(*patterns, why) : why;
  warn_if_not(end_call(path, output, std::move(end)), call_id);
}

GuardedOutcome run_guarded(const CallPath& path, GuardedCall call,
                           const std::shared_ptr<Sandbox>& sandbox) {
  GuardedOutcome out;
  const std::string sandbox_id = sandbox->id();
  // A JIT call's id is in its requests' context from the start, and a call
  // whose stdin streams (a background process, a terminal) runs through
  // exec(), which takes input as it runs: both recorded first.
  if (call.call_id == 0 && call.record && (call.jit || call.exec.stdin_stream)) {
    auto id = call.record();
    if (!id) {
      out.result = id.take_error();
      return out;
    }
    call.call_id = *id;
  }
  const bool record_while_starting = call.call_id == 0 && call.record;
  call.use.call_id = call.call_id;
  proof::EventContext proof_ctx;
  proof_ctx.project_id = call.use.project;
  if (!call.use.run.empty()) proof_ctx.run_id = call.use.run;
  proof_ctx.call_id = call.call_id;
  if (path.proof) path.proof->sandbox_in_use(sandbox, proof_ctx);

  // 2. The output's way: redacted, then digested as delivered, then stored and teed.
  auto output =
      std::make_shared<CallOutput>(*path.store, call.call_id, path.worker_id, path.flusher);
  output->set_stored_max(call.stored_output_max);
  Tee tee(*output, call.tee);
  proof::DigestingSink delivered(tee);
  // Every value the sandbox ever received, not only this call's: a per_run
  // sandbox's earlier values (in files, in processes) are redacted too.
  out.patterns = path.identity->patterns_for(*sandbox);
  std::optional<RedactingSink> redacting;
  // A JIT call is redacted of what it is granted mid-call, even if it had nothing before.
  if (out.patterns || call.jit) {
    redacting.emplace(delivered, out.patterns ? out.patterns : redact::compile_patterns({}));
  }
  OutputSink& sink = redacting ? static_cast<OutputSink&>(*redacting) : delivered;
  if (!call.notice.empty()) delivered.on_stderr(call.notice);

  // 3. JIT: the sandbox may ask while the call runs.
  auto wipe = [&] {
    for (auto& [key, value] : call.exec.env) sodium_memzero(value.data(), value.size());
  };
  if (call.jit) {
    Status opened = path.jit ? ok_status() : make_error("JIT", "this worker serves no JIT");
    if (opened) {
      JitBroker::put_rf_cred_on_path(call.exec, *sandbox);
      opened = path.jit->open(JitContext{call.use, call.step, call.agent, sandbox, &*redacting});
    }
    if (!opened) {
      wipe();
      out.result = opened.take_error();
      fail_unrun(path, call.call_id, out.result.error().to_string(), out.patterns);
      return out;
    }
  }
  const int64_t started_ms = store::now_ms();
  if (record_while_starting) {
    // The command starts, and while it runs the store records it.
    auto started = sandbox->start_exec(call.exec, sink);
    auto id = call.record();
    if (id) {
      call.call_id = *id;
      call.use.call_id = *id;
      proof_ctx.call_id = *id;
      output->set_call_id(*id);
      if (path.flusher) path.flusher->add(output);
    }
    out.result = started->wait();
    if (!id) {
      wipe();
      out.result = make_error("record the call", id.error().to_string());
      return out;
    }
  } else {
    if (path.flusher) path.flusher->add(output);
    out.result = sandbox->exec(call.exec, sink);
  }
  const int64_t ended_ms = store::now_ms();

  // 4. After the call.
  if (call.jit) {
    path.jit->close(sandbox_id);
    // What was granted mid-call is redacted from the call's result and error
    // texts too, not only from its output streams.
    if (auto p = path.identity->patterns_for(*sandbox)) out.patterns = std::move(p);
  }
  if (redacting) redacting->finish();
  if (path.flusher) path.flusher->remove(output);
  wipe();
  if (redacting) {
    const auto counts = redacting->counts();
    uint64_t n = 0;
    for (const auto& [what, c] : counts) n += c;
    if (n) counters::add("ringfence_redactions_total", n);
    identity::audit_redactions(*path.store, "worker " + path.worker_id, call.use.project, counts,
                               {call.use.run, call.call_id, sandbox_id});
  }
  out.revoked = path.identity->call_ended(call.call_id);
  if (!out.revoked && call.stopped) {
    if (auto why = call.stopped(); why && out.result) out.result = make_error("", *why);
  }
  if (call.on_result && !out.revoked) call.on_result(out.result);
  Status ended = ok_status();
  if (out.revoked) {
    counters::add(R"(ringfence_worker_calls_total{outcome="revoked"})");
    SpooledEnd end = end_of(path, call.call_id, "revoked");
    end.error = *out.revoked;
    ended = end_call(path, *output, std::move(end));
  } else if (!out.result) {
    counters::add(R"(ringfence_worker_calls_total{outcome="failed"})");
    const std::string error = out.result.error().to_string();
    const std::string why =
        out.redacted(call.explain_failure ? call.explain_failure(error) : error);
    SpooledEnd end = end_of(path, call.call_id, "failed");
    end.error = why;
    ended = end_call(path, *output, std::move(end));
  } else {
    counters::add(R"(ringfence_worker_calls_total{outcome="finished"})");
    nlohmann::json j = exec_result_json(*out.result, sandbox_id);
    for (auto& [k, v] : call.result_extra.items()) j[k] = v;
    SpooledEnd end = end_of(path, call.call_id, "done");
    end.exit_code = out.result->exit_code;
    end.result_json = out.redacted(j.dump());
    ended = end_call(path, *output, std::move(end));
    if (path.proof) {
      proof::CallRecord rec = proof::finished_call(*sandbox, call.exec.argv, *out.result, delivered,
                                                   started_ms, ended_ms);
      rec.call = std::to_string(call.call_id);
      rec.stdin_sha256 = proof::sha256_hex(call.exec.stdin_data);
      rec.stdin_bytes = call.exec.stdin_data.size();
      path.proof->call_finished(sandbox_id, std::move(rec), proof_ctx);
    }
  }
  warn_if_not(ended, call.call_id);
  return out;
}

}  // namespace rf::calls
