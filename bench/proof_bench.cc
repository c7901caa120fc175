// rf_proof_bench (issue 15): what proof costs, against the sandbox start and
// the call it is about, in one run.
//   create       a native sandbox, to its handshake (the critical path)
//   gather       the report's facts: the self-probe call, host read-back,
//                seccomp programs through ptrace (off the critical path)
//   first call   `true` in a fresh sandbox, while the report is made on
//                another thread: with the self-probe sent as a call first
//                ("probe as a call"), and with it started by the runner
//                before its hello (SandboxSpec::probe_at_start, as
//                `sandbox exec --receipt` and a worker make them: "probe at
//                start", its create timed too, and how many reports were
//                signed before their first call ended); the report is
//                ready once gathered, judged and signed
//   warm calls   the self-probe alone, and `true`, on a warm sandbox
//   report sign  judging the facts, the statement, its DSSE signature
//   receipt      a call's statement and its signature (what the bar counts),
//                and the same filed in the audit log (SQLite, its own thread
//                in a worker: after the call's result is written); signed
//                with a nonce made ahead, as a worker's recorder thread makes
//                them when idle (proof/signing_key.h), timed apart
//                ("a nonce made ahead")
//   pooled       a worker's warm pool (WarmPool::OnWarm): each sandbox's
//                report made as the pool warms it up; then a call on it, and
//                whether its report was filed before the call was sent
//   verify       a receipt file, offline (2 signatures, checkpoint, 2
//                inclusion proofs)
//   bwrap        `bwrap ... /bin/true`, the peer of a sandbox run
//   bundle       a receipt's bundle (checkpoint + inclusion proofs) once the
//                audit log holds 1,000, 10,000 and 100,000 events
// Usage: rf_proof_bench [iterations]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "bench_support.h"
#include "native/native_backend.h"
#include "proof/boundary_facts.h"
#include "proof/proof_log.h"
#include "proof/verify.h"
#include "store/audit_log.h"
#include "store/store.h"
#include "worker/pool.h"

using Clock = std::chrono::steady_clock;

namespace {

double us_since(Clock::time_point t) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t).count();
}

struct Drop : rf::OutputSink {
  void on_stdout(std::string_view) override {}
  void on_stderr(std::string_view) override {}
};

void row(const char* what, const rf::bench::Stats& s, const char* unit = "us") {
  const double k = std::string_view(unit) == "ms" ? 1000.0 : 1.0;
  std::printf("%-34s p50 %9.1f %s   p99 %9.1f %s\n", what, s.p50 / k, unit, s.p99 / k, unit);
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 200;
  auto backend = rf::native::make_native_backend({RF_RUNNER_PATH, "ringfence-bench"});
  if (!backend) {
    std::fprintf(stderr, "%s\n", backend.error().to_string().c_str());
    return 1;
  }
  std::vector<double> create, gather, first_call, first_call_plain, report_ready, sign, receipt,
      receipt_filed, verify, bwrap, probe_call, true_call;
  std::vector<double> create_with_probe, first_call_probe_call, report_ready_probe_call;
  int ready_before_first_call_ended = 0;
  std::vector<double> receipt_statement, receipt_sign, warm_judge, warm_statement, warm_dump,
      warm_sign, warm_receipt, warm_receipt_ahead, nonce_ahead, report_gathered;
  rf::proof::SigningKey key = rf::proof::SigningKey::generate();
  const std::string dir = "/tmp/rf-proof-bench-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  auto store = rf::store::Store::open(dir + "/store.db");
  if (!store) return 1;
  rf::proof::ProofLog log(**store, key, "ringfence/bench/audit");
  Drop drop;
  rf::ExecCall call;
  call.argv = {"/bin/true"};
  nlohmann::json bundle;
  int64_t last_receipt_seq = 0, last_report_seq = 0;
  for (int i = 0; i < n; ++i) {
    // A sandbox without proof: start and first call.
    auto t = Clock::now();
    {
      auto sb = (*backend)->create(rf::SandboxSpec{});
      if (!sb) return 1;
      create.push_back(us_since(t));
      t = Clock::now();
      (void)(*sb)->exec(call, drop);
      first_call_plain.push_back(us_since(t));
      (void)(*sb)->destroy();
    }
    // A sandbox whose report is made beside its first call, its self-probe
    // sent as a call first (as for a sandbox made without probe_at_start).
    {
      auto sb = (*backend)->create(rf::SandboxSpec{});
      if (!sb) return 1;
      const auto start = Clock::now();
      double ready_at = 0;
      std::thread reporter([&, probe = rf::proof::start_self_probe(**sb)]() mutable {
        auto facts = rf::proof::gather_boundary_facts(**sb, std::move(probe));
        if (facts) {
          (void)rf::proof::sign_envelope(
              key, rf::proof::kInTotoPayloadType,
              rf::proof::report_statement(*facts, rf::proof::judge_bounds(*facts)).dump());
        }
        ready_at = us_since(start);
        for (int k = 0; k < 4; ++k) key.prepare(key.prepared() + 1);
      });
      (void)(*sb)->exec(call, drop);
      first_call_probe_call.push_back(us_since(start));
      reporter.join();
      report_ready_probe_call.push_back(ready_at);
      (void)(*sb)->destroy();
    }
    // The same, the self-probe started by the runner before its hello
    // (probe_at_start), as `sandbox exec --receipt` and a worker make them.
    rf::SandboxSpec with_probe;
    with_probe.probe_at_start = true;
    t = Clock::now();
    auto sb = (*backend)->create(with_probe);
    if (!sb) return 1;
    create_with_probe.push_back(us_since(t));
    const auto start = Clock::now();
    std::optional<rf::Result<rf::proof::BoundaryFacts>> facts;
    double ready_at = 0, gathered_at = 0;
    // Its self-probe sent first, as `sandbox exec --receipt` and a worker do.
    std::thread reporter([&, probe = rf::proof::start_self_probe(**sb)]() mutable {
      // Ready: gathered, judged and signed.
      facts.emplace(rf::proof::gather_boundary_facts(**sb, std::move(probe)));
      gathered_at = us_since(start);
      if (*facts) {
        (void)rf::proof::sign_envelope(
            key, rf::proof::kInTotoPayloadType,
            rf::proof::report_statement(**facts, rf::proof::judge_bounds(**facts)).dump());
      }
      ready_at = us_since(start);
      // As a worker's recorder thread does once a task is done: the nonces
      // of the signatures to come, made ahead (proof/signing_key.h).
      for (int k = 0; k < 4; ++k) {
        const auto a = Clock::now();
        key.prepare(key.prepared() + 1);
        nonce_ahead.push_back(us_since(a));
      }
    });
    (void)(*sb)->exec(call, drop);
    first_call.push_back(us_since(start));
    reporter.join();
    report_ready.push_back(ready_at);
    if (ready_at <= first_call.back()) ++ready_before_first_call_ended;
    report_gathered.push_back(gathered_at);
    if (!*facts) {
      std::fprintf(stderr, "%s\n", facts->error().to_string().c_str());
      return 1;
    }
    // The facts alone, on the now-warm sandbox.
    t = Clock::now();
    auto again = rf::proof::gather_boundary_facts(**sb);
    gather.push_back(us_since(t));
    {
      rf::ExecCall probe;
      probe.argv = {"/.ringfence/tool-runner", "self-probe"};
      auto tp = Clock::now();
      (void)(*sb)->exec(probe, drop);
      probe_call.push_back(us_since(tp));
      tp = Clock::now();
      (void)(*sb)->exec(call, drop);
      true_call.push_back(us_since(tp));
    }
    if (i == 0) {
      // Each step of a report on warm caches, one sandbox's facts judged,
      // stated, dumped and signed over and over (the rows above are each
      // sandbox's first, with whatever the sandbox's start left in the caches).
      for (int k = 0; k < 500; ++k) {
        auto a = Clock::now();
        auto bounds = rf::proof::judge_bounds(**facts);
        warm_judge.push_back(us_since(a));
        a = Clock::now();
        auto st = rf::proof::report_statement(**facts, std::move(bounds));
        warm_statement.push_back(us_since(a));
        a = Clock::now();
        auto text = st.dump();
        warm_dump.push_back(us_since(a));
        a = Clock::now();
        (void)rf::proof::sign_envelope(key, rf::proof::kInTotoPayloadType, std::move(text));
        warm_sign.push_back(us_since(a));
      }
    }
    t = Clock::now();
    const auto statement = rf::proof::report_statement(**facts, rf::proof::judge_bounds(**facts));
    const auto env = rf::proof::sign_envelope(key, rf::proof::kInTotoPayloadType, statement.dump());
    sign.push_back(us_since(t));
    auto recorded = log.record_report(statement, {});
    rf::proof::CallRecord rec;
    rec.call = "exec";
    rec.sandbox = (*sb)->id();
    rec.report_sha256 = recorded->sha256;
    rec.argv = call.argv;
    rec.stdout_sha256 = rf::proof::sha256_hex("a line of output\n");
    rec.stdout_bytes = 17;
    rec.egress = {{"policy", "none"}, {"allow", nlohmann::json::array()}};
    t = Clock::now();
    auto payload = rf::proof::receipt_payload(rec);
    receipt_statement.push_back(us_since(t));
    const auto signing = Clock::now();
    const auto renv =
        rf::proof::sign_envelope(key, rf::proof::kInTotoPayloadType, std::move(payload));
    receipt_sign.push_back(us_since(signing));
    receipt.push_back(us_since(t));
    if (i == 0) {
      // The receipts of a sandbox's next calls, one after another (a worker's
      // per_run sandbox): nothing else has been through the caches between.
      // Signed the whole way (no nonce ready).
      for (int k = 0; k < 500; ++k) {
        const auto a = Clock::now();
        (void)rf::proof::sign_envelope(key, rf::proof::kInTotoPayloadType,
                                       rf::proof::receipt_payload(rec));
        warm_receipt.push_back(us_since(a));
        // The same with a nonce made just before (what a worker's recorder
        // keeps ready), timed apart from its making.
        key.prepare(1);
        const auto b = Clock::now();
        (void)rf::proof::sign_envelope(key, rf::proof::kInTotoPayloadType,
                                       rf::proof::receipt_payload(rec));
        warm_receipt_ahead.push_back(us_since(b));
      }
    }
    t = Clock::now();
    auto rrec = log.record_receipt(rec, recorded->seq, {});
    receipt_filed.push_back(us_since(t));
    if (i == 0 || i == n - 1) bundle = *log.bundle(rrec->seq, recorded->seq);
    last_receipt_seq = rrec->seq;
    last_report_seq = recorded->seq;
    (void)(*sb)->destroy();
    (void)env;
    (void)renv;
  }
  // Pooled: the report is made on the refill thread; a call takes a warm
  // sandbox whose report is already in the log.
  std::vector<double> pooled_call;
  int pooled_ready = 0, pooled_runs = 0;
  {
    std::mutex mu;
    std::map<std::string, Clock::time_point> reported;  // sandbox id -> report filed
    rf::worker::WarmPool pool(**backend, rf::SandboxSpec{}, 2, 2, [&](rf::Sandbox& sandbox) {
      if (!log.record_sandbox_report(sandbox, {})) return;
      std::lock_guard lock(mu);
      reported[sandbox.id()] = Clock::now();
    });
    pool.start();
    for (int i = 0; i < std::min(n, 100); ++i) {
      if (!pool.wait_ready(2, std::chrono::seconds(30))) break;
      const auto sent = Clock::now();
      auto sb = pool.acquire();
      if (!sb) break;
      (void)(*sb)->exec(call, drop);
      pooled_call.push_back(us_since(sent));
      ++pooled_runs;
      {
        std::lock_guard lock(mu);
        const auto it = reported.find((*sb)->id());
        if (it != reported.end() && it->second <= sent) ++pooled_ready;
      }
      (void)(*sb)->destroy();
    }
  }
  for (int i = 0; i < n; ++i) {
    const auto t = Clock::now();
    auto v = rf::proof::verify_bundle(bundle, key.public_key());
    verify.push_back(us_since(t));
    if (!v) return 1;
  }
  for (int i = 0; i < std::min(n, 100); ++i) {
    auto args = rf::bench::bwrap_args();
    args.push_back("/bin/true");
    const auto t = Clock::now();
    std::string out;
    if (rf::bench::run_cli(args[0], {args.begin() + 1, args.end()}, &out) != 0) break;
    bwrap.push_back(us_since(t));
  }
  // A receipt's bundle (checkpoint, two inclusion proofs) as the log grows:
  // filler events appended 1000 per transaction, then the bundle made 5 times.
  std::vector<std::pair<int, double>> bundle_at;
  {
    rf::store::AuditLog audit(**store);
    int64_t size = 2 * static_cast<int64_t>(n);
    for (const int64_t target : {int64_t{1000}, int64_t{10000}, int64_t{100000}}) {
      while (size < target) {
        std::vector<rf::store::AuditEvent> batch(
            static_cast<size_t>(std::min<int64_t>(1000, target - size)));
        for (auto& e : batch) {
          e.kind = "bench.filler";
          e.actor = "bench";
          e.detail_json = "{}";
        }
        auto last = audit.append_all(batch);
        if (!last) return 1;
        size = *last;
      }
      std::vector<double> took;
      for (int k = 0; k < 5; ++k) {
        const auto t = Clock::now();
        if (!log.bundle(last_receipt_seq, last_report_seq)) return 1;
        took.push_back(us_since(t));
      }
      bundle_at.emplace_back(static_cast<int>(size), rf::bench::summarise(took).p50);
    }
  }
  std::printf("rf_proof_bench: %d sandboxes, audit log of %d events\n", n,
              bundle["log"]["size"].get<int>());
  row("create (to handshake)", rf::bench::summarise(create), "ms");
  row("first call, no report", rf::bench::summarise(first_call_plain), "ms");
  row("probe as a call: first call", rf::bench::summarise(first_call_probe_call), "ms");
  row("  report signed (from first call)", rf::bench::summarise(report_ready_probe_call), "ms");
  row("probe at start: create", rf::bench::summarise(create_with_probe), "ms");
  row("  first call, report beside it", rf::bench::summarise(first_call), "ms");
  row("  report signed (from first call)", rf::bench::summarise(report_ready), "ms");
  row("  its facts gathered", rf::bench::summarise(report_gathered), "ms");
  std::printf("%-34s %d of %d sandboxes\n", "  signed before the first call ended",
              ready_before_first_call_ended, n);
  row("gather facts (warm sandbox)", rf::bench::summarise(gather), "ms");
  if (!pooled_call.empty()) {
    row("pooled: first call (take + run)", rf::bench::summarise(pooled_call), "ms");
    std::printf("%-34s %d of %d calls\n", "pooled: report filed before sent", pooled_ready,
                pooled_runs);
  }
  row("warm: self-probe call", rf::bench::summarise(probe_call), "ms");
  row("warm: /bin/true call", rf::bench::summarise(true_call), "ms");
  row("report: judge + sign", rf::bench::summarise(sign));
  row("  warm: judge", rf::bench::summarise(warm_judge));
  row("  warm: statement", rf::bench::summarise(warm_statement));
  row("  warm: statement dumped", rf::bench::summarise(warm_dump));
  row("  warm: signed (DSSE, Ed25519)", rf::bench::summarise(warm_sign));
  row("receipt: statement + sign", rf::bench::summarise(receipt));
  row("  its statement", rf::bench::summarise(receipt_statement));
  row("  its signature (DSSE, Ed25519)", rf::bench::summarise(receipt_sign));
  row("  warm: one call after another", rf::bench::summarise(warm_receipt));
  row("  warm: with a nonce made ahead", rf::bench::summarise(warm_receipt_ahead));
  row("a nonce made ahead (off the path)", rf::bench::summarise(nonce_ahead));
  row("receipt: filed in the audit log", rf::bench::summarise(receipt_filed));
  row("verify a receipt file", rf::bench::summarise(verify), "ms");
  if (!bwrap.empty()) row("bwrap /bin/true (peer)", rf::bench::summarise(bwrap), "ms");
  for (const auto& [size, us] : bundle_at)
    std::printf("%-34s p50 %9.1f ms\n", ("receipt bundle, log of " + std::to_string(size)).c_str(),
                us / 1000);
  std::filesystem::remove_all(dir);
  return 0;
}
