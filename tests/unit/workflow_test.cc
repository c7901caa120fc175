// The workflow file: parsing, checks that name file:line and key, templates.
#include <gtest/gtest.h>

#include "workflow/parse.h"
#include "workflow/template.h"

namespace rf::workflow {
namespace {

constexpr const char* kPortfolio = R"(name: portfolio
inputs: {brief: {type: string}}
steps:
  - id: plan
    mode: in_process
    kind: llm
    model: {api: openai_chat, base_url: "http://127.0.0.1:9", model: "m", key_env: PLANNER_KEY}
    prompt: "Extract requirements from: {{inputs.brief}}"
  - id: scaffold
    needs: [plan]
    mode: cli_agent
    agent: claude-code
    identity: {workflow: portfolio}
    sandbox: {mode: per_run, image: host, mem: 2g, network: {allow: ["api.anthropic.com", "git.example.com"]}}
    env: {SITE_STYLE: "minimal"}
    prompt: "Scaffold the site described in {{steps.plan.output}}"
    artifact: {dest: git, url: "https://git.example.com/acme/site.git", branch: main, token_key: GITHUB_TOKEN}
  - id: verify
    needs: [scaffold]
    mode: sandboxed
    run: "git clone {{steps.scaffold.artifact.url}} /tmp/c && cd /tmp/c && ./build.sh"
  - id: summarise
    needs: [verify]
    mode: in_process
    kind: template
    template: "Built {{steps.scaffold.artifact.commit}}: {{steps.verify.exit_code}}"
)";

Loaded check(const std::string& text) {
  Loaded l = parse_workflow(text, "wf.yaml");
  if (l.ok()) validate_workflow(l);
  return l;
}

std::string all(const Loaded& l) {
  std::string out;
  for (const auto& p : l.problems) out += p + "\n";
  return out;
}

// One problem, exactly this text.
void expect_problem(const std::string& text, const std::string& problem) {
  const Loaded l = check(text);
  ASSERT_EQ(l.problems.size(), 1u) << all(l);
  EXPECT_EQ(l.problems[0], problem);
}

TEST(WorkflowParse, TheIssuesExampleIsValid) {
  const Loaded l = check(kPortfolio);
  ASSERT_TRUE(l.ok()) << all(l);
  const WorkflowDef& d = l.def;
  EXPECT_EQ(d.name, "portfolio");
  ASSERT_EQ(d.steps.size(), 4u);
  EXPECT_EQ(d.steps[0].mode, ExecutionMode::kInProcess);
  EXPECT_EQ(d.steps[0].kind, StepKind::kLlm);
  EXPECT_EQ(d.steps[0].model->key_env, "PLANNER_KEY");
  const StepDef& s = d.steps[1];
  EXPECT_EQ(s.mode, ExecutionMode::kCliAgent);
  EXPECT_EQ(s.agent, "claude-code");
  EXPECT_EQ(s.identity->workflow, "portfolio");
  EXPECT_EQ(s.sandbox->mode, "per_run");
  EXPECT_EQ(*s.sandbox->memory_bytes, 2ull << 30);
  EXPECT_EQ(s.sandbox->network, "proxy");
  EXPECT_EQ(s.sandbox->allow, (std::vector<std::string>{"api.anthropic.com", "git.example.com"}));
  EXPECT_EQ(s.env.at("SITE_STYLE"), "minimal");
  EXPECT_EQ(s.artifact->dest, ArtifactDest::kGit);
  EXPECT_EQ(s.artifact->token_key, "GITHUB_TOKEN");
  EXPECT_EQ(d.steps[2].needs, std::vector<std::string>{"scaffold"});
  EXPECT_EQ(d.steps[3].where.line, 22);
}

TEST(WorkflowParse, JsonReadsTheSame) {
  const std::string json = R"({
  "name": "j",
  "inputs": {"n": {"type": "number", "default": 3}},
  "steps": [
    {"id": "a", "mode": "sandboxed", "argv": ["echo", "{{inputs.n}}"], "timeout": "5s",
     "retry": {"attempts": 3, "backoff": "10ms", "on": ["exit", "sandbox"]}},
    {"id": "b", "needs": ["a"], "mode": "in_process", "kind": "json",
     "input": "{{steps.a.output}}", "pointer": "/x"}
  ]
})";
  const Loaded l = check(json);
  ASSERT_TRUE(l.ok()) << all(l);
  EXPECT_EQ(l.def.inputs[0].default_value->get<int>(), 3);
  EXPECT_FALSE(l.def.inputs[0].required);
  EXPECT_EQ(l.def.steps[0].argv, (std::vector<std::string>{"echo", "{{inputs.n}}"}));
  EXPECT_EQ(l.def.steps[0].retry.attempts, 3);
  EXPECT_TRUE(l.def.steps[0].retry.retries(ErrorKind::kExit));
  EXPECT_FALSE(l.def.steps[0].retry.retries(ErrorKind::kNetwork));
  EXPECT_EQ(l.def.steps[1].where.line, 7);
}

TEST(WorkflowParse, UnknownKeysAndModesNameLineAndKey) {
  expect_problem(
      "name: w\nsteps:\n  - id: a\n    mode: sandboxed\n    run: true\n    tiemout: 5s\n",
      "wf.yaml:6: steps[0].tiemout: unknown key (did you mean \"timeout\"?) (expected "
      "one of: id, needs, mode, kind, timeout, retry, allow_failure, template, input, "
      "pointer, patch, schema, method, url, headers, body, allow, model, prompt, "
      "system, message, approvers, duration, run, argv, agent, identity, sandbox, "
      "env, artifact, requires)");
  expect_problem("name: w\nsteps:\n  - id: a\n    mode: sandboxd\n    run: true\n",
                 "wf.yaml:4: steps[0].mode: unknown execution mode \"sandboxd\" (expected "
                 "in_process, sandboxed, identity_scoped, cli_agent or cli_agent_jit) (did you "
                 "mean \"sandboxed\"?)");
  const Loaded l = check("name: w\nstep:\n  - id: a\n");
  EXPECT_EQ(all(l),
            "wf.yaml:2: step: unknown key (did you mean \"steps\"?) (expected one of: name, "
            "description, inputs, steps, timeout, max_parallel)\nwf.yaml:1: steps: missing\n");
  expect_problem(
      "name: w\nsteps:\n  - id: a\n    mode: sandboxed\n    run: true\n    sandbox: {mem: lots}\n",
      "wf.yaml:6: steps[0].sandbox.mem: expected a size such as 512m or 2g, got \"lots\"");
  expect_problem("name: w\nsteps:\n  - id: a\n    mode: in_process\n    kind: shell\n",
                 "wf.yaml:5: steps[0].kind: unknown kind \"shell\" (expected template, json, "
                 "http, llm, approval or sleep)");
}

// A key given twice is an error naming both lines: yaml-cpp keeps both, and
// the parser's lookups took the first (`run: echo safe`) while a reader of the
// file may well take the last.
TEST(WorkflowParse, AKeyGivenTwiceIsAnError) {
  expect_problem(
      "name: w\nsteps:\n  - id: build\n    mode: sandboxed\n    run: echo safe\n"
      "    run: rm -rf /workspace/*\n",
      "wf.yaml:6: steps[0].run: duplicate key (first at line 5)");
  expect_problem("name: w\nname: v\nsteps:\n  - id: a\n    mode: in_process\n    kind: sleep\n",
                 "wf.yaml:2: name: duplicate key (first at line 1)");
}

// The map form of a step's network names a policy as the scalar form does.
TEST(WorkflowParse, ANetworkPolicyIsOneOfTheThree) {
  const std::string step = "name: w\nsteps:\n  - id: a\n    mode: sandboxed\n    run: true\n";
  expect_problem(step + "    sandbox: {network: {policy: nonee}}\n",
                 "wf.yaml:6: steps[0].sandbox.network.policy: expected none, proxy or host, got "
                 "\"nonee\"");
  expect_problem(step + "    sandbox: {network: {policy: none, allow: [example.com]}}\n",
                 "wf.yaml:6: steps[0].sandbox.network.allow: an allow list needs policy proxy "
                 "(policy none has none)");
  EXPECT_TRUE(check(step + "    sandbox: {network: {policy: proxy, allow: [example.com]}}\n").ok());
}

TEST(WorkflowParse, SyntaxErrorsNameLineAndColumn) {
  const Loaded l = check("name: w\nsteps:\n  - id: a\n   mode: [x\n");
  ASSERT_EQ(l.problems.size(), 1u);
  EXPECT_EQ(l.problems[0].rfind("wf.yaml:", 0), 0u);
  EXPECT_NE(l.problems[0].find("not valid YAML or JSON"), std::string::npos) << l.problems[0];
  const Loaded j = check("{\"name\": \"w\", \"steps\": [}");
  ASSERT_EQ(j.problems.size(), 1u);
  EXPECT_EQ(j.problems[0].rfind("wf.yaml:1:", 0), 0u) << j.problems[0];
}

TEST(WorkflowValidate, ACycleAndAMissingNeed) {
  expect_problem(
      "name: w\nsteps:\n  - {id: a, mode: sandboxed, run: x, needs: [c]}\n"
      "  - {id: b, mode: sandboxed, run: x, needs: [a]}\n"
      "  - {id: c, mode: sandboxed, run: x, needs: [b]}\n",
      "wf.yaml:4: steps[1].needs: a cycle: a -> c -> b -> a");
  expect_problem(
      "name: w\nsteps:\n  - {id: a, mode: sandboxed, run: x}\n"
      "  - {id: b, mode: sandboxed, run: x, needs: [aa]}\n",
      "wf.yaml:4: steps[1].needs: step \"aa\" does not exist (steps: a, b)");
  expect_problem("name: w\nsteps:\n  - {id: a, mode: sandboxed, run: x, needs: [a]}\n",
                 "wf.yaml:3: steps[0].needs: step \"a\" needs itself");
  expect_problem(
      "name: w\nsteps:\n  - {id: a, mode: sandboxed, run: x}\n  - {id: a, mode: sandboxed, run: "
      "y}\n",
      "wf.yaml:4: steps[1].id: step \"a\" is defined twice (first at line 3)");
}

TEST(WorkflowValidate, TemplatesNameOnlyKnownInputsAndStepsItNeeds) {
  expect_problem(
      "name: w\nsteps:\n  - id: a\n    mode: sandboxed\n    run: echo {{inputs.brief}}\n",
      "wf.yaml:5: steps[0].run: {{inputs.brief}}: the workflow has no input \"brief\" "
      "(it declares no inputs)");
  expect_problem(
      "name: w\nsteps:\n  - {id: a, mode: sandboxed, run: x}\n"
      "  - {id: b, mode: sandboxed, run: 'echo {{steps.c.output}}', needs: [a]}\n",
      "wf.yaml:4: steps[1].run: {{steps.c.output}}: there is no step \"c\" (steps: a, b)");
  expect_problem(
      "name: w\nsteps:\n  - {id: a, mode: sandboxed, run: x}\n"
      "  - {id: b, mode: sandboxed, run: 'echo {{steps.a.output}}'}\n",
      "wf.yaml:4: steps[1].run: {{steps.a.output}}: step \"a\" is not in the needs of "
      "\"b\", so it may not have run yet (add it to needs)");
  expect_problem(
      "name: w\nsteps:\n  - {id: a, mode: sandboxed, run: x}\n"
      "  - {id: b, mode: sandboxed, run: 'echo {{steps.a.outptu}}', needs: [a]}\n",
      "wf.yaml:4: steps[1].run: {{steps.a.outptu}}: a step has no field \"outptu\" "
      "(output, stdout, stderr, exit_code, status, json, artifact, error)");
  expect_problem("name: w\nsteps:\n  - {id: a, mode: sandboxed, run: 'echo {{#x}}'}\n",
                 "wf.yaml:3: steps[0].run: template (at byte 11): section \"x\" is never closed");
  expect_problem("name: w\nsteps:\n  - {id: a, mode: sandboxed, run: 'echo {{brief}}'}\n",
                 "wf.yaml:3: steps[0].run: {{brief}}: unknown name (expected inputs.NAME, "
                 "steps.ID.FIELD, run.id, run.project, run.user or workflow.name)");
  // Transitive needs are enough; names inside a section may be the item's own.
  const Loaded ok = check(
      "name: w\nsteps:\n  - {id: a, mode: sandboxed, run: x}\n"
      "  - {id: b, mode: sandboxed, run: x, needs: [a]}\n"
      "  - {id: c, mode: in_process, kind: template, needs: [b], template: "
      "'{{#steps.a.json.items}}{{name}}{{/steps.a.json.items}} {{steps.a.exit_code}}'}\n");
  EXPECT_TRUE(ok.ok()) << all(ok);
}

TEST(WorkflowValidate, SettingsTheModeDoesNotTake) {
  expect_problem(
      "name: w\nsteps:\n  - id: a\n    mode: in_process\n    kind: template\n    template: x\n"
      "    sandbox: {mem: 1g}\n",
      "wf.yaml:7: steps[0].sandbox: an in_process step runs in the worker and takes no sandbox "
      "(use mode: sandboxed for a step in a sandbox)");
  expect_problem(
      "name: w\nsteps:\n  - {id: a, mode: in_process, kind: template, template: x, run: ls}\n",
      "wf.yaml:3: steps[0].run: an in_process step never runs a command or a shell in "
      "the worker (use mode: sandboxed)");
  expect_problem(
      "name: w\nsteps:\n  - {id: a, mode: sandboxed, run: ls, identity: {workflow: w}}\n",
      "wf.yaml:3: steps[0].identity: a sandboxed step gets an empty environment and "
      "no identity (use mode: identity_scoped)");
  expect_problem("name: w\nsteps:\n  - {id: a, mode: sandboxed, run: ls, artifact: {dest: none}}\n",
                 "wf.yaml:3: steps[0].artifact: only cli_agent and cli_agent_jit steps send an "
                 "artifact");
  expect_problem("name: w\nsteps:\n  - {id: a, mode: cli_agent, agent: codex}\n",
                 "wf.yaml:3: steps[0].prompt: missing: the agent's task");
  expect_problem("name: w\nsteps:\n  - {id: a, mode: sandboxed, kind: template, run: ls}\n",
                 "wf.yaml:3: steps[0].kind: only in_process steps have a kind; this step runs in "
                 "a sandbox (mode sandboxed)");
  expect_problem(
      "name: w\nsteps:\n  - {id: a, mode: in_process, kind: sleep, duration: 1s, template: x}\n",
      "wf.yaml:3: steps[0].template: a sleep step takes no template (only template "
      "steps do)");
  expect_problem("name: w\nsteps:\n  - {id: a, mode: sandboxed}\n",
                 "wf.yaml:3: steps[0].run: missing: the command to run (run: a shell line, or "
                 "argv: a list)");
  // cli_agent_jit is accepted here (it runs once JIT credentials land).
  const Loaded jit =
      check("name: w\nsteps:\n  - {id: a, mode: cli_agent_jit, agent: codex, prompt: go}\n");
  EXPECT_TRUE(jit.ok()) << all(jit);
}

TEST(WorkflowTemplate, RendersValuesAndQuotesThemForTheShell) {
  const nlohmann::json ctx = {
      {"inputs", {{"brief", "a site; rm -rf / 'x'"}, {"n", 3}, {"yes", true}}},
      {"steps",
       {{"a", {{"output", "hi"}, {"json", {{"items", {{{"name", "p"}}, {{"name", "q"}}}}}}}}}}};
  EXPECT_EQ(*render_template("{{inputs.brief}}|{{inputs.n}}|{{inputs.yes}}|{{inputs.none}}", ctx),
            "a site; rm -rf / 'x'|3|true|");
  EXPECT_EQ(*render_template("echo {{inputs.brief}}", ctx, Escape::kShell),
            "echo 'a site; rm -rf / '\\''x'\\'''");
  EXPECT_EQ(*render_template("echo {{{inputs.brief}}}", ctx, Escape::kShell),
            "echo a site; rm -rf / 'x'");
  EXPECT_EQ(*render_template("{{#steps.a.json.items}}[{{name}}]{{/steps.a.json.items}}", ctx),
            "[p][q]");
  EXPECT_EQ(*render_template("<{{inputs.brief}}>", ctx),
            "<a site; rm -rf / 'x'>");  // no HTML escaping
  EXPECT_FALSE(render_template("{{>partial}}", ctx).ok());
  EXPECT_FALSE(render_template("{{=<% %>=}}", ctx).ok());
}

}  // namespace
}  // namespace rf::workflow
