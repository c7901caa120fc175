// The JIT credential policy (issue 13): parsing names FILE:LINE for every
// mistake, and evaluation takes the first rule whose every glob matches; no
// match is a deny.
#include "identity/jit_policy.h"

#include <gtest/gtest.h>

namespace rf::identity {
namespace {

using namespace std::chrono_literals;

JitPolicy parsed(const std::string& text) {
  auto p = parse_jit_policy(text, "jit.yaml");
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().to_string());
  return p.ok() ? std::move(*p) : JitPolicy{};
}

std::string error_of(const std::string& text) {
  auto p = parse_jit_policy(text, "jit.yaml");
  return p.ok() ? "(parsed)" : p.error().to_string();
}

TEST(JitPolicy, ParsesEveryField) {
  const JitPolicy p = parsed(R"(rules:
  - secret: "github-*"
    key: GITHUB_TOKEN
    scope: push
    project: acme
    workflow: site
    step: build
    agent: claude-code
    verdict: allow
    max_uses: 3
    ttl: 10m
  - secret: "deploy-*"
    verdict: ask
    timeout: 90s
    approvers: [alice, bob]
  - verdict: deny
)");
  ASSERT_EQ(p.rules.size(), 3u);
  const JitRule& r = p.rules[0];
  EXPECT_EQ(r.index, 1);
  EXPECT_EQ(r.line, 2);
  EXPECT_EQ(r.secret, "github-*");
  EXPECT_EQ(r.key, "GITHUB_TOKEN");
  EXPECT_EQ(r.scope, "push");
  EXPECT_EQ(r.project, "acme");
  EXPECT_EQ(r.workflow, "site");
  EXPECT_EQ(r.step, "build");
  EXPECT_EQ(r.agent, "claude-code");
  EXPECT_EQ(r.verdict, JitVerdict::allow);
  EXPECT_EQ(r.max_uses, 3);
  EXPECT_EQ(r.ttl, 600000ms);
  EXPECT_EQ(p.rules[1].verdict, JitVerdict::ask);
  EXPECT_EQ(p.rules[1].timeout, 90000ms);
  EXPECT_EQ(p.rules[1].approvers, (std::vector<std::string>{"alice", "bob"}));
  EXPECT_EQ(p.rules[2].secret, "*");
  EXPECT_EQ(p.rules[2].timeout, 300000ms);  // the default, unused by deny
  EXPECT_EQ(p.describe(p.rules[1]), "rule 2 (jit.yaml:12)");
}

TEST(JitPolicy, MistakesNameTheFileAndLine) {
  EXPECT_EQ(error_of("rules:\n  - secret: x\n    verdict: maybe\n"),
            "jit.yaml:3: rule 1.verdict: \"maybe\" is not allow, deny or ask");
  EXPECT_EQ(error_of("rules:\n  - secret: x\n"),
            "jit.yaml:2: rule 1: no verdict (allow, deny or ask)");
  EXPECT_EQ(error_of("rules:\n  - verdict: allow\n    colour: red\n"),
            "jit.yaml:3: rule 1.colour: unknown field (a rule has secret, key, scope, project, "
            "workflow, step, agent, verdict, max_uses, ttl, timeout, approvers)");
  EXPECT_EQ(error_of("rules:\n  - verdict: allow\n    max_uses: 0\n"),
            "jit.yaml:3: rule 1.max_uses: expected a whole number of 1 or more, got \"0\"");
  EXPECT_EQ(error_of("rules:\n  - verdict: allow\n    max_uses: lots\n"),
            "jit.yaml:3: rule 1.max_uses: expected a whole number of 1 or more, got \"lots\"");
  EXPECT_NE(
      error_of("rules:\n  - verdict: allow\n    ttl: soon\n").find("jit.yaml:3: rule 1.ttl: "),
      std::string::npos);
  EXPECT_EQ(error_of("rules:\n  - verdict: allow\n    approvers: [alice]\n"),
            "jit.yaml:2: rule 1: approvers and timeout go with verdict ask");
  EXPECT_EQ(error_of("rules:\n  - verdict: ask\n    approvers: alice\n"),
            "jit.yaml:3: rule 1.approvers: expected a list of names");
  EXPECT_EQ(error_of("rules:\n  - verdict: allow\n    secret: \"\"\n"),
            "jit.yaml:3: rule 1.secret: empty (use \"*\" for any)");
  EXPECT_EQ(error_of("rules:\n  - verdict: allow\n    secret: [a]\n"),
            "jit.yaml:3: rule 1.secret: expected a string");
  EXPECT_EQ(error_of("rule:\n  - verdict: allow\n"),
            "jit.yaml:1: unknown field \"rule\" (the file has `rules:`)");
  EXPECT_EQ(error_of("rules: allow\n"), "jit.yaml:1: rules: expected a list of rules");
  EXPECT_EQ(error_of("- a\n"), "jit.yaml:1: expected a mapping with `rules:`");
  EXPECT_EQ(error_of("rules: [\n"), "jit.yaml:2: invalid YAML: end of sequence flow not found");
  // Given twice, a rule's verdict was the last one (deny, then allow: allow).
  EXPECT_EQ(error_of("rules:\n  - secret: x\n    verdict: deny\n    verdict: allow\n"),
            "jit.yaml:4: rules[0].verdict: duplicate key (first at line 3)");
  auto missing = load_jit_policy("/nonexistent/jit.yaml");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().to_string().find("JIT policy /nonexistent/jit.yaml"),
            std::string::npos);
}

TEST(JitPolicy, TheFirstMatchingRuleDecidesAndNoMatchDenies) {
  const JitPolicy p = parsed(R"(rules:
  - secret: "github-*"
    scope: push
    agent: claude-*
    verdict: allow
  - secret: "github-*"
    project: acme
    verdict: ask
  - key: "AWS_*"
    verdict: deny
)");
  JitAsk ask{"GITHUB_TOKEN", "github-acme", "push", "why", "acme", "site", "build", "claude-code"};
  auto d = evaluate_jit(p, ask);
  ASSERT_NE(d.rule, nullptr);
  EXPECT_EQ(d.rule->index, 1);
  EXPECT_EQ(d.verdict, JitVerdict::allow);
  ask.agent = "codex";  // rule 1's agent glob no longer matches: rule 2
  d = evaluate_jit(p, ask);
  ASSERT_NE(d.rule, nullptr);
  EXPECT_EQ(d.rule->index, 2);
  EXPECT_EQ(d.verdict, JitVerdict::ask);
  ask.project = "other";  // nor rule 2's project
  d = evaluate_jit(p, ask);
  EXPECT_EQ(d.rule, nullptr);
  EXPECT_EQ(d.verdict, JitVerdict::deny);
  JitAsk aws{"AWS_SECRET_ACCESS_KEY", "aws-acme", "", "", "acme", "", "", ""};
  d = evaluate_jit(p, aws);
  ASSERT_NE(d.rule, nullptr);
  EXPECT_EQ(d.rule->index, 3);
  EXPECT_EQ(d.verdict, JitVerdict::deny);
  // An empty field matches only "*": a call has no step or agent.
  JitAsk call{"GITHUB_TOKEN", "github-acme", "push", "", "acme", "", "", ""};
  d = evaluate_jit(p, call);
  ASSERT_NE(d.rule, nullptr);
  EXPECT_EQ(d.rule->index, 2);
  EXPECT_EQ(evaluate_jit(JitPolicy{}, call).rule, nullptr);
}

}  // namespace
}  // namespace rf::identity
