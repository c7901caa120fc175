// The JIT credential policy (host side, issue 13): what a sandbox that asks
// for a credential just in time (`rf-cred get NAME --scope S --reason R`)
// gets. A YAML file, given as `worker start --jit-policy FILE` or
// `identity.jit_policy` in worker.yaml:
//
//   rules:
//     - secret: "github-*"     # glob on the secret's name          (default "*")
//       key: "GITHUB_*"        # glob on the key asked for           (default "*")
//       scope: push            # glob on --scope                     (default "*")
//       project: acme          # globs on who asks                   (default "*")
//       workflow: "*"
//       step: "*"
//       agent: claude-code
//       verdict: allow         # allow | deny | ask                  (required)
//       max_uses: 3            # grants per run under this rule      (default: no bound)
//       ttl: 10m               # a grant stays in the sandbox's environment this long
//       timeout: 5m            # ask: how long a human has; then it is denied
//       approvers: [alice]     # ask: who may answer                 (default: anyone)
//
// Rules are tried in order; the first whose every glob matches decides. No
// rule matching is a deny. Parsing refuses unknown fields, bad globs and
// durations, naming FILE:LINE; a policy that cannot be read fails closed (the
// worker does not start). Evaluation reads nothing and allocates little: it
// is on every request's path (bench: ≤ 50 µs).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "core/result.h"

namespace rf::identity {

enum class JitVerdict { allow, deny, ask };
std::string_view to_string(JitVerdict v);

struct JitRule {
  int index = 0;  // 1-based, in file order
  int line = 0;   // where it starts in the file
  std::string secret = "*", key = "*", scope = "*";
  std::string project = "*", workflow = "*", step = "*", agent = "*";
  JitVerdict verdict = JitVerdict::deny;
  int max_uses = 0;                               // 0: no bound
  std::chrono::milliseconds ttl{0};               // 0: for the sandbox's life
  std::chrono::milliseconds timeout{5 * 60'000};  // ask only
  std::vector<std::string> approvers;             // ask only; empty: anyone
};

struct JitPolicy {
  std::string path;
  std::vector<JitRule> rules;
  // "rule 2 (jit.yaml:7)"
  std::string describe(const JitRule& rule) const;
};

// Who asks for what. Empty context fields match only "*" globs.
struct JitAsk {
  std::string key, secret, scope, reason;
  std::string project, workflow, step, agent;
};

struct JitDecision {
  const JitRule* rule = nullptr;  // null: no rule matched
  JitVerdict verdict = JitVerdict::deny;
};

Result<JitPolicy> parse_jit_policy(const std::string& text, const std::string& path);
Result<JitPolicy> load_jit_policy(const std::string& path);
JitDecision evaluate_jit(const JitPolicy& policy, const JitAsk& ask);

}  // namespace rf::identity
