// The receipt of one call (issue 15, docs/proof.md): an in-toto Statement v1
//   predicateType https://ringfence.dev/proof/call-receipt/v1
// naming the sandbox, the digest of its boundary report, SHA-256 digests of
// the argv, stdin, stdout and stderr (the bytes as delivered, after
// redaction), how the call ended, the limits hit, the egress summary and
// the times. Signed like the report (DSSE, Ed25519).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "proof/digest.h"
#include "proof/output_digest.h"
#include "sandbox/sandbox.h"

namespace rf::proof {

inline constexpr std::string_view kReceiptPredicate = "https://ringfence.dev/proof/call-receipt/v1";

struct CallRecord {
  std::string call;  // the call's id ("42"), or "exec" for `sandbox exec`
  std::string sandbox;
  std::string report_sha256;  // hex SHA-256 of the report statement (the DSSE payload)
  std::vector<std::string> argv;
  std::string stdin_sha256 = sha256_hex("");
  uint64_t stdin_bytes = 0;
  std::string stdout_sha256 = sha256_hex(""), stderr_sha256 = sha256_hex("");
  uint64_t stdout_bytes = 0, stderr_bytes = 0;
  int exit_code = 0, signal = 0;
  bool timed_out = false, oom_killed = false, output_truncated = false;
  std::string limit;  // the bound that ended it, if any
  nlohmann::json egress = nlohmann::json::object();
  int64_t started_ms = 0, ended_ms = 0;
};

// The record of a finished call as every caller makes it: its sandbox, argv,
// how it ended, its output's digests as delivered, its sandbox's egress
// policy, its times. The caller adds its id and its stdin's digest.
CallRecord finished_call(const Sandbox& sandbox, const std::vector<std::string>& argv,
                         const ExecResult& result, const DigestingSink& delivered,
                         int64_t started_ms, int64_t ended_ms);

// SHA-256 (hex) of the argv: each argument followed by a NUL byte.
std::string argv_sha256(const std::vector<std::string>& argv);

// The receipt's in-toto Statement, as the bytes that are signed: the
// predicate holds call, sandbox, report {sha256}, argv {count, sha256},
// stdin/stdout/stderr {bytes, sha256}, exit {code, signal}, limits_hit,
// timed_out, oom_killed, output_truncated, egress, started_at_ms and
// ended_at_ms; the subjects are stdout and stderr by digest.
std::string receipt_payload(const CallRecord& r);

}  // namespace rf::proof
