// Tests that try to leak (issues 11, 12, 13): a value from identity, or one
// granted by JIT, reaching what leaves a cli_agent or cli_agent_jit step's
// sandbox: the store's record of its call (argv, env), the step's outputs and
// error texts, a later step of the run in the same per_run sandbox. The
// agents are shell scripts behind adapters of the test's own; the values are
// compared by their SHA-256 where they must arrive.
#include <sqlite3.h>

#include "support/sha256_hex.h"
#include "workflow/workflow_harness.h"

namespace rf::testing {
namespace {

// argv_json and env_json of every tool call the store recorded.
std::vector<std::pair<std::string, std::string>> recorded_calls(const std::string& db_path) {
  std::vector<std::pair<std::string, std::string>> out;
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    ADD_FAILURE() << "opening " << db_path << ": " << sqlite3_errmsg(db);
    sqlite3_close(db);
    return out;
  }
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, "SELECT argv_json, env_json FROM tool_calls ORDER BY id", -1, &st,
                         nullptr) != SQLITE_OK) {
    ADD_FAILURE() << sqlite3_errmsg(db);
  } else {
    while (sqlite3_step(st) == SQLITE_ROW) {
      auto text = [&](int i) {
        const auto* t = sqlite3_column_text(st, i);
        return t == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(t));
      };
      out.emplace_back(text(0), text(1));
    }
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

// The whole store, its write-ahead log included, holds no byte string `value`.
void expect_not_in_store(const std::string& state, const std::string& value) {
  const std::string db = worker::store_path(state);
  EXPECT_EQ(slurp(db).find(value), std::string::npos) << db;
  EXPECT_EQ(slurp(db + "-wal").find(value), std::string::npos) << db << "-wal";
}

// An adapter's env: that renames an identity key (GEMINI_API_KEY from
// GOOGLE_API_KEY) gives the agent the value, and the call's record holds the
// key with the value replaced, never the value.
TEST_F(WorkflowTest, AnAdaptersEnvFromIdentityIsGivenToTheAgentButNeverRecorded) {
  const std::string key = random_token("AIza");
  project_secret("acme-google", key, "GOOGLE_API_KEY");
  const std::string adapter = file("renamer.yaml", R"(name: renamer
argv: [sh, -c, 'printf %s "$GEMINI_API_KEY" | sha256sum | cut -c1-64', x]
env: {GEMINI_API_KEY: "{{env.GOOGLE_API_KEY}}", MODE: plain}
result: {from: stdout, format: text}
)");
  start_worker();
  const std::string wf = file("rename.yaml", R"(name: rename
steps:
  - id: agent
    mode: cli_agent
    agent: )" + adapter + R"(
    prompt: hi
)");
  std::string out, err;
  ASSERT_EQ(run({"workflow", "run", wf, "--project", "acme", "--run-id", "g1"}, &out, &err), 0)
      << out << err;
  const json r = show("g1");
  EXPECT_EQ(step(r, "agent")["outputs"]["output"], sha256_hex(key)) << r.dump(1);  // it got it
  stop_workers();
  const auto calls = recorded_calls(worker::store_path(state_));
  ASSERT_EQ(calls.size(), 1u);
  for (const auto& [argv, env] : calls) {
    EXPECT_EQ(argv.find(key), std::string::npos) << argv;
    EXPECT_EQ(env.find(key), std::string::npos) << env;
  }
  const json env = json::parse(calls[0].second);
  EXPECT_EQ(env["GEMINI_API_KEY"], "[REDACTED:GOOGLE_API_KEY]") << env;
  EXPECT_EQ(env["MODE"], "plain") << env;  // a plain value is recorded as it is
  EXPECT_EQ(r.dump().find(key), std::string::npos);
  expect_not_in_store(state_, key);
}

// An agent that writes its credential into the workspace: the artifact would
// carry it out of the sandbox, and a file cannot be redacted without changing
// what the step made, so it is not delivered. The step fails naming the file
// and the key; the store holds no copy of the value (dest none would have put
// the workspace's tar in it). A workspace without the value is delivered.
TEST_F(WorkflowTest, AnArtifactHoldingACredentialIsNotDelivered) {
  const std::string key = random_token("dk-");
  project_secret("acme-deploy", key, "DEPLOY_KEY");
  const std::string adapter = file("writer.yaml", R"(name: writer
argv: [sh, -c, 'mkdir -p /workspace/conf && printf "key=%s\n" "$K" > /workspace/conf/app.env; echo made', x]
env: {K: "{{env.DEPLOY_KEY}}"}
result: {from: stdout, format: text}
)");
  const std::string clean = file("clean.yaml", R"(name: clean
argv: [sh, -c, 'echo "<h1>hi</h1>" > /workspace/index.html; echo made', x]
result: {from: stdout, format: text}
)");
  start_worker();
  const std::string wf = file("artifact-wf.yaml", R"(name: artifact
steps:
  - id: leaky
    mode: cli_agent
    agent: )" + adapter + R"(
    prompt: hi
    allow_failure: true
    artifact: {dest: none}
  - id: tidy
    mode: cli_agent
    agent: )" + clean + R"(
    prompt: hi
    artifact: {dest: none}
)");
  std::string out, err;
  run({"workflow", "run", wf, "--project", "acme", "--run-id", "art1"}, &out, &err);
  const json r = show("art1");
  const json leaky = step(r, "leaky");
  EXPECT_EQ(leaky["state"], "failed") << leaky;
  EXPECT_EQ(leaky["error_kind"], "artifact") << leaky;
  EXPECT_EQ(leaky["error"],
            "artifact of the store: conf/app.env holds the value of DEPLOY_KEY, a credential of "
            "the step: not delivered (keep credentials out of /workspace)")
      << leaky;
  EXPECT_FALSE(leaky["outputs"].contains("artifact")) << leaky;
  const json tidy = step(r, "tidy");
  EXPECT_EQ(tidy["state"], "succeeded") << tidy;
  EXPECT_EQ(tidy["outputs"]["artifact"]["files"], 1) << tidy;
  stop_workers();
  EXPECT_EQ(r.dump().find(key), std::string::npos);
  expect_not_in_store(state_, key);
}

// {{endpoint}} may be in an adapter's argv, but an endpoint that comes from
// identity (a URL with a token in it) would be in the agent's command line,
// readable by every process in the sandbox, and in the call's record: the
// step is refused before anything runs, naming the adapter's field and the
// key. The same adapter with the endpoint from the step's own env runs.
TEST_F(WorkflowTest, AnEndpointFromIdentityNeverGoesInAnAgentsArgv) {
  const std::string url = "https://x:" + random_token("tok") + "@model.test/v1";
  project_secret("acme-endpoint", url, "MODEL_URL");
  const std::string adapter = file("pointer.yaml", R"(name: pointer
argv: [sh, -c, 'echo "reached $1"', x, "{{endpoint}}"]
endpoint: {env: MODEL_URL, default: "https://model.example"}
result: {from: stdout, format: text}
)");
  start_worker();
  const std::string wf = file("pointer-wf.yaml", R"(name: pointer
steps:
  - id: secret_endpoint
    mode: cli_agent
    agent: )" + adapter + R"(
    prompt: hi
    allow_failure: true
  - id: plain_endpoint
    mode: cli_agent
    agent: )" + adapter + R"(
    env: {MODEL_URL: "http://plain.test:9"}
    prompt: hi
)");
  std::string out, err;
  run({"workflow", "run", wf, "--project", "acme", "--run-id", "e1"}, &out, &err);
  const json r = wait_ended("e1");
  const json refused = step(r, "secret_endpoint");
  EXPECT_EQ(refused["state"], "failed") << refused;
  EXPECT_EQ(refused["error_kind"], "identity") << refused;
  const std::string why = refused.value("error", "");
  EXPECT_NE(why.find("agent pointer (" + adapter + ") argv"), std::string::npos) << why;
  EXPECT_NE(why.find("{{endpoint}} is the value of MODEL_URL, which comes from identity"),
            std::string::npos)
      << why;
  EXPECT_EQ(step(r, "plain_endpoint")["outputs"]["output"], "reached http://plain.test:9") << r;
  stop_workers();
  for (const auto& [argv, env] : recorded_calls(worker::store_path(state_))) {
    EXPECT_EQ(argv.find(url), std::string::npos) << argv;
    EXPECT_EQ(env.find(url), std::string::npos) << env;
  }
  EXPECT_EQ(r.dump().find(url), std::string::npos);
  expect_not_in_store(state_, url);
}

// The runner cuts a call's output at its cap and says so on stderr:
// when the cap falls inside a value, the start of the value before the cap
// is not let go (an audit probe got 39 of a 40-character token this way).
TEST_F(WorkflowTest, OutputCutAtItsCapInsideAValueLeavesNoStartOfIt) {
  const std::string token = random_token("ghp_");  // 28 characters: the cap takes 24
  project_secret("acme-gh", token, "GH_TOKEN");
  start_worker({"--sandbox-output-limit", "1024"});
  const std::string wf = file("cap.yaml", R"(name: cap
steps:
  - id: loud
    mode: identity_scoped
    run: 'head -c 1000 /dev/zero | tr "\\0" x; printf "%s%s" "$GH_TOKEN" "$GH_TOKEN"'
    allow_failure: true
)");
  std::string out, err;
  run({"workflow", "run", wf, "--project", "acme", "--run-id", "c1"}, &out, &err);
  const json r = show("c1");
  const std::string shown = r.dump();
  EXPECT_NE(shown.find("output truncated at"), std::string::npos) << r.dump(1);
  EXPECT_NE(shown.find("[REDACTED:GH_TOKEN]"), std::string::npos) << r.dump(1);
  EXPECT_EQ(shown.find(token.substr(0, 8)), std::string::npos) << r.dump(1);
  EXPECT_EQ(out.find(token.substr(0, 8)), std::string::npos) << out;
  stop_workers();
  expect_not_in_store(state_, token.substr(0, 8));
}

// The JIT tests' identity: DEPLOY_KEY by JIT, API_KEY by env; a policy that
// allows every request for them.
class JitLeakTest : public WorkflowTest {
 protected:
  void SetUp() override {
    WorkflowTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    deploy_ = random_token("dk-");
    api_ = random_token("sk-");
    std::string out, err;
    ASSERT_EQ(run({"secret", "set", "acme-deploy"}, &out, &err, deploy_), 0) << err;
    ASSERT_EQ(run({"secret", "set", "acme-api"}, &out, &err, api_), 0) << err;
    ASSERT_EQ(run({"identity", "profile", "set", "acme", "--level", "project", "--project", "acme",
                   "DEPLOY_KEY=jit:acme-deploy", "API_KEY=secret:acme-api"},
                  &out, &err),
              0)
        << err;
    const std::string policy = file("jit.yaml", R"(rules:
  - scope: "ask-*"
    verdict: ask
    timeout: 1s
  - secret: "acme-*"
    verdict: allow
)");
    start_worker({"--jit-policy", policy});
  }
  std::string deploy_, api_;
};

// The agent asks for DEPLOY_KEY and writes it as its answer (a result file):
// the step's stored output, its parsed JSON and, when the agent says it
// failed, the step's error text hold the redaction mark, never the value.
TEST_F(JitLeakTest, AGrantedValueIsRedactedFromTheResultFileAndTheErrorText) {
  const std::string adapter = file("writer.yaml", R"(name: writer
argv: [sh, -c, 'v=$(rf-cred get DEPLOY_KEY) || exit 3; printf "{\"result\": \"%s\", \"is_error\": %s}\n" "$v" "$FAIL" > {{tmp}}/answer.json; echo written', x]
result: {from: file, file: "{{tmp}}/answer.json", format: json, answer: /result, error: /is_error}
)");
  const std::string wf = file("writer-wf.yaml", R"(name: writer
steps:
  - id: answers
    mode: cli_agent_jit
    agent: )" + adapter + R"(
    env: {FAIL: "false"}
    prompt: x
  - id: fails
    mode: cli_agent_jit
    agent: )" + adapter + R"(
    env: {FAIL: "true"}
    prompt: x
    allow_failure: true
)");
  std::string out, err;
  ASSERT_EQ(run({"workflow", "run", wf, "--project", "acme", "--run-id", "w1"}, &out, &err), 0)
      << out << err;
  const json r = show("w1");
  const json answers = step(r, "answers");
  EXPECT_EQ(answers["state"], "succeeded") << answers;
  EXPECT_EQ(answers["outputs"]["output"], "[REDACTED:DEPLOY_KEY]") << answers;
  EXPECT_EQ(answers["outputs"]["json"]["result"], "[REDACTED:DEPLOY_KEY]") << answers;
  const json fails = step(r, "fails");
  EXPECT_EQ(fails["state"], "failed") << fails;
  EXPECT_EQ(fails["error"], "agent writer failed: [REDACTED:DEPLOY_KEY]") << fails;
  EXPECT_EQ(r.dump().find(deploy_), std::string::npos) << r.dump(1);
  stop_workers();
  expect_not_in_store(state_, deploy_);
}

// A per_run sandbox keeps a JIT grant in its environment for every later
// exec: a later identity_scoped step in it that prints its environment has
// the granted value redacted, as well as its own.
TEST_F(JitLeakTest, ALaterIdentityStepInTheSameSandboxIsRedactedOfEarlierGrants) {
  const std::string adapter = file("asker.yaml", R"(name: asker
argv: [sh, -c, 'rf-cred get DEPLOY_KEY > /dev/null && echo granted', x]
result: {from: stdout, format: text}
)");
  const std::string wf = file("asker-wf.yaml", R"(name: asker
steps:
  - id: ask
    mode: cli_agent_jit
    agent: )" + adapter + R"(
    sandbox: {mode: per_run, memory: 1g}
    prompt: x
  - id: look
    needs: [ask]
    mode: identity_scoped
    sandbox: {mode: per_run, memory: 1g}
    run: 'env | grep -E "^(DEPLOY_KEY|API_KEY)=" | sort'
)");
  std::string out, err;
  ASSERT_EQ(run({"workflow", "run", wf, "--project", "acme", "--run-id", "p1"}, &out, &err), 0)
      << out << err;
  const json r = show("p1");
  EXPECT_EQ(step(r, "ask")["outputs"]["output"], "granted") << r.dump(1);
  EXPECT_EQ(step(r, "look")["sandbox"], step(r, "ask")["sandbox"]);  // the same sandbox
  EXPECT_EQ(step(r, "look")["outputs"]["stdout"],
            "API_KEY=[REDACTED:API_KEY]\nDEPLOY_KEY=[REDACTED:DEPLOY_KEY]\n")
      << step(r, "look");
  EXPECT_EQ(r.dump().find(deploy_), std::string::npos);
  EXPECT_EQ(out.find(deploy_), std::string::npos);
  stop_workers();
  expect_not_in_store(state_, deploy_);
}

// What the asker writes into a request (key, scope, reason: up to 4 KiB of
// its choosing) leaves the sandbox in the audit log and the approval queue:
// an agent that puts a value it holds there (`rf-cred get X --reason
// "$TOKEN"`) finds it redacted in every jit.* event and approval row.
TEST_F(JitLeakTest, ValuesPutIntoARequestsKeyScopeOrReasonAreRedactedFromAuditAndApprovals) {
  const std::string adapter = file("leaker.yaml", R"(name: leaker
argv: [sh, -c, 'v=$(rf-cred get DEPLOY_KEY) || exit 3; rf-cred get DEPLOY_KEY --scope "s-$v" --reason "why $v $API_KEY" > /dev/null; rf-cred get DEPLOY_KEY --scope "ask-$v" --reason "please $v $API_KEY" > /dev/null 2>&1; rf-cred get "K$v" --reason "$v" > /dev/null 2>&1; echo asked', x]
result: {from: stdout, format: text}
)");
  const std::string wf = file("leaker-wf.yaml", R"(name: leaker
steps:
  - id: ask
    mode: cli_agent_jit
    agent: )" + adapter + R"(
    prompt: x
)");
  std::string out, err;
  ASSERT_EQ(run({"workflow", "run", wf, "--project", "acme", "--run-id", "j1"}, &out, &err), 0)
      << out << err;
  const json r = show("j1");
  EXPECT_EQ(step(r, "ask")["outputs"]["output"], "asked") << r.dump(1);
  ASSERT_EQ(run({"audit", "show", "--json"}, &out, &err), 0) << err;
  int requested = 0, asked = 0;
  for (const auto& e : json::parse(out)) {
    const std::string kind = e.value("kind", "");
    if (kind.rfind("jit.", 0) != 0) continue;
    const std::string d = e.dump();
    EXPECT_EQ(d.find(deploy_), std::string::npos) << d;
    EXPECT_EQ(d.find(api_), std::string::npos) << d;
    if (kind == "jit.requested") ++requested;
    if (kind == "jit.asked") ++asked;
  }
  EXPECT_EQ(requested, 4) << out;
  EXPECT_EQ(asked, 1) << out;
  EXPECT_NE(out.find("why [REDACTED:DEPLOY_KEY]"), std::string::npos) << out;
  EXPECT_NE(out.find("s-[REDACTED:DEPLOY_KEY]"), std::string::npos) << out;
  EXPECT_NE(out.find("K[REDACTED:DEPLOY_KEY]"), std::string::npos) << out;
  stop_workers();
  expect_not_in_store(state_, deploy_);
  expect_not_in_store(state_, api_);
}

}  // namespace
}  // namespace rf::testing
