#include "proof/receipt.h"

#include "proof/dsse.h"

namespace rf::proof {

std::string argv_sha256(const std::vector<std::string>& argv) {
  Sha256Stream s;
  for (const auto& a : argv) {
    s.update(a);
    s.update(std::string_view("\0", 1));
  }
  return s.hex();
}

CallRecord finished_call(const Sandbox& sandbox, const std::vector<std::string>& argv,
                         const ExecResult& result, const DigestingSink& delivered,
                         int64_t started_ms, int64_t ended_ms) {
  CallRecord r;
  r.sandbox = sandbox.id();
  r.argv = argv;
  r.stdout_sha256 = delivered.stdout_digest().hex();
  r.stdout_bytes = delivered.stdout_digest().bytes();
  r.stderr_sha256 = delivered.stderr_digest().hex();
  r.stderr_bytes = delivered.stderr_digest().bytes();
  r.exit_code = result.exit_code;
  r.signal = result.signal;
  r.timed_out = result.timed_out;
  r.oom_killed = result.oom_killed;
  r.output_truncated = result.output_truncated;
  r.limit = result.limit;
  const SandboxSpec& spec = sandbox.spec();
  r.egress = {{"policy", std::string(to_string(spec.network))}, {"allow", spec.allow}};
  r.started_ms = started_ms;
  r.ended_ms = ended_ms;
  return r;
}

nlohmann::json receipt_statement(const CallRecord& r) {
  using json = nlohmann::json;
  json predicate = {{"call", r.call},
                    {"sandbox", r.sandbox},
                    {"report", {{"sha256", r.report_sha256}}},
                    {"argv", {{"sha256", argv_sha256(r.argv)}, {"count", r.argv.size()}}},
                    {"stdin", {{"sha256", r.stdin_sha256}, {"bytes", r.stdin_bytes}}},
                    {"stdout", {{"sha256", r.stdout_sha256}, {"bytes", r.stdout_bytes}}},
                    {"stderr", {{"sha256", r.stderr_sha256}, {"bytes", r.stderr_bytes}}},
                    {"exit", {{"code", r.exit_code}, {"signal", r.signal}}},
                    {"limits_hit", r.limit.empty() ? json::array() : json::array({r.limit})},
                    {"timed_out", r.timed_out},
                    {"oom_killed", r.oom_killed},
                    {"output_truncated", r.output_truncated},
                    {"egress", r.egress},
                    {"started_at_ms", r.started_ms},
                    {"ended_at_ms", r.ended_ms}};
  return {
      {"_type", kStatementType},
      {"subject", json::array({{{"name", "stdout"}, {"digest", {{"sha256", r.stdout_sha256}}}},
                               {{"name", "stderr"}, {"digest", {{"sha256", r.stderr_sha256}}}}})},
      {"predicateType", kReceiptPredicate},
      {"predicate", predicate}};
}

}  // namespace rf::proof
