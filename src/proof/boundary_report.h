// The boundary report (issue 15, docs/proof.md): what the kernel actually
// enforced on a sandbox, read back rather than copied from its spec, each
// bound judged held, not_held or unknown with its evidence, as an in-toto
// Statement v1 whose predicate is ours:
//   predicateType https://ringfence.dev/proof/boundary-report/v1
// Pure: the facts come in (gathered by host/boundary_facts.h from the
// sandbox's self-probe and the host's own read-back), the statement goes out.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/result.h"
#include "sandbox/spec.h"

namespace rf::proof {

inline constexpr std::string_view kReportPredicate =
    "https://ringfence.dev/proof/boundary-report/v1";

enum class BoundStatus { kHeld, kNotHeld, kUnknown };
std::string_view to_string(BoundStatus s);

struct Bound {
  std::string name;  // "namespace.net", "seccomp.digest", "cgroup.memory", ...
  BoundStatus status = BoundStatus::kUnknown;
  nlohmann::json evidence = nlohmann::json::object();
};

struct BoundaryFacts {
  SandboxSpec spec;  // what was asked for
  std::string backend, image, image_digest, runner_version, runner_sha256;
  std::string sandbox_mode;  // "per_run", ... ("" when not a worker's)
  // What `ringfence-tool-runner self-probe` printed, run as a tool call.
  nlohmann::json inside = nlohmann::json::object();
  // The host's own namespaces, to compare with the sandbox's; empty when the
  // sandbox runs on another kernel (a remote Docker daemon).
  std::map<std::string, uint64_t> host_ns;
  // The sandbox's PID 1 as the host reads it (/proc/<pid>/ns, uid_map,
  // gid_map): what its inside cannot tamper with. Empty on another kernel.
  std::map<std::string, uint64_t> pid1_ns;
  std::string pid1_uid_map, pid1_gid_map;
  // The sandbox cgroup's limit files read back by the host: file -> content.
  std::map<std::string, std::string> cgroup;
  // SHA-256 (hex) of each seccomp program as the kernel holds it, read back
  // from the sandbox's PID 1 (in load order); or why it could not be.
  std::vector<std::string> seccomp_loaded;
  std::string seccomp_readback_error;
  // The profile's programs as published (this build's digests, load order).
  std::vector<std::string> seccomp_profile;
  int64_t made_at_ms = 0;
};

// Every bound, in a fixed order.
std::vector<Bound> judge_bounds(const BoundaryFacts& facts);

// The in-toto statement (subject: the sandbox, with the SHA-256 of its spec).
nlohmann::json report_statement(const BoundaryFacts& facts, std::vector<Bound> bounds);

// From a statement already parsed: the bounds not held (and unknown), by name.
struct BoundSummary {
  int held = 0;
  std::vector<std::string> not_held, unknown;
};
Result<BoundSummary> summarize_report(const nlohmann::json& statement);

}  // namespace rf::proof
