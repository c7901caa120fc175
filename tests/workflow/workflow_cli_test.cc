// Workflows end to end (issue 12), as a user runs them: the real `ringfence`
// binary validates and runs workflow files on a real worker whose sandbox
// steps run in native sandboxes; `run show` tells the story.
#include <csignal>

#include "workflow/workflow_harness.h"

namespace rf::testing {
namespace {

TEST_F(WorkflowTest, ValidationErrorsPointAtTheLine) {
  const std::string wf = file("bad.yaml", R"(name: bad
steps:
  - id: plan
    mode: in_process
    kind: template
    template: "{{inputs.brief}}"
    sandbox: {mem: 1g}
  - id: build
    needs: [plna]
    mode: sandboxd
    run: "true"
)");
  std::string out, err;
  EXPECT_EQ(run({"workflow", "validate", wf}, &out, &err), 1);
  EXPECT_NE(err.find(wf + ":6: steps[0].template: {{inputs.brief}}: the workflow has no input"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find(wf + ":7: steps[0].sandbox: an in_process step runs in the worker"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find(wf + ":10: steps[1].mode: unknown execution mode \"sandboxd\""),
            std::string::npos)
      << err;
  // `workflow run` refuses it the same way, before anything is queued.
  EXPECT_EQ(run({"workflow", "run", wf, "--project", "acme"}, &out, &err), 2);
  EXPECT_NE(err.find(wf + ":10: steps[1].mode"), std::string::npos) << err;
}

// A DAG: two sandboxed steps in parallel, then in_process steps that read
// their outputs; `run show` records mode, sandbox, attempt, status and outputs.
TEST_F(WorkflowTest, StepsRunInTheirModesAndLaterStepsReadTheirOutputs) {
  start_worker();
  const std::string wf = file("dag.yaml", R"(name: dag
inputs:
  who: {type: string}
  n: {type: number, default: 2}
steps:
  - id: left
    mode: sandboxed
    run: "echo hello {{inputs.who}}; id -u; test -z \"$HOME_SECRET\" && echo clean"
  - id: right
    mode: sandboxed
    argv: [sh, -c, 'printf "{\"items\": [{\"name\": \"a\"}, {\"name\": \"b\"}], \"n\": %s}" "$N"', x]
    env: {N: "{{inputs.n}}"}
  - id: both
    needs: [left, right]
    mode: in_process
    kind: template
    template: "{{steps.left.output}} | {{#steps.right.json.items}}[{{name}}]{{/steps.right.json.items}} | {{steps.right.exit_code}}"
  - id: pick
    needs: [right]
    mode: in_process
    kind: json
    input: "{{steps.right.output}}"
    pointer: /items/1/name
    schema: {type: string, minLength: 1}
)");
  std::string out, err;
  ASSERT_EQ(run({"workflow", "run", wf, "--project", "acme", "--input", "who=a b'c", "--run-id",
                 "r1", "--follow"},
                &out, &err),
            0)
      << out << err;
  EXPECT_NE(out.find("> left           sandboxed  attempt 1"), std::string::npos) << out;
  EXPECT_NE(out.find("  left | hello a b'c"), std::string::npos) << out;
  EXPECT_NE(out.find("run r1 succeeded"), std::string::npos) << out;
  const json r = show("r1");
  EXPECT_EQ(r["state"], "succeeded");
  const json both = step(r, "both");
  EXPECT_EQ(both["mode"], "in_process");
  EXPECT_EQ(both["outputs"]["output"], "hello a b'c\n1000\nclean | [a][b] | 0");
  EXPECT_EQ(step(r, "pick")["outputs"]["output"], "b");
  const json left = step(r, "left");
  EXPECT_EQ(left["state"], "succeeded");
  EXPECT_EQ(left["attempt"], 1);
  EXPECT_EQ(left["sandbox"].get<std::string>().rfind("rf-", 0), 0u) << left;
  EXPECT_NE(left["sandbox"], step(r, "right")["sandbox"]);  // each step its own sandbox
  EXPECT_EQ(left["outputs"]["exit_code"], 0);
  EXPECT_EQ(left["inputs_digest"].get<std::string>().size(), 64u);
  EXPECT_TRUE(left.contains("call"));
  // The table a person reads.
  ASSERT_EQ(run({"run", "show", "r1"}, &out, &err), 0) << err;
  EXPECT_NE(out.find("run r1  workflow dag  project acme  succeeded"), std::string::npos) << out;
  EXPECT_NE(out.find("pick           in_process/json"), std::string::npos) << out;
}

TEST_F(WorkflowTest, InputsAreTypedAndRequired) {
  const std::string wf = file("in.yaml", R"(name: inputs
inputs: {n: {type: number}, flag: {type: boolean, default: false}}
steps:
  - {id: a, mode: in_process, kind: template, template: "{{inputs.n}}"}
)");
  std::string out, err;
  EXPECT_EQ(run({"workflow", "run", wf, "--project", "acme"}, &out, &err), 2);
  EXPECT_NE(err.find("--input n: required by workflow inputs (" + wf + ":2: inputs.n)"),
            std::string::npos)
      << err;
  EXPECT_EQ(run({"workflow", "run", wf, "--project", "acme", "--input", "n=many"}, &out, &err), 2);
  EXPECT_NE(err.find("--input n: expected a number, got \"many\""), std::string::npos) << err;
  EXPECT_EQ(run({"workflow", "run", wf, "--project", "acme", "--input", "m=1"}, &out, &err), 2);
  EXPECT_NE(err.find("--input m: workflow inputs has no such input (inputs: n, flag)"),
            std::string::npos)
      << err;
}

// Retries on the kinds named, a failure skips what needs it, and the run
// fails with the first failure; independent steps still finish.
TEST_F(WorkflowTest, RetriesThenFailureSkipsDependents) {
  start_worker();
  const std::string wf = file("retry.yaml", R"(name: retry
steps:
  - id: flaky
    mode: sandboxed
    run: "echo try >> /tmp/count; test $(wc -l < /tmp/count) -ge 9"
    sandbox: {mode: per_run}
    retry: {attempts: 3, backoff: 50ms, on: [exit]}
  - id: after
    needs: [flaky]
    mode: sandboxed
    run: "echo never"
  - id: aside
    mode: in_process
    kind: sleep
    duration: 200ms
  - id: optional
    mode: sandboxed
    run: "exit 4"
    allow_failure: true
)");
  std::string out, err;
  EXPECT_EQ(run({"workflow", "run", wf, "--project", "acme", "--run-id", "r2"}, &out, &err), 1)
      << out << err;
  const json r = show("r2");
  EXPECT_EQ(r["state"], "failed");
  EXPECT_EQ(r["error"], "step flaky failed: exited 1");
  EXPECT_EQ(attempts(r, "flaky"), 3);
  EXPECT_EQ(step(r, "flaky")["error_kind"], "exit");
  EXPECT_EQ(step(r, "after")["state"], "skipped");
  EXPECT_EQ(step(r, "aside")["state"], "succeeded");
  EXPECT_EQ(step(r, "optional")["state"], "failed");
  // A per_run step sandbox is kept for the run: the three attempts shared /tmp.
  EXPECT_EQ(step(r, "flaky", 3)["sandbox"], step(r, "flaky", 1)["sandbox"]);
}

TEST_F(WorkflowTest, AnApprovalWaitsForAHuman) {
  start_worker();
  const std::string wf = file("approve.yaml", R"(name: approve
steps:
  - id: gate
    mode: in_process
    kind: approval
    message: "Ship {{run.id}}?"
    approvers: [alice]
    timeout: 60s
  - id: ship
    needs: [gate]
    mode: in_process
    kind: template
    template: "shipped, approved by {{steps.gate.json.by}}"
)");
  Cli follower({"workflow", "run", wf, "--project", "acme", "--run-id", "r3", "--follow",
                "--state-dir", state_});
  std::string out, err;
  // It shows up in the list with its message; bob may not answer it.
  json pending;
  for (int i = 0; i < 200 && pending.empty(); ++i) {
    ASSERT_EQ(run({"approvals", "list", "--json"}, &out, &err), 0) << err;
    pending = json::parse(out);
    if (pending.empty()) std::this_thread::sleep_for(50ms);
  }
  ASSERT_EQ(pending.size(), 1u) << out;
  EXPECT_EQ(pending[0]["request"]["message"], "Ship r3?");
  const std::string id = std::to_string(pending[0]["id"].get<int64_t>());
  EXPECT_EQ(run({"approvals", "approve", id, "--as", "bob"}, &out, &err), 1);
  EXPECT_NE(err.find("bob is not one of its approvers"), std::string::npos) << err;
  ASSERT_EQ(run({"approvals", "approve", id, "--as", "alice"}, &out, &err), 0) << err;
  EXPECT_EQ(follower.wait(60s), 0) << follower.out() << follower.err();
  EXPECT_NE(follower.out().find("waiting for approval " + id), std::string::npos) << follower.out();
  EXPECT_EQ(step(show("r3"), "ship")["outputs"]["output"], "shipped, approved by alice");
  // Answered twice: refused.
  EXPECT_EQ(run({"approvals", "deny", id, "--reason", "late", "--as", "alice"}, &out, &err), 1);
  EXPECT_NE(err.find("approval " + id + " is approved already (by alice)"), std::string::npos)
      << err;
}

TEST_F(WorkflowTest, ADeniedOrUnansweredApprovalFailsTheRun) {
  start_worker();
  const std::string wf = file("gate.yaml", R"(name: gate
steps:
  - {id: gate, mode: in_process, kind: approval, timeout: 1s}
)");
  std::string out, err;
  // Nobody answers within its timeout: denied.
  EXPECT_EQ(run({"workflow", "run", wf, "--project", "acme", "--run-id", "r4"}, &out, &err), 1);
  EXPECT_NE(show("r4")["error"].get<std::string>().find(
                "got no answer within 1s, so it counts as denied"),
            std::string::npos);
  // Denied with a reason.
  Cli follower(
      {"workflow", "run", wf, "--project", "acme", "--run-id", "r5", "--state-dir", state_});
  json pending;
  for (int i = 0; i < 100 && pending.empty(); ++i) {
    ASSERT_EQ(run({"approvals", "list", "--json"}, &out, &err), 0);
    pending = json::parse(out);
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_EQ(pending.size(), 1u);
  const std::string id = std::to_string(pending[0]["id"].get<int64_t>());
  ASSERT_EQ(run({"approvals", "deny", id, "--reason", "not today", "--as", "carol"}, &out, &err),
            0);
  EXPECT_EQ(follower.wait(30s), 1);
  EXPECT_EQ(step(show("r5"), "gate")["error"],
            "approval " + id + " was denied by carol: not today");
}

TEST_F(WorkflowTest, ARunCanBeCancelledWhileAStepRuns) {
  start_worker();
  const std::string wf = file("long.yaml", R"(name: long
steps:
  - {id: wait, mode: sandboxed, run: "sleep 60"}
  - {id: later, needs: [wait], mode: sandboxed, run: "true"}
)");
  Cli follower({"workflow", "run", wf, "--project", "acme", "--run-id", "r6", "--follow",
                "--state-dir", state_});
  std::string out, err;
  // Once the step has its sandbox, cancel.
  for (int i = 0; i < 300; ++i) {
    if (follower.running() && !step(show("r6"), "wait").value("sandbox", "").empty()) break;
    std::this_thread::sleep_for(20ms);
  }
  const auto asked = std::chrono::steady_clock::now();
  ASSERT_EQ(run({"run", "cancel", "r6"}, &out, &err), 0) << err;
  EXPECT_EQ(follower.wait(30s), 1);
  EXPECT_LT(std::chrono::steady_clock::now() - asked, 5s);
  const json r = show("r6");
  EXPECT_EQ(r["state"], "cancelled");
  EXPECT_EQ(step(r, "wait")["state"], "cancelled");
  EXPECT_EQ(step(r, "later")["state"], "skipped");
  // Its sandbox went with it.
  ASSERT_EQ(run({"sandbox", "list", "--json"}, &out, &err), 0) << err;
  EXPECT_EQ(out.find(step(r, "wait")["sandbox"].get<std::string>()), std::string::npos) << out;
}

// A step's timeout ends its command; the run's wall clock ends the run.
TEST_F(WorkflowTest, TimeoutsEndAStepAndTheRun) {
  start_worker();
  const std::string wf = file("timeouts.yaml", R"(name: timeouts
timeout: 2s
steps:
  - {id: quick, mode: sandboxed, run: "sleep 10", timeout: 300ms, allow_failure: true}
  - {id: long, mode: sandboxed, run: "sleep 30"}
)");
  std::string out, err;
  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(run({"workflow", "run", wf, "--project", "acme", "--run-id", "t1"}, &out, &err), 1);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 15s);
  const json r = show("t1");
  EXPECT_EQ(step(r, "quick")["error_kind"], "timeout");
  EXPECT_EQ(step(r, "quick")["error"], "the step's timeout (300ms) passed");
  EXPECT_EQ(step(r, "quick")["outputs"]["limit"], "timeout");
  EXPECT_EQ(r["error"], "the run's wall clock (2s) passed");
  EXPECT_EQ(step(r, "long")["state"], "cancelled");
  EXPECT_EQ(step(r, "long")["image"], "host");
}

// An artifact kept in the store comes back with `run artifact`.
TEST_F(WorkflowTest, ArtifactsGoToTheStoreAndToALocalPathConfined) {
  const std::string root = dir_ + "/artifacts";
  std::filesystem::create_directories(root);
  start_model(R"({"turns": [{"text": "done"}]})");
  // An adapter of our own: a "agent" that is a shell script, to test artifacts alone.
  const std::string adapter = file("fake-agent.yaml", R"(name: fake-agent
argv: [sh, -c, "mkdir -p site && echo '<h1>{{prompt}}</h1>' > site/index.html && ln -s /etc/passwd site/passwd && echo made", x]
result: {from: stdout, format: text}
memory_floor: 1g
)");
  start_worker({"--artifact-root", root});
  const std::string wf = file("art.yaml", R"(name: art
steps:
  - id: make
    mode: cli_agent
    agent: )" + adapter + R"(
    prompt: hello
    artifact: {dest: none}
  - id: copy
    mode: cli_agent
    agent: )" + adapter + R"(
    prompt: copied
    artifact: {dest: local, path: "out/{{run.id}}"}
  - id: huge
    mode: cli_agent
    agent: )" + adapter + R"(
    prompt: big
    artifact: {dest: none, max_bytes: 10}
    allow_failure: true
  - id: escape
    mode: cli_agent
    agent: )" + adapter + R"(
    prompt: x
    artifact: {dest: local, path: "../outside"}
    allow_failure: true
)");
  std::string out, err;
  ASSERT_EQ(run({"workflow", "run", wf, "--project", "acme", "--run-id", "r7"}, &out, &err), 0)
      << out << err;
  const json r = show("r7");
  EXPECT_EQ(step(r, "make")["outputs"]["output"], "made");
  EXPECT_EQ(step(r, "make")["outputs"]["artifact"]["dest"], "none");
  EXPECT_EQ(step(r, "make")["outputs"]["artifact"]["files"], 1);  // the symlink is not followed
  ASSERT_EQ(run({"run", "artifact", "r7", "make", "-o", dir_ + "/make.tar"}, &out, &err), 0) << err;
  Ran listing = run_capture({"/bin/tar", "-tf", dir_ + "/make.tar"}, {});
  EXPECT_EQ(listing.out, "site/\nsite/index.html\n");
  EXPECT_EQ(slurp(root + "/acme/out/r7/site/index.html"), "<h1>copied</h1>\n");
  EXPECT_FALSE(std::filesystem::exists(root + "/acme/out/r7/site/passwd"));
  const json escape = step(r, "escape");
  EXPECT_EQ(escape["state"], "failed");
  EXPECT_EQ(escape["error_kind"], "artifact");
  EXPECT_NE(escape["error"].get<std::string>().find(
                "artifact path \"../outside\": no empty, '.' or '..' parts"),
            std::string::npos)
      << escape;
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/outside"));
  EXPECT_EQ(step(r, "huge")["error"],
            "workspace /workspace: over the artifact's limit of 10 bytes at site/index.html");
}

// An attack: the agent plants hooks, a hooks path and a credential helper in
// its workspace's .git, hoping the artifact push runs them with the token.
// The push runs in a git directory of its own with hooks off and no global or
// system config: nothing planted runs, and the token lands nowhere.
TEST_F(WorkflowTest, AnAgentsGitHooksAndConfigNeverRunDuringThePush) {
  const std::string token = random_token("ghp_");
  start_git(token);
  project_secret("acme-github", token, "GITHUB_TOKEN");
  const std::string planter = file("planter.yaml", R"(name: planter
argv: [sh, -c, "mkdir -p .git/hooks && for h in pre-commit post-commit pre-push reference-transaction; do printf '#!/bin/sh\nenv > /workspace/stolen-$0\n' > .git/hooks/$h; done && chmod +x .git/hooks/* && printf '[core]\n\thooksPath = /workspace/.git/hooks\n[credential]\n\thelper = !env > /workspace/stolen-cred\n' > .git/config && echo hi > site.txt && echo planted", x]
result: {from: stdout, format: text}
)");
  const std::string checker = file("checker.yaml", R"(name: checker
argv: [sh, -c, "ls -A /workspace | tr '\\n' ' '", x]
result: {from: stdout, format: text}
)");
  start_worker({"--proxy-resolve", "git.test=127.0.0.1"});
  policy({"--egress-allow", "127.0.0.1/32"});
  const std::string port = std::to_string(git_.port());
  const std::string sandbox = R"(    sandbox: {mode: per_run, network: {allow: ["git.test:)" +
                              port + R"(", "127.0.0.1/32"]}}
)";
  const std::string wf = file("hooks.yaml", R"(name: hooks
steps:
  - id: plant
    mode: cli_agent
    agent: )" + planter + "\n" + sandbox + R"(    prompt: x
    artifact: {dest: git, url: "http://git.test:)" +
                                                port + R"(/site.git", token_key: GITHUB_TOKEN}
  - id: check
    needs: [plant]
    mode: cli_agent
    agent: )" + checker + "\n" + sandbox + R"(    prompt: x
)");
  std::string out, err;
  ASSERT_EQ(run({"workflow", "run", wf, "--project", "acme", "--run-id", "h1"}, &out, &err), 0)
      << out << err;
  const json r = show("h1");
  EXPECT_EQ(step(r, "plant")["outputs"]["artifact"]["commit"].get<std::string>().size(), 40u);
  EXPECT_EQ(step(r, "check")["sandbox"], step(r, "plant")["sandbox"]);  // the same workspace
  // No hook and no credential helper ran: nothing was written next to the site.
  EXPECT_EQ(step(r, "check")["outputs"]["output"], ".git site.txt ");
  // The pushed tree is the site, without the agent's .git.
  const Ran tree = run_capture(
      {"/bin/sh", "-c", "git --git-dir=" + dir_ + "/git/site.git ls-tree -r --name-only main"}, {});
  EXPECT_EQ(tree.out, "site.txt\n");
  EXPECT_EQ(r.dump().find(token), std::string::npos);
}

// in_process http: through the same egress policy as a sandbox.
TEST_F(WorkflowTest, AnHttpStepGoesOnlyWhereItsAllowRulesSay) {
  start_model(R"({"turns": [{"text": "hi"}]})");
  start_worker({"--proxy-resolve", "model.test=127.0.0.1"});
  policy({"--egress-allow", "127.0.0.1/32"});
  const std::string port = std::to_string(model_.port());
  const std::string wf = file("http.yaml", R"(name: http
steps:
  - id: models
    mode: in_process
    kind: http
    url: "http://model.test:)" + port + R"(/v1/models"
    allow: ["model.test:)" + port + R"(", "127.0.0.1/32"]
  - id: private
    mode: in_process
    kind: http
    url: "http://model.test:)" + port + R"(/v1/models"
    allow: ["model.test:)" + port + R"("]
    allow_failure: true
  - id: elsewhere
    mode: in_process
    kind: http
    url: "http://other.test:)" + port + R"(/"
    allow: ["model.test:)" + port + R"("]
    allow_failure: true
)");
  std::string out, err;
  ASSERT_EQ(run({"workflow", "run", wf, "--project", "acme", "--run-id", "r8"}, &out, &err), 0)
      << out << err;
  const json r = show("r8");
  EXPECT_EQ(step(r, "models")["outputs"]["status_code"], 200);
  EXPECT_TRUE(step(r, "models")["outputs"]["json"].contains("data")) << step(r, "models");
  EXPECT_EQ(step(r, "models")["exchanges"][0]["request"]["method"], "GET");
  EXPECT_NE(step(r, "private")["error"].get<std::string>().find(
                "model.test resolved to 127.0.0.1, a loopback address"),
            std::string::npos)
      << step(r, "private");
  EXPECT_NE(step(r, "elsewhere")["error"].get<std::string>().find(
                "no --allow rule matches other.test:" + port),
            std::string::npos)
      << step(r, "elsewhere");
}

// in_process llm with the three APIs, the key from the worker's environment
// or from identity; the key reaches the model and nowhere else.
TEST_F(WorkflowTest, LlmStepsCallTheModelWithTheKeyAndRecordTheExchange) {
  start_model(R"({"turns": [{"text": "requirements: one page"}]})");
  const std::string planner_key = random_token("sk-planner-");
  const std::string anthropic_key = random_token("sk-ant-");
  std::string out, err;
  ASSERT_EQ(run({"secret", "set", "acme-anthropic"}, &out, &err, anthropic_key), 0) << err;
  ASSERT_EQ(run({"identity", "profile", "set", "acme", "--level", "project", "--project", "acme",
                 "ANTHROPIC_API_KEY=secret:acme-anthropic"},
                &out, &err),
            0)
      << err;
  start_worker({}, {"PLANNER_KEY=" + planner_key});
  const std::string base = "http://127.0.0.1:" + std::to_string(model_.port());
  policy({"--egress-allow", "127.0.0.1:" + std::to_string(model_.port()), "--worker-env",
          "PLANNER_KEY"});
  const std::string wf = file("llm.yaml", R"(name: llm
inputs: {brief: {type: string}}
steps:
  - id: chat
    mode: in_process
    kind: llm
    model: {api: openai_chat, base_url: ")" + base +
                                              R"(/v1", model: m1, key_env: PLANNER_KEY}
    system: "Be brief."
    prompt: "Extract requirements from: {{inputs.brief}}"
  - id: responses
    mode: in_process
    kind: llm
    model: {api: openai_responses, base_url: ")" +
                                              base + R"(/v1", model: m2, key_env: PLANNER_KEY}
    prompt: "again: {{inputs.brief}}"
  - id: claude
    mode: in_process
    kind: llm
    identity: {}
    model: {api: anthropic_messages, base_url: ")" +
                                              base + R"(", model: m3, key_env: ANTHROPIC_API_KEY}
    prompt: "and once more"
)");
  ASSERT_EQ(run({"workflow", "run", wf, "--project", "acme", "--run-id", "r9", "--input",
                 "brief=a portfolio"},
                &out, &err),
            0)
      << out << err;
  const json r = show("r9");
  for (const char* id : {"chat", "responses", "claude"}) {
    EXPECT_EQ(step(r, id)["outputs"]["output"], "requirements: one page") << id;
  }
  const auto requests = model_requests();
  ASSERT_EQ(requests.size(), 3u);
  bool chat = false, responses = false, messages = false;
  for (const auto& q : requests) {
    const std::string path = q["path"];
    if (path == "/v1/chat/completions") {
      chat = true;
      EXPECT_EQ(q["headers"]["authorization"], "Bearer " + planner_key);
      EXPECT_EQ(q["body"]["messages"][1]["content"], "Extract requirements from: a portfolio");
    } else if (path == "/v1/responses") {
      responses = true;
      EXPECT_EQ(q["body"]["input"], "again: a portfolio");
    } else if (path == "/v1/messages") {
      messages = true;
      EXPECT_EQ(q["headers"]["x-api-key"], anthropic_key);
    }
  }
  EXPECT_TRUE(chat && responses && messages);
  // The exchange is recorded for replay, without the key.
  const std::string all = r.dump();
  EXPECT_NE(all.find("Extract requirements from: a portfolio"), std::string::npos);
  EXPECT_EQ(all.find(planner_key), std::string::npos);
  EXPECT_EQ(all.find(anthropic_key), std::string::npos);
  EXPECT_EQ(slurp(worker::store_path(state_)).find(planner_key), std::string::npos);
  // The identity versions, never the value.
  EXPECT_EQ(step(r, "claude")["identity"]["keys"][0]["secret"], "acme-anthropic");
}

// kill -9 of the worker mid-run: on restart the finished step is not run
// again, the interrupted one is marked interrupted and never silently
// repeated, so the run fails; with retry.on_interrupt the step runs again.
TEST_F(WorkflowTest, AWorkerKilledMidRunNeverRepeatsAStepSilently) {
  Cli& w = start_worker({"--worker-id", "w1"});
  const std::string wf = file("crash.yaml", R"(name: crash
steps:
  - {id: first, mode: sandboxed, run: "echo first"}
  - {id: slow, needs: [first], mode: sandboxed, run: "sleep 30"}
  - {id: last, needs: [slow], mode: sandboxed, run: "echo last"}
)");
  const std::string wf2 = file("crash2.yaml", R"(name: crash2
steps:
  - {id: first, mode: sandboxed, run: "echo first"}
  - id: slow
    needs: [first]
    mode: sandboxed
    run: "sleep 3"
    retry: {on_interrupt: true, attempts: 2}
  - {id: last, needs: [slow], mode: sandboxed, run: "echo last"}
)");
  std::string out, err;
  ASSERT_EQ(
      run({"workflow", "run", wf, "--project", "acme", "--run-id", "c1", "--detach"}, &out, &err),
      0);
  ASSERT_EQ(
      run({"workflow", "run", wf2, "--project", "acme", "--run-id", "c2", "--detach"}, &out, &err),
      0);
  // Both runs are in their slow step.
  for (int i = 0; i < 500; ++i) {
    if (step(show("c1"), "slow").value("sandbox", "") != "" &&
        step(show("c2"), "slow").value("sandbox", "") != "") {
      break;
    }
    std::this_thread::sleep_for(20ms);
  }
  const std::string sandbox = step(show("c1"), "slow")["sandbox"];
  w.signal(SIGKILL);
  w.wait(10s);
  workers_.clear();
  start_worker({"--worker-id", "w1"});  // the same worker, restarted
  // c1 fails: its slow step was interrupted and may not run again.
  const json c1 = wait_ended("c1");
  EXPECT_EQ(c1["state"], "failed") << c1.dump(1);
  EXPECT_EQ(attempts(c1, "first"), 1);  // not run again
  EXPECT_EQ(attempts(c1, "slow"), 1);
  EXPECT_EQ(step(c1, "slow")["state"], "interrupted");
  EXPECT_NE(c1["error"].get<std::string>().find(
                "step slow failed: interrupted: worker w1 restarted while the step ran (not run "
                "again: set retry.on_interrupt: true to allow it)"),
            std::string::npos)
      << c1["error"];
  EXPECT_EQ(step(c1, "last")["state"], "skipped");
  EXPECT_GE(c1["claims"].get<int>(), 2);
  // c2 opted in: its slow step ran again (a new sandbox) and the run succeeded.
  const json c2 = wait_ended("c2");
  EXPECT_EQ(c2["state"], "succeeded") << c2.dump(1);
  EXPECT_EQ(attempts(c2, "first"), 1);
  EXPECT_EQ(attempts(c2, "slow"), 2);
  EXPECT_NE(step(c2, "slow", 1)["sandbox"], step(c2, "slow", 2)["sandbox"]);  // a new sandbox
  // Nothing is left behind: the killed worker's sandboxes were reaped.
  ASSERT_EQ(run({"sandbox", "list"}, &out, &err), 0) << err;
  EXPECT_EQ(out.find(sandbox), std::string::npos) << out;
}

// Replay: in_process results come from the record (the model is not asked
// again); an identity_scoped step runs again once a person approves it, with
// identity resolved (and revocation checked) again.
TEST_F(WorkflowTest, ReplayAnswersInProcessStepsFromTheRecordAndChecksRevocationAgain) {
  start_model(R"({"turns": [{"text": "plan A"}]})");
  const std::string key = random_token("sk-");
  project_secret("acme-key", key, "API_KEY");
  std::string out, err;
  start_worker({}, {"PLANNER_KEY=k"});  // a one-letter key: scrubbing it must still end
  policy({"--egress-allow", "127.0.0.1:" + std::to_string(model_.port()), "--worker-env",
          "PLANNER_KEY"});
  const std::string wf = file("replay.yaml", R"(name: replay
steps:
  - id: plan
    mode: in_process
    kind: llm
    model: {api: openai_chat, base_url: "http://127.0.0.1:)" +
                                                 std::to_string(model_.port()) +
                                                 R"(/v1", model: m, key_env: PLANNER_KEY}
    prompt: "plan"
  - id: use
    needs: [plan]
    mode: identity_scoped
    run: 'echo {{steps.plan.output}} with ${#API_KEY} chars'
)");
  ASSERT_EQ(run({"workflow", "run", wf, "--project", "acme", "--run-id", "p1"}, &out, &err), 0)
      << out << err;
  ASSERT_EQ(model_requests().size(), 1u);
  {
    Cli replaying({"run", "replay", "p1", "--json", "--state-dir", state_});
    decide(pending_approval("use", "replay"), true, "alice");
    ASSERT_EQ(replaying.wait(60s), 0) << replaying.out() << replaying.err();
    const json replay = last_json(replaying.out());
    EXPECT_EQ(replay["replay_of"], "p1");
    EXPECT_EQ(step(replay, "plan")["outputs"]["replayed_from"], "p1");
    EXPECT_EQ(replay_line(replay, "plan")["action"], "answered from record") << replay["replay"];
    EXPECT_EQ(step(replay, "use")["outputs"]["output"],
              "plan A with " + std::to_string(key.size()) + " chars");
    EXPECT_EQ(replay_line(replay, "use")["action"], "re-run (approved)") << replay["replay"];
  }
  EXPECT_EQ(model_requests().size(), 1u);  // not asked again
  // Revoked since: the replay's identity step, approved, is refused.
  ASSERT_EQ(run({"secret", "revoke", "acme-key"}, &out, &err), 0) << err;
  Cli replaying({"run", "replay", "p1", "--json", "--state-dir", state_});
  decide(pending_approval("use", "replay"), true, "alice");
  EXPECT_EQ(replaying.wait(60s), 1) << replaying.out() << replaying.err();
  const json replay = last_json(replaying.out());
  const json use = step(replay, "use");
  EXPECT_EQ(use["error_kind"], "identity");
  EXPECT_NE(use["error"].get<std::string>().find("acme-key"), std::string::npos) << use;
  EXPECT_NE(use["error"].get<std::string>().find("revoked"), std::string::npos) << use;
}

// Replay asks a person again for an approval step: it is never answered from
// the record. What reads the answer runs again with the new one.
TEST_F(WorkflowTest, ReplayAsksAPersonAgainForAnApprovalStep) {
  start_worker();
  const std::string wf = file("gate.yaml", R"(name: gate
steps:
  - {id: gate, mode: in_process, kind: approval, message: "Ship {{run.id}}?", timeout: 60s}
  - id: ship
    needs: [gate]
    mode: in_process
    kind: template
    template: "shipped, approved by {{steps.gate.json.by}}"
)");
  {
    Cli first(
        {"workflow", "run", wf, "--project", "acme", "--run-id", "g1", "--state-dir", state_});
    decide(pending_approval("gate", "step"), true, "alice");
    ASSERT_EQ(first.wait(60s), 0) << first.out() << first.err();
  }
  Cli replaying({"run", "replay", "g1", "--follow", "--state-dir", state_});
  const json asked = pending_approval("gate", "step");
  ASSERT_FALSE(asked.empty()) << "the replay did not ask: " << replaying.out();
  EXPECT_NE(asked["run"], "g1");
  decide(asked, true, "bob");
  ASSERT_EQ(replaying.wait(60s), 0) << replaying.out() << replaying.err();
  const std::string out = replaying.out();
  EXPECT_NE(out.find("waiting for approval " + std::to_string(asked["id"].get<int64_t>())),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("gate           replay: asked again: an approval is never answered from "
                     "the record"),
            std::string::npos)
      << out;
  const json r = show(asked["run"].get<std::string>());
  EXPECT_EQ(step(r, "gate")["outputs"]["json"]["by"], "bob");
  EXPECT_EQ(replay_line(r, "gate")["action"], "asked again");
  EXPECT_EQ(step(r, "ship")["outputs"]["output"], "shipped, approved by bob");
  EXPECT_EQ(replay_line(r, "ship")["action"], "re-run") << r["replay"];
  EXPECT_NE(replay_line(r, "ship")["why"].get<std::string>().find("what it reads changed: gate"),
            std::string::npos)
      << r["replay"];
}

// Replay never runs a side-effecting step again without a fresh approval by
// a person: an identity_scoped step and an http PUT, each denied or left
// unanswered, are not run (the original's outputs stand in, and what reads
// them says so); approved, they run again, and the summary after them reads
// what they did now, not what they did the first time.
TEST_F(WorkflowTest, ReplayRunsSideEffectingStepsAgainOnlyOnceAPersonApproves) {
  start_model(R"({"turns": [{"text": "unused"}]})");
  project_secret("acme-key", random_token("sk-"), "API_KEY");
  start_worker({"--proxy-resolve", "model.test=127.0.0.1"});
  policy({"--egress-allow", "127.0.0.1/32"});
  const std::string port = std::to_string(model_.port());
  const std::string wf = file("effects.yaml", R"(name: effects
steps:
  - id: push
    mode: identity_scoped
    run: "cat /proc/sys/kernel/random/uuid"
  - id: put
    mode: in_process
    kind: http
    method: PUT
    url: "http://model.test:)" + port + R"(/v1/deploy"
    body: "deploy"
    allow: ["model.test:)" + port + R"(", "127.0.0.1/32"]
    timeout: 10s
  - id: local
    mode: sandboxed
    run: "echo same"
  - id: summary
    needs: [push, put, local]
    mode: in_process
    kind: template
    template: "pushed {{steps.push.output}}, put {{steps.put.output}}"
)");
  auto puts = [&] {
    int n = 0;
    for (const auto& q : model_requests()) n += q.value("method", "") == "PUT" ? 1 : 0;
    return n;
  };
  std::string out, err;
  ASSERT_EQ(run({"workflow", "run", wf, "--project", "acme", "--run-id", "e1"}, &out, &err), 0)
      << out << err;
  const json e1 = show("e1");
  const std::string first = step(e1, "push")["outputs"]["output"];
  ASSERT_EQ(first.size(), 36u) << e1.dump(1);
  ASSERT_EQ(puts(), 1);

  // Denied (push) and unanswered (put, within its 10s timeout): neither runs.
  Cli denied({"run", "replay", "e1", "--follow", "--state-dir", state_});
  const json ask = pending_approval("push", "replay");
  ASSERT_FALSE(ask.empty()) << "no approval asked before running push again: " << denied.out();
  const std::string message = ask["request"]["message"];
  EXPECT_NE(message.find("Run step push again in "), std::string::npos) << message;
  EXPECT_NE(message.find("It is side-effecting: identity_scoped"), std::string::npos) << message;
  EXPECT_FALSE(pending_approval("put", "replay").empty());
  EXPECT_NE(pending_approval("put", "replay")["request"]["message"].get<std::string>().find(
                "http PUT http://model.test:" + port + "/v1/deploy"),
            std::string::npos);
  decide(ask, false, "carol", "not again");
  ASSERT_EQ(denied.wait(60s), 0) << denied.out() << denied.err();
  EXPECT_EQ(puts(), 1);  // not sent again
  const json r1 = show(ask["run"].get<std::string>());
  EXPECT_EQ(step(r1, "push")["state"], "skipped");
  EXPECT_EQ(step(r1, "push")["outputs"]["output"], first);  // the original's, standing in
  EXPECT_EQ(step(r1, "push")["sandbox"], nullptr);          // nothing ran
  EXPECT_EQ(replay_line(r1, "push")["action"], "skipped (side effect, not approved)");
  EXPECT_NE(replay_line(r1, "push")["why"].get<std::string>().find(
                "was denied by carol: not again; the original's outputs stand in"),
            std::string::npos)
      << r1["replay"];
  EXPECT_EQ(replay_line(r1, "put")["action"], "skipped (side effect, not approved)");
  EXPECT_NE(replay_line(r1, "put")["why"].get<std::string>().find(
                "got no answer within 10s, so it counts as denied"),
            std::string::npos)
      << r1["replay"];
  EXPECT_EQ(replay_line(r1, "local")["action"], "re-run");
  // The summary reads what the original did, and says so.
  EXPECT_EQ(step(r1, "summary")["outputs"]["output"], "pushed " + first + ", put {}");
  EXPECT_EQ(replay_line(r1, "summary")["action"], "answered from record");
  EXPECT_NE(replay_line(r1, "summary")["why"].get<std::string>().find(
                "it reads the original's outputs of push, put, which this replay did not run "
                "again"),
            std::string::npos)
      << r1["replay"];
  // --follow says it per step, then the report.
  EXPECT_NE(denied.out().find("push           replay: skipped (side effect, not approved)"),
            std::string::npos)
      << denied.out();
  EXPECT_NE(denied.out().find("replay of e1:\n"), std::string::npos) << denied.out();
  EXPECT_NE(denied.out().find("  summary        answered from record"), std::string::npos)
      << denied.out();
  // `run show` reports it too.
  ASSERT_EQ(run({"run", "show", ask["run"].get<std::string>()}, &out, &err), 0) << err;
  EXPECT_NE(out.find("a replay of e1: what it did with each step"), std::string::npos) << out;
  EXPECT_NE(out.find("    local          re-run"), std::string::npos) << out;

  // Approved: both run again, and the summary reads what they did now.
  Cli approved({"run", "replay", "e1", "--state-dir", state_});
  const json again = pending_approval("push", "replay");
  decide(again, true, "alice");
  decide(pending_approval("put", "replay"), true, "alice");
  ASSERT_EQ(approved.wait(60s), 0) << approved.out() << approved.err();
  EXPECT_EQ(puts(), 2);
  const json r2 = show(again["run"].get<std::string>());
  const std::string now = step(r2, "push")["outputs"]["output"];
  EXPECT_EQ(now.size(), 36u);
  EXPECT_NE(now, first);
  EXPECT_EQ(replay_line(r2, "push")["action"], "re-run (approved)");
  EXPECT_NE(replay_line(r2, "push")["why"].get<std::string>().find("approved by alice"),
            std::string::npos);
  EXPECT_EQ(replay_line(r2, "put")["action"], "re-run (approved)");
  EXPECT_EQ(step(r2, "summary")["outputs"]["output"], "pushed " + now + ", put {}");
  EXPECT_EQ(replay_line(r2, "summary")["action"], "re-run");
  EXPECT_NE(replay_line(r2, "summary")["why"].get<std::string>().find(
                "what it reads changed: push ran again with other outputs"),
            std::string::npos)
      << r2["replay"];
}

// A side-effecting step the original has no outputs of (it failed there) and
// a person does not approve: the replay fails, saying so, and what needs it
// is not run.
TEST_F(WorkflowTest, AReplayFailsWhenAStepNotRunAgainHasNoRecordToStandIn) {
  project_secret("acme-key", random_token("sk-"), "API_KEY");
  start_worker();
  const std::string wf = file("none.yaml", R"(name: none
steps:
  - {id: push, mode: identity_scoped, run: "exit 3", timeout: 60s}
  - {id: after, needs: [push], mode: sandboxed, run: "echo after"}
)");
  std::string out, err;
  ASSERT_EQ(run({"workflow", "run", wf, "--project", "acme", "--run-id", "n1"}, &out, &err), 1);
  Cli replaying({"run", "replay", "n1", "--json", "--state-dir", state_});
  decide(pending_approval("push", "replay"), false, "carol", "no");
  EXPECT_EQ(replaying.wait(60s), 1) << replaying.out() << replaying.err();
  const json r = last_json(replaying.out());
  EXPECT_EQ(r["state"], "failed");
  EXPECT_NE(r["error"].get<std::string>().find(
                "step push failed: not run again (side-effecting: identity_scoped"),
            std::string::npos)
      << r["error"];
  EXPECT_NE(r["error"].get<std::string>().find("the original has no outputs of it to stand in"),
            std::string::npos)
      << r["error"];
  EXPECT_EQ(replay_line(r, "push")["action"], "skipped (side effect, not approved)");
  EXPECT_EQ(replay_line(r, "after")["action"], "not run");
}

// The worker's log: one line per attempt as it ends and one per run, never
// a step's output or a secret.
TEST_F(WorkflowTest, TheWorkerLogsEachAttemptAndEachRunWithoutOutputOrSecrets) {
  const std::string key = random_token("sk-");
  project_secret("acme-key", key, "API_KEY");
  Cli& worker = start_worker({"--log-level", "info"});
  const std::string wf = file("logged.yaml", R"(name: logged
steps:
  - {id: greet, mode: sandboxed, run: "echo marker-of-the-output"}
  - id: leak
    needs: [greet]
    mode: identity_scoped
    run: 'echo "$API_KEY"; echo "$API_KEY marker-of-stderr" >&2; exit 3'
    allow_failure: true
  - {id: shape, needs: [greet], mode: in_process, kind: template, template: "{{steps.greet.output}}"}
)");
  std::string out, err;
  ASSERT_EQ(run({"workflow", "run", wf, "--project", "acme", "--run-id", "l1"}, &out, &err), 0)
      << out << err;
  ASSERT_TRUE(worker.stderr_shows("run l1 (logged) succeeded in ", 10s)) << worker.err();
  const std::string log = worker.err();
  EXPECT_NE(log.find("run l1 step greet attempt 1 (sandboxed): succeeded, exit 0 in "),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("run l1 step leak attempt 1 (identity_scoped): failed (exit), exit 3 in "),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("run l1 step shape attempt 1 (in_process/template): succeeded in "),
            std::string::npos)
      << log;
  EXPECT_NE(log.find(": 3 steps: 1 failed, 2 succeeded"), std::string::npos) << log;
  EXPECT_EQ(log.find("marker-of-"), std::string::npos) << log;
  EXPECT_EQ(log.find(key), std::string::npos);
}

// identity_scoped: the values go into that sandbox only, and every byte that
// leaves it is redacted; they are in no store row.
TEST_F(WorkflowTest, IdentityScopedStepsGetTheKeysRedacted) {
  const std::string key = random_token("sk-");
  project_secret("acme-key", key, "API_KEY");
  std::string out, err;
  start_worker();
  const std::string wf = file("id.yaml", R"(name: id
steps:
  - id: leak
    mode: identity_scoped
    run: 'echo "$API_KEY"; printf %s "$API_KEY" | base64; env | grep -c API_KEY'
  - id: plain
    needs: [leak]
    mode: sandboxed
    run: 'echo "[$API_KEY]"'
)");
  ASSERT_EQ(
      run({"workflow", "run", wf, "--project", "acme", "--run-id", "i1", "--follow"}, &out, &err),
      0)
      << out << err;
  EXPECT_EQ(out.find(key), std::string::npos);
  EXPECT_NE(out.find("leak | [REDACTED:API_KEY]"), std::string::npos) << out;
  const json r = show("i1");
  EXPECT_EQ(step(r, "leak")["outputs"]["stdout"], "[REDACTED:API_KEY]\n[REDACTED:API_KEY]\n1\n");
  EXPECT_EQ(step(r, "plain")["outputs"]["output"], "[]");  // a sandboxed step: no identity
  EXPECT_EQ(step(r, "leak")["identity"]["keys"][0]["secret"], "acme-key");
  stop_workers();
  EXPECT_EQ(slurp(worker::store_path(state_)).find(key), std::string::npos);
  EXPECT_EQ(slurp(worker::store_path(state_) + "-wal").find(key), std::string::npos);
}

// A cli_agent_jit step's agent may ask for credentials, so its sandbox must
// be one that can take requests: on the host's network it cannot (the socket
// would not be private), and the step fails before the agent runs, saying so.
// (The agent asking for real: AgentTest.ClaudeCodeAsksForACredentialAndThePolicyAnswers.)
TEST_F(WorkflowTest, CliAgentJitNeedsASandboxThatCanTakeRequests) {
  project_secret("acme-anthropic", random_token("sk-ant-"), "ANTHROPIC_API_KEY");
  start_worker();
  policy({"--networks", "none,proxy,host"});
  const std::string wf = file("jit.yaml", R"(name: jit
steps:
  - {id: a, mode: cli_agent_jit, agent: claude-code, prompt: hi, sandbox: {network: host}}
)");
  std::string out, err;
  ASSERT_EQ(run({"workflow", "validate", wf}, &out, &err), 0) << err;
  EXPECT_EQ(out.substr(0, out.find('\n')),
            "workflow jit (" + wf + "): 1 step, valid");  // not "1 steps"
  EXPECT_EQ(run({"workflow", "run", wf, "--project", "acme", "--run-id", "j1"}, &out, &err), 1);
  const json r = show("j1");
  EXPECT_NE(r.dump().find("cannot take credential requests: JIT needs a sandbox with a network "
                          "namespace of its own (network none or proxy)"),
            std::string::npos)
      << r.dump();
}

// A worker that runs steps without a sandbox (mode none) refuses a CLI
// agent's step, naming why, before anything runs: on the host the agent
// would run whatever its model says, with its HOME in the shared /tmp.
TEST_F(WorkflowTest, ACliAgentStepIsRefusedWithoutASandbox) {
  project_secret("acme-anthropic", random_token("sk-ant-"), "ANTHROPIC_API_KEY");
  start_worker({"--sandbox-mode", "none"});
  const std::string wf = file("none.yaml", R"(name: none
steps:
  - {id: a, mode: cli_agent, agent: claude-code, prompt: hi}
)");
  std::string out, err;
  EXPECT_EQ(run({"workflow", "run", wf, "--project", "acme", "--run-id", "n1"}, &out, &err), 1);
  const json r = show("n1");
  EXPECT_NE(r.dump().find("agent claude-code: refused: this worker runs steps without a sandbox "
                          "(mode none), and a CLI agent runs only in one"),
            std::string::npos)
      << r.dump();
}

// An input given twice is refused, naming it, rather than the last one kept
// silently; a default that is not of the input's declared type is a
// validation problem at its line.
TEST_F(WorkflowTest, AnInputGivenTwiceOrADefaultOfTheWrongTypeIsRefused) {
  const std::string wf = file("twice.yaml", R"(name: twice
inputs: {n: {type: number}}
steps:
  - {id: a, mode: in_process, kind: template, template: "{{inputs.n}}"}
)");
  std::string out, err;
  EXPECT_EQ(run({"workflow", "run", wf, "--project", "acme", "--input", "n=1", "--input", "n=2"},
                &out, &err),
            2);
  EXPECT_NE(err.find("--input n: given more than once (n=1, then n=2); give it once"),
            std::string::npos)
      << err;
  const std::string bad = file("default.yaml", R"(name: defaults
inputs:
  n: {type: number, default: "abc"}
  flag: {type: boolean, default: 1}
  s: {type: string, default: hello}
steps:
  - {id: a, mode: in_process, kind: template, template: "{{inputs.n}}{{inputs.flag}}{{inputs.s}}"}
)");
  EXPECT_EQ(run({"workflow", "validate", bad}, &out, &err), 1);
  EXPECT_NE(err.find(bad + ":3: inputs.n.default: expected a number (the input's type), got "),
            std::string::npos)
      << err;
  EXPECT_NE(err.find(bad + ":4: inputs.flag.default: expected a boolean (the input's type), got "),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("inputs.s.default"), std::string::npos) << err;
}

// An approval's id that is not a number (here, past INT64_MAX) is refused as
// such, naming it, rather than clamped to another approval's id.
TEST_F(WorkflowTest, AnApprovalIdThatIsNotANumberIsRefusedNamingIt) {
  std::string out, err;
  EXPECT_EQ(run({"approvals", "deny", "99999999999999999999999", "--reason", "no"}, &out, &err), 2);
  EXPECT_NE(err.find("approvals deny: id \"99999999999999999999999\": not a number (the ids "
                     "`approvals list` shows)"),
            std::string::npos)
      << err;
  EXPECT_EQ(run({"approvals", "approve", "12abc"}, &out, &err), 2);
  EXPECT_NE(err.find("approvals approve: id \"12abc\": not a number"), std::string::npos) << err;
}

// A local artifact delivered over an older copy swaps with it in one rename
// (RENAME_EXCHANGE): the target is never missing, as it was between the two
// renames of old; the new contents are there and nothing is left beside it.
TEST_F(WorkflowTest, ALocalArtifactReplacesTheOldCopyWithoutAGap) {
  const std::string root = dir_ + "/artifacts";
  std::filesystem::create_directories(root + "/acme/out/same/site");
  { std::ofstream(root + "/acme/out/same/old.txt") << "old\n"; }
  const std::string adapter = file("fake-agent.yaml", R"(name: fake-agent
argv: [sh, -c, "mkdir -p site && echo '<h1>{{prompt}}</h1>' > site/index.html && echo made", x]
result: {from: stdout, format: text}
memory_floor: 1g
)");
  Cli& worker = start_worker({"--artifact-root", root});
  // Every rename the worker makes, from now on.
  const std::string log = dir_ + "/renames.log";
  const std::string pid = std::to_string(worker.pid());
  const pid_t tracer = ::fork();
  if (tracer == 0) {
    ::execlp("strace", "strace", "-f", "-qq", "-e", "trace=rename,renameat,renameat2", "-o",
             log.c_str(), "-p", pid.c_str(), static_cast<char*>(nullptr));
    ::_exit(99);
  }
  ASSERT_GT(tracer, 0);
  auto traced = [&] {
    std::ifstream status("/proc/" + pid + "/status");
    for (std::string line; std::getline(status, line);)
      if (line.rfind("TracerPid:", 0) == 0) return line.find_first_not_of("\t 0", 10) != line.npos;
    return false;
  };
  for (int i = 0; i < 500 && !traced(); ++i) std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(traced()) << "strace did not attach";
  const std::string wf = file("swap.yaml", R"(name: swap
steps:
  - id: copy
    mode: cli_agent
    agent: )" + adapter + R"(
    prompt: new
    artifact: {dest: local, path: "out/same"}
)");
  std::string out, err;
  const int code = run({"workflow", "run", wf, "--project", "acme", "--run-id", "s1"}, &out, &err);
  ::kill(tracer, SIGTERM);
  ::waitpid(tracer, nullptr, 0);
  ASSERT_EQ(code, 0) << out << err << show("s1").dump();
  EXPECT_EQ(slurp(root + "/acme/out/same/site/index.html"), "<h1>new</h1>\n");
  EXPECT_FALSE(std::filesystem::exists(root + "/acme/out/same/old.txt"));
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(root + "/acme/out"))
    left.push_back(e.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"same"});
  const std::string renames = slurp(log);
  EXPECT_NE(renames.find("\"same\", RENAME_EXCHANGE) = 0"), std::string::npos) << renames;
  EXPECT_EQ(renames.find(".same.rf-old-"), std::string::npos) << renames;
}

// A tenant's attack (issue 39): a run of another project names the same local
// path, hoping to replace what acme's run left there. Each project's copies
// live under ROOT/PROJECT/, and a project named to climb out of it is refused
// at the door.
TEST_F(WorkflowTest, AnotherProjectsLocalArtifactNeverReplacesOnesOwn) {
  const std::string root = dir_ + "/artifacts";
  std::filesystem::create_directories(root);
  const std::string adapter = file("fake-agent.yaml", R"(name: fake-agent
argv: [sh, -c, "echo '{{prompt}}' > index.html && echo made", x]
result: {from: stdout, format: text}
memory_floor: 1g
)");
  start_worker({"--artifact-root", root});
  const std::string wf = file("same.yaml", R"(name: same
steps:
  - id: copy
    mode: cli_agent
    agent: )" + adapter + R"(
    prompt: "made by {{run.project}}"
    artifact: {dest: local, path: "site"}
)");
  std::string out, err;
  ASSERT_EQ(run({"workflow", "run", wf, "--project", "acme", "--run-id", "a1"}, &out, &err), 0)
      << out << err << show("a1").dump();
  ASSERT_EQ(run({"workflow", "run", wf, "--project", "evil", "--run-id", "e1"}, &out, &err), 0)
      << out << err << show("e1").dump();
  EXPECT_EQ(slurp(root + "/acme/site/index.html"), "made by acme\n");
  EXPECT_EQ(slurp(root + "/evil/site/index.html"), "made by evil\n");
  EXPECT_EQ(step(show("e1"), "copy")["outputs"]["artifact"]["path"], root + "/evil/site");
  EXPECT_FALSE(std::filesystem::exists(root + "/site"));

  for (const std::string project : {"..", "../acme", "acme/site", ".hidden", ""}) {
    EXPECT_EQ(run({"workflow", "run", wf, "--project", project, "--run-id", "x1"}, &out, &err), 2)
        << project;
    EXPECT_NE(err.find("a project's name is 1 to 64 of A-Z a-z 0-9 . _ -"), std::string::npos)
        << project << ": " << err;
  }
  EXPECT_EQ(slurp(root + "/acme/site/index.html"), "made by acme\n");
}

}  // namespace
}  // namespace rf::testing
