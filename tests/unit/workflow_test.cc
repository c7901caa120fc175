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

// What a replay runs again only once a person approves (issue 40): each
// reason named, none for steps that change nothing outside.
TEST(WorkflowReplay, SideEffectingStepsAreNamedWithWhy) {
  const Loaded l = check(std::string(kPortfolio) + R"(
  - {id: get, mode: in_process, kind: http, url: "https://api.example.com/x", allow: [api.example.com]}
  - {id: head, mode: in_process, kind: http, method: HEAD, url: "https://api.example.com/x", allow: [api.example.com]}
  - {id: post, mode: in_process, kind: http, method: POST, url: "https://api.example.com/x", allow: [api.example.com]}
  - {id: delete, mode: in_process, kind: http, method: DELETE, url: "https://api.example.com/x", allow: [api.example.com]}
  - {id: gate, mode: in_process, kind: approval}
  - {id: keyed, mode: identity_scoped, run: "true"}
  - id: jit
    mode: cli_agent_jit
    agent: codex
    prompt: "p"
    artifact: {dest: s3, endpoint: "https://s3.example.com", bucket: site, key: "k.tar"}
  - {id: local, mode: cli_agent, agent: codex, prompt: "p", artifact: {dest: local, path: out}}
  - {id: kept, mode: cli_agent, agent: codex, prompt: "p", artifact: {dest: none}}
)");
  ASSERT_TRUE(l.ok()) << all(l);
  auto effects = [&](const char* id) { return side_effects(*l.def.step(id)); };
  using V = std::vector<std::string>;
  for (const char* id : {"plan", "verify", "summarise", "get", "head", "gate"}) {
    EXPECT_EQ(effects(id), V{}) << id;
  }
  EXPECT_EQ(effects("scaffold"),
            (V{"cli_agent: it runs agent claude-code with the run's identity, whose credentials "
               "reach beyond its sandbox",
               "it pushes an artifact to git https://git.example.com/acme/site.git (branch "
               "main)"}));
  EXPECT_EQ(effects("post"),
            V{"http POST https://api.example.com/x: it may change what the server holds"});
  EXPECT_EQ(effects("delete").size(), 1u);
  EXPECT_EQ(effects("keyed"), V{"identity_scoped: it runs with the run's identity, whose "
                                "credentials reach beyond its sandbox"});
  EXPECT_EQ(effects("jit"),
            (V{"cli_agent_jit: it runs agent codex with the run's identity and may ask for more "
               "credentials",
               "it uploads an artifact to s3 site/k.tar at https://s3.example.com"}));
  EXPECT_EQ(effects("local")[1], "it writes an artifact to out under the worker's --artifact-root");
  EXPECT_EQ(effects("kept").size(), 1u);  // the agent only: dest none stays in the store
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
      "wf.yaml:6:5: steps[0].run: duplicate key (first at line 5)");
  expect_problem("name: w\nname: v\nsteps:\n  - id: a\n    mode: in_process\n    kind: sleep\n",
                 "wf.yaml:2:1: name: duplicate key (first at line 1)");
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

// Every problem of a file, as `workflow validate` prints it (one per line).
std::string load_problems(const std::string& text) {
  auto def = load_workflow_text(text, "wf.yaml");
  return def ? std::string() : def.error().to_string();
}

constexpr const char* kTwoSteps =
    "name: w\nsteps:\n  - id: a\n    mode: sandboxed\n    run: echo a\n"
    "  - id: b\n    mode: sandboxed\n";

// yaml-cpp 0.7 reads a double-quoted string left open at the end of the file
// as running to the end: `workflow validate` said "2 steps, valid" of a file
// PyYAML refuses. The load names the line and column where the quote opens.
TEST(WorkflowLoad, AQuoteLeftOpenAtTheEndOfTheFileIsRefused) {
  const std::string open =
      "wf.yaml:8:10: not valid YAML or JSON: the double-quoted string that "
      "opens here is never closed";
  expect_problem(std::string(kTwoSteps) + "    run: \"echo b\n", open);
  expect_problem(std::string(kTwoSteps) + "    run: \"echo b", open);  // no final newline
  EXPECT_EQ(load_problems(std::string(kTwoSteps) + "    run: \"echo b\n"), open);
  // An escaped quote does not close it; '' in a single-quoted one does not either.
  expect_problem(std::string(kTwoSteps) + "    run: \"echo \\\"b\\\"\n", open);
  expect_problem(std::string(kTwoSteps) + "    run: 'it''s\n",
                 "wf.yaml:8:10: not valid YAML or JSON: the single-quoted string that opens "
                 "here is never closed");
  // Left open mid-file, it swallowed the steps after it.
  expect_problem(
      "name: w\nsteps:\n  - id: a\n    mode: sandboxed\n    run: \"echo a\n"
      "  - id: b\n    mode: sandboxed\n    run: echo b\n",
      "wf.yaml:5:10: not valid YAML or JSON: the double-quoted string that opens here is never "
      "closed");
  // A key, a tagged or anchored value, a value in a flow mapping.
  expect_problem("name: w\nsteps:\n  - id: a\n    mode: sandboxed\n    \"run: echo a\n",
                 "wf.yaml:5:5: not valid YAML or JSON: the double-quoted string that opens here "
                 "is never closed");
  expect_problem(std::string(kTwoSteps) + "    run: !!str &x \"echo b\n",
                 "wf.yaml:8:19: not valid YAML or JSON: the double-quoted string that opens "
                 "here is never closed");
  // Closed ones, with escapes, over lines, in a block scalar or a comment, are fine.
  const Loaded ok = check(std::string(kTwoSteps) +
                          "    run: \"echo \\\"b\\\" \\\\\"\n    env: {A: 'it''s', B: \"x\n"
                          "      y\"}\n    # a \"comment\n    argv_note: |\n      \"open\n");
  ASSERT_EQ(ok.problems.size(), 1u) << all(ok);  // only the unknown key
  EXPECT_EQ(ok.def.steps[1].run, "echo \"b\" \\");
  EXPECT_EQ(ok.def.steps[1].env.at("A"), "it's");
  EXPECT_EQ(ok.def.steps[1].env.at("B"), "x y");
  const Loaded plain = check(std::string(kTwoSteps) + "    run: echo \"b\n");  // plain text
  EXPECT_TRUE(plain.ok()) << all(plain);
  EXPECT_EQ(plain.def.steps[1].run, "echo \"b");
}

// What follows the workflow is refused, not dropped: a second document, text
// after `...` or after a JSON object, a line with no ':' in a mapping.
TEST(WorkflowLoad, TrailingContentIsRefused) {
  const std::string wf = std::string(kTwoSteps) + "    run: echo b\n";
  const std::string second =
      ": not valid YAML or JSON: trailing content after the workflow (a workflow file holds one "
      "YAML document)";
  expect_problem(wf + "---\nname: v\n", "wf.yaml:9:1" + second);
  expect_problem(wf + "---\n", "wf.yaml:9:1" + second);
  expect_problem(wf + "...\nsteps: []\n", "wf.yaml:10:1" + second);
  expect_problem(
      "{\"name\": \"w\", \"steps\": [{\"id\": \"a\", \"mode\": \"sandboxed\", "
      "\"run\": \"x\"}]} xyz\n",
      "wf.yaml:1:72" + second);
  expect_problem(
      "{\"name\": \"w\", \"steps\": [{\"id\": \"a\", \"mode\": \"sandboxed\", "
      "\"run\": \"x\"}]},\n",
      "wf.yaml:1:71" + second);
  expect_problem(wf + "...\n,x\n", "wf.yaml:10:1" + second);
  // A ',' where a document starts: yaml-cpp reads an empty document there, and
  // another, without end (its LoadAll runs out of memory).
  expect_problem(",name: w\n", "wf.yaml:1:1: not valid YAML or JSON: unexpected ','");
  expect_problem(wf + "  garbage\n", "wf.yaml:9:3: not valid YAML or JSON: end of map not found");
  expect_problem(wf + "    stray words\n",
                 "wf.yaml:9:5: not valid YAML or JSON: expected KEY: VALUE, got \"stray words\" "
                 "with no ':'");
  expect_problem(wf + "oops",
                 "wf.yaml:9:1: not valid YAML or JSON: expected KEY: VALUE, got \"oops\" with no "
                 "':'");
  // A document end marker alone, comments, a key with no value and `? key` are fine.
  EXPECT_TRUE(check(wf + "...\n# the end\n").ok());
  EXPECT_TRUE(check("---\n" + wf).ok());
  const Loaded q = check(wf + "inputs:\n  brief:\n");
  EXPECT_TRUE(q.ok()) << all(q);
  const Loaded k = check(wf + "inputs:\n  ? brief\n");
  EXPECT_TRUE(k.ok()) << all(k);
  ASSERT_EQ(k.def.inputs.size(), 1u);
  EXPECT_EQ(k.def.inputs[0].name, "brief");
}

// The key given twice is named by line and column, in a block or a flow mapping.
TEST(WorkflowLoad, AKeyGivenTwiceNamesLineAndColumn) {
  expect_problem("name: w\nsteps:\n  - {id: a, mode: sandboxed, run: x, id: b}\n",
                 "wf.yaml:3:38: steps[0].id: duplicate key (first at line 3)");
  expect_problem("name: w\nsteps:\n  - id: a\n    env: {A: 1, B: 2}\n    env:\n      A: 3\n",
                 "wf.yaml:5:5: steps[0].env: duplicate key (first at line 4)");
}

// Other files the CLI reads as YAML (`policy set --file`) are read as strictly.
TEST(WorkflowLoad, AnyYamlDocumentIsReadStrictly) {
  auto open = yaml_document("rules:\n  - allow: \"x\n", "p.yaml");
  ASSERT_FALSE(open.ok());
  EXPECT_EQ(open.error().to_string(),
            "p.yaml:2:12: not valid YAML or JSON: the double-quoted string that opens here is "
            "never closed");
  auto more = yaml_document("a: 1\n---\nb: 2\n", "p.yaml");
  ASSERT_FALSE(more.ok());
  EXPECT_EQ(more.error().to_string(),
            "p.yaml:2:1: not valid YAML or JSON: trailing content after the document (the file "
            "holds one YAML document)");
  auto dup = yaml_document("a: 1\nb: {c: 1, c: 2}\n", "p.yaml");
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.error().to_string(), "p.yaml:2:11: b.c: duplicate key (first at line 2)");
  auto good = yaml_document("a: \"x\"\nb: [1, 'y']\n", "p.yaml");
  ASSERT_TRUE(good.ok()) << good.error().to_string();
  EXPECT_EQ(*good, (nlohmann::json{{"a", "x"}, {"b", {1, "y"}}}));
}

// retry.on_interrupt: true alone runs an interrupted step once more: attempts
// defaults to 2 with it, and stays what the file says when it says.
TEST(WorkflowParse, OnInterruptAloneMeansOneMoreAttempt) {
  auto retry = [](const std::string& r) {
    const Loaded l =
        check("name: w\nsteps:\n  - {id: a, mode: sandboxed, run: x, retry: " + r + "}\n");
    EXPECT_TRUE(l.ok()) << all(l);
    return l.ok() ? l.def.steps[0].retry : RetryPolicy{};
  };
  const RetryPolicy alone = retry("{on_interrupt: true}");
  EXPECT_TRUE(alone.on_interrupt);
  EXPECT_EQ(alone.attempts, 2);
  EXPECT_TRUE(alone.retries(ErrorKind::kInterrupted));
  EXPECT_EQ(retry("{on_interrupt: true, attempts: 1}").attempts, 1);
  EXPECT_EQ(retry("{attempts: 5, on_interrupt: true}").attempts, 5);
  EXPECT_EQ(retry("{on_interrupt: false}").attempts, 1);
  EXPECT_EQ(retry("{backoff: 1s}").attempts, 1);
  const Loaded none = check("name: w\nsteps:\n  - {id: a, mode: sandboxed, run: x}\n");
  EXPECT_EQ(none.def.steps[0].retry.attempts, 1);
  EXPECT_FALSE(none.def.steps[0].retry.on_interrupt);
  // Why an interrupted attempt is not run again, as the step's error says it.
  EXPECT_EQ(RetryPolicy{}.interrupted_not_run_again(1),
            "not run again: set retry.on_interrupt: true to allow it");
  EXPECT_EQ(alone.interrupted_not_run_again(2),
            "not run again: attempt 2 was the last of retry.attempts: 2 (raise retry.attempts "
            "to allow another)");
  EXPECT_EQ(retry("{on_interrupt: true, attempts: 1}").interrupted_not_run_again(1),
            "not run again: attempt 1 was the last of retry.attempts: 1 (raise retry.attempts "
            "to allow another)");
}

// Every problem of a file at once: an unknown key in a mapping does not hide
// the problems of its other keys, and the checks of the steps' references,
// settings and templates run beside the shape's, in file order.
TEST(WorkflowValidate, EveryProblemOfAFileInOnePass) {
  const std::string text =
      "name: w\n"
      "steps:\n"
      "  - id: a\n"
      "    mode: sandboxed\n"
      "    run: echo a\n"
      "    retry: {attempt: 2, backoff: never}\n"
      "    sandbox: {memm: 1g, cpu: lots}\n"
      "  - id: b\n"
      "    needs: [c]\n"
      "    mode: sandboxed\n"
      "    run: x\n"
      "  - id: a\n"
      "    mode: sandboxed\n"
      "    run: \"{{steps.zz.output}}\"\n"
      "  - id: t\n"
      "    mode: in_process\n"
      "    sandbox: {mem: 1g}\n";
  EXPECT_EQ(
      load_problems(text),
      "wf.yaml:6: steps[0].retry.attempt: unknown key (did you mean \"attempts\"?) (expected one "
      "of: attempts, backoff, factor, on, on_interrupt)\n"
      "wf.yaml:6: steps[0].retry.backoff: expected a duration such as 30s, 5m or 250ms, got "
      "\"never\"\n"
      "wf.yaml:7: steps[0].sandbox.memm: unknown key (did you mean \"mem\"?) (expected one of: "
      "mode, image, mem, memory, cpu, pids, disk, network, allow)\n"
      "wf.yaml:7: steps[0].sandbox.cpu: expected a number of cpus such as 1.5\n"
      "wf.yaml:9: steps[1].needs: step \"c\" does not exist (steps: a, b, a, t)\n"
      "wf.yaml:12: steps[2].id: step \"a\" is defined twice (first at line 3)\n"
      "wf.yaml:14: steps[2].run: {{steps.zz.output}}: there is no step \"zz\" (steps: a, b, a, "
      "t)\n"
      "wf.yaml:15: steps[3].kind: missing: an in_process step is one of the declarative kinds "
      "template, json, http, llm, approval or sleep\n"
      "wf.yaml:17: steps[3].sandbox: an in_process step runs in the worker and takes no sandbox "
      "(use mode: sandboxed for a step in a sandbox)");
  // Problems of inputs, models and artifacts past an unknown key; every cycle.
  const std::string more =
      "name: w\n"
      "inputs:\n"
      "  brief: {type: strng, requird: true}\n"
      "steps:\n"
      "  - {id: p, mode: in_process, kind: llm, prompt: '{{inputs.brief}}',\n"
      "     model: {api: openai, base_url: x, model: m, tokens: 5}}\n"
      "  - {id: a, mode: sandboxed, run: x, needs: [b]}\n"
      "  - {id: b, mode: sandboxed, run: x, needs: [a]}\n"
      "  - {id: c, mode: sandboxed, run: x, needs: [d]}\n"
      "  - {id: d, mode: sandboxed, run: x, needs: [c]}\n"
      "  - {id: g, mode: cli_agent, agent: codex, prompt: go, artifact: {dset: git, url: "
      "ftp://x}}\n";
  EXPECT_EQ(
      load_problems(more),
      "wf.yaml:3: inputs.brief.requird: unknown key (did you mean \"required\"?) (expected one "
      "of: type, default, description, required)\n"
      "wf.yaml:3: inputs.brief.type: unknown type \"strng\" (expected string, number, boolean, "
      "object, array)\n"
      "wf.yaml:6: steps[0].model.tokens: unknown key (expected one of: api, base_url, model, "
      "key_env, max_tokens, temperature)\n"
      "wf.yaml:6: steps[0].model.api: unknown API \"openai\" (expected openai_chat, "
      "openai_responses, anthropic_messages)\n"
      "wf.yaml:6: steps[0].model.base_url: expected an http:// or https:// URL, got \"x\"\n"
      "wf.yaml:8: steps[2].needs: a cycle: a -> b -> a\n"
      "wf.yaml:10: steps[4].needs: a cycle: c -> d -> c\n"
      "wf.yaml:11: steps[5].artifact.dset: unknown key (did you mean \"dest\"?) (expected one "
      "of: dest, path, url, branch, token_key, message, endpoint, bucket, key, region, "
      "access_key_key, secret_key_key, session_token_key, max_bytes)\n"
      "wf.yaml:11: steps[5].artifact.dest: missing (git, s3, local or none)");
}

// A problem is reported once, not again as what follows from it: a step
// with no usable mode or kind is not also told what its mode or kind takes.
TEST(WorkflowValidate, AProblemIsNotReportedAgainAsItsConsequences) {
  EXPECT_EQ(load_problems("name: w\nsteps:\n  - id: a\n    mode: [sandboxed]\n    run: ls\n"),
            "wf.yaml:4: steps[0].mode: expected text, got a list");
  EXPECT_EQ(load_problems("name: w\nsteps:\n  - {id: a, mode: in_process, kind: tempalte, "
                          "template: x, run: ls}\n"),
            "wf.yaml:3: steps[0].kind: unknown kind \"tempalte\" (did you mean \"template\"?) "
            "(expected template, json, http, llm, approval or sleep)\n"
            "wf.yaml:3: steps[0].run: an in_process step never runs a command or a shell in the "
            "worker (use mode: sandboxed)");
  EXPECT_EQ(load_problems("name: w\ninputs: {brief: text}\nsteps:\n"
                          "  - {id: a, mode: sandboxed, run: 'echo {{inputs.brief}}'}\n"),
            "wf.yaml:2: inputs.brief: expected a mapping, got \"text\"");
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
