// cli_agent steps with the REAL agent binaries (issue 12): Claude Code and
// Codex from the npm registry (scripts/install-agents.sh), in native
// sandboxes with --network proxy, against the scripted fake model on the
// host's loopback (reached through the egress proxy by an allow rule). The
// tests assert on the files the agent wrote, the run's outputs, the requests
// the model received, and the artifacts: a git push to the test git server
// (token from identity), and S3 through s3rver with our SigV4 checked
// against botocore's.
#include <filesystem>

#include "artifact/sigv4.h"
#include "support/sha256_hex.h"
#include "workflow/workflow_harness.h"

namespace rf::testing {
namespace {

constexpr const char* kWriteSite = R"({"turns": [
  {"tool": {"name": "Bash", "input": {"command": "printf '<h1>hi</h1>\n' > index.html && printf '#!/bin/sh\necho build ok\n' > build.sh && chmod +x build.sh && ls", "description": "write the site"}}},
  {"text": "done: index.html and build.sh"}
]})";

class AgentTest : public WorkflowTest {
 protected:
  void SetUp() override {
    WorkflowTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    for (const char* bin : {"/usr/local/bin/claude", "/usr/local/bin/codex"}) {
      if (!std::filesystem::exists(bin)) {
        RF_SKIP() << bin << " is not installed: run scripts/install-agents.sh (make test does)";
      }
    }
    // The tests' model, git and S3 servers listen on this host's loopback,
    // which the operator lets every project's steps reach here; and the
    // portfolio's planner reads its key from the worker (issue 39).
    std::string out, err;
    ASSERT_EQ(run({"policy", "set", "--default", "--egress-allow", "127.0.0.1/32", "--worker-env",
                   "PLANNER_KEY"},
                  &out, &err),
              0)
        << err;
  }

  // The project's identity: the agent's key and endpoint, and the push token.
  void identity(const std::string& anthropic_key, const std::string& github_token,
                const std::string& base_url) {
    std::string out, err;
    ASSERT_EQ(run({"secret", "set", "acme-anthropic"}, &out, &err, anthropic_key), 0) << err;
    ASSERT_EQ(run({"secret", "set", "acme-github"}, &out, &err, github_token), 0) << err;
    ASSERT_EQ(
        run({"identity", "profile", "set", "acme", "--level", "project", "--project", "acme",
             "ANTHROPIC_API_KEY=secret:acme-anthropic", "ANTHROPIC_BASE_URL=value:" + base_url},
            &out, &err),
        0)
        << err;
    ASSERT_EQ(run({"identity", "profile", "set", "site", "--level", "workflow", "--workflow",
                   "site", "GITHUB_TOKEN=secret:acme-github"},
                  &out, &err),
              0)
        << err;
  }
  std::string model_rule() const { return "model.test:" + std::to_string(model_.port()); }
  std::string git_url() const {
    return "http://git.test:" + std::to_string(git_.port()) + "/site.git";
  }
  std::vector<std::string> resolving() const {
    return {"--proxy-resolve",    "model.test=127.0.0.1", "--proxy-resolve",
            "git.test=127.0.0.1", "--proxy-resolve",      "s3.test=127.0.0.1"};
  }
  // The one-step workflow of the git tests: Claude Code builds, the workspace is pushed.
  std::string site_workflow(const std::string& artifact_extra) {
    return file("site.yaml", R"(name: site
steps:
  - id: build
    mode: cli_agent
    agent: claude-code
    identity: {workflow: site}
    sandbox: {network: {allow: [")" +
                                 model_rule() + R"(", "git.test:)" + std::to_string(git_.port()) +
                                 R"(", "127.0.0.1/32"]}}
    prompt: "Build a one-page site"
    artifact: {dest: git, url: ")" +
                                 git_url() + R"(", token_key: GITHUB_TOKEN)" + artifact_extra + R"(}
)");
  }
  std::string git(const std::string& args) {
    return run_capture({"/bin/sh", "-c", "git --git-dir=" + dir_ + "/git/site.git " + args}, {})
        .out;
  }
};

// The agent writes the files, its key comes from identity (the model saw it;
// no output, no store row holds it), and the git artifact lands with the
// token from identity; the commit comes back as the step's output.
TEST_F(AgentTest, ClaudeCodeBuildsInASandboxAndPushesTheArtifactWithTheTokenFromIdentity) {
  start_model(kWriteSite);
  const std::string key = random_token("sk-ant-");
  const std::string token = random_token("ghp_");
  start_git(token);
  identity(key, token, "http://" + model_rule());
  start_worker(resolving());
  const std::string wf = site_workflow(", branch: main");
  std::string out, err;
  ASSERT_EQ(
      run({"workflow", "run", wf, "--project", "acme", "--run-id", "a1", "--follow"}, &out, &err),
      0)
      << out << err << slurp(dir_ + "/model.log");
  const json r = show("a1");
  const json build = step(r, "build");
  // --follow tells the agent's end in brief, not its whole JSON result; the
  // run's JSON keeps it whole.
  EXPECT_NE(out.find("  build          claude-code: done: index.html and build.sh ("),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("the whole result: ringfence run show a1 --json"), std::string::npos) << out;
  EXPECT_EQ(out.find("session_id"), std::string::npos) << out;
  EXPECT_NE(build["outputs"]["stdout"].get<std::string>().find("session_id"), std::string::npos)
      << build;
  EXPECT_EQ(build["mode"], "cli_agent");
  EXPECT_EQ(build["outputs"]["output"], "done: index.html and build.sh");
  EXPECT_EQ(build["outputs"]["agent"], "claude-code");
  const json artifact = build["outputs"]["artifact"];
  EXPECT_EQ(artifact["dest"], "git");
  EXPECT_EQ(artifact["url"], git_url());
  const std::string commit = artifact["commit"];
  ASSERT_EQ(commit.size(), 40u);
  // The commit is on the server, with what the agent wrote.
  EXPECT_EQ(git("rev-parse main"), commit + "\n");
  EXPECT_EQ(git("show main:index.html"), "<h1>hi</h1>\n");
  EXPECT_EQ(git("show main:build.sh"), "#!/bin/sh\necho build ok\n");
  // The model got the key from identity, the prompt, and the tool's result.
  const auto requests = model_requests();
  int messages = 0;
  for (const auto& q : requests) {
    if (q.value("api", "") != "anthropic") continue;
    ++messages;
    EXPECT_EQ(q["headers"]["x-api-key"], key);
  }
  EXPECT_GE(messages, 2);
  EXPECT_NE(requests.back().dump().find("index.html"), std::string::npos);
  EXPECT_NE(requests.back().dump().find("build.sh"), std::string::npos);
  // Neither value is anywhere outside the sandbox.
  EXPECT_EQ(out.find(key), std::string::npos);
  EXPECT_EQ(out.find(token), std::string::npos);
  EXPECT_EQ(r.dump().find(key), std::string::npos);
  EXPECT_EQ(r.dump().find(token), std::string::npos);
  EXPECT_EQ(slurp(dir_ + "/git.log").find(token), std::string::npos);
  stop_workers();
  EXPECT_EQ(slurp(worker::store_path(state_)).find(key), std::string::npos);
  EXPECT_EQ(slurp(worker::store_path(state_)).find(token), std::string::npos);
  // The identity versions are recorded, never the values.
  EXPECT_NE(build["identity"].dump().find("acme-github"), std::string::npos);
}

// The replay of issue 40: an agent that pushes is not run again (nothing is
// pushed) unless a person approves; the summary after it reports the commit
// that is on the server: the original's when it was not run, the new one when
// it was.
TEST_F(AgentTest, AReplayPushesAgainOnlyOnceApprovedAndItsSummaryTellsTheCommitOnTheServer) {
  start_model(kWriteSite);
  const std::string token = random_token("ghp_");
  start_git(token);
  identity(random_token("sk-ant-"), token, "http://" + model_rule());
  start_worker(resolving());
  const std::string wf = file("site.yaml", slurp(site_workflow(", branch: main")) + R"(
  - id: summary
    needs: [build]
    mode: in_process
    kind: template
    template: "Built {{steps.build.artifact.commit}}"
)");
  std::string out, err;
  ASSERT_EQ(run({"workflow", "run", wf, "--project", "acme", "--run-id", "s1"}, &out, &err), 0)
      << out << err;
  const std::string first = step(show("s1"), "build")["outputs"]["artifact"]["commit"];
  ASSERT_EQ(git("rev-parse main"), first + "\n");
  const size_t asked = model_requests().size();

  // Denied: no agent, no push; the summary tells the commit still there.
  Cli denied({"run", "replay", "s1", "--state-dir", state_});
  const json ask = pending_approval("build", "replay");
  ASSERT_FALSE(ask.empty()) << denied.out();
  const std::string message = ask["request"]["message"];
  EXPECT_NE(message.find("cli_agent: it runs agent claude-code"), std::string::npos) << message;
  EXPECT_NE(message.find("it pushes an artifact to git " + git_url() + " (branch main)"),
            std::string::npos)
      << message;
  decide(ask, false, "carol", "no second push");
  ASSERT_EQ(denied.wait(60s), 0) << denied.out() << denied.err();
  EXPECT_EQ(git("rev-parse main"), first + "\n");
  EXPECT_EQ(model_requests().size(), asked);  // the agent did not run
  const json r1 = show(ask["run"].get<std::string>());
  EXPECT_EQ(replay_line(r1, "build")["action"], "skipped (side effect, not approved)");
  EXPECT_EQ(step(r1, "summary")["outputs"]["output"], "Built " + first);

  // Approved: it runs and pushes again; the summary tells the new commit.
  Cli approved({"run", "replay", "s1", "--state-dir", state_});
  const json again = pending_approval("build", "replay");
  decide(again, true, "alice");
  ASSERT_EQ(approved.wait(120s), 0) << approved.out() << approved.err();
  const json r2 = show(again["run"].get<std::string>());
  const std::string now = step(r2, "build")["outputs"]["artifact"]["commit"];
  EXPECT_NE(now, first);
  EXPECT_EQ(git("rev-parse main"), now + "\n");
  EXPECT_EQ(replay_line(r2, "build")["action"], "re-run (approved)");
  EXPECT_EQ(step(r2, "summary")["outputs"]["output"], "Built " + now);
  EXPECT_EQ(replay_line(r2, "summary")["action"], "re-run");
}

TEST_F(AgentTest, AWrongTokenIsRefusedByTheGitServer) {
  start_model(kWriteSite);
  start_git(random_token("ghp_"));
  identity(random_token("sk-ant-"), "not-the-token", "http://" + model_rule());
  start_worker(resolving());
  const std::string wf = site_workflow("");
  std::string out, err;
  EXPECT_EQ(run({"workflow", "run", wf, "--project", "acme", "--run-id", "a2"}, &out, &err), 1);
  const json build = step(show("a2"), "build");
  EXPECT_EQ(build["error_kind"], "artifact");
  EXPECT_NE(
      build["error"].get<std::string>().find("git artifact " + git_url() + ": the push exited 128"),
      std::string::npos)
      << build;
  EXPECT_NE(slurp(dir_ + "/git.log").find("\" 401 "), std::string::npos);
  EXPECT_EQ(git("rev-parse --verify -q main"), "");  // nothing landed
}

TEST_F(AgentTest, NoModelReachableFailsNamingTheAgentAndTheEndpoint) {
  start_model(kWriteSite);
  const int closed = model_.port();
  model_.stop();  // nothing listens there now
  identity(random_token("sk-ant-"), "t", "http://model.test:" + std::to_string(closed));
  start_worker(resolving());
  const std::string wf = file("down.yaml", R"(name: down
steps:
  - id: build
    mode: cli_agent
    agent: claude-code
    sandbox: {network: {allow: ["model.test:)" +
                                               std::to_string(closed) + R"(", "127.0.0.1/32"]}}
    prompt: "Build"
)");
  std::string out, err;
  EXPECT_EQ(run({"workflow", "run", wf, "--project", "acme", "--run-id", "a3"}, &out, &err), 1);
  const json build = step(show("a3"), "build");
  EXPECT_EQ(build["error_kind"], "network");
  EXPECT_NE(build["error"].get<std::string>().find(
                "agent claude-code could not reach its model at http://model.test:" +
                std::to_string(closed) + " (ANTHROPIC_BASE_URL)"),
            std::string::npos)
      << build;
}

TEST_F(AgentTest, CodexRunsFromItsAdapterToo) {
  start_model(kWriteSite);
  const std::string key = random_token("sk-openai-");
  std::string out, err;
  ASSERT_EQ(run({"secret", "set", "acme-openai"}, &out, &err, key), 0) << err;
  ASSERT_EQ(run({"identity", "profile", "set", "acme", "--level", "project", "--project", "acme",
                 "OPENAI_API_KEY=secret:acme-openai",
                 "OPENAI_BASE_URL=value:http://" + model_rule() + "/v1"},
                &out, &err),
            0)
      << err;
  start_worker(resolving());
  const std::string wf = file("codex.yaml", R"(name: codex
steps:
  - id: build
    mode: cli_agent
    agent: codex
    sandbox: {network: {allow: [")" + model_rule() +
                                                R"(", "127.0.0.1/32"]}}
    prompt: "Build a one-page site"
    artifact: {dest: none}
)");
  ASSERT_EQ(run({"workflow", "run", wf, "--project", "acme", "--run-id", "a4"}, &out, &err), 0)
      << out << err;
  const json build = step(show("a4"), "build");
  EXPECT_EQ(build["outputs"]["output"], "done: index.html and build.sh");
  EXPECT_EQ(build["outputs"]["artifact"]["files"], 2);
  ASSERT_EQ(run({"run", "artifact", "a4", "build", "-o", dir_ + "/a4.tar"}, &out, &err), 0) << err;
  EXPECT_EQ(run_capture({"/bin/tar", "-xOf", dir_ + "/a4.tar", "index.html"}, {}).out,
            "<h1>hi</h1>\n");
  bool keyed = false;
  for (const auto& q : model_requests()) {
    if (q.value("api", "") == "responses") {
      EXPECT_EQ(q["headers"]["authorization"], "Bearer " + key);
      keyed = true;
    }
  }
  EXPECT_TRUE(keyed);
}

// The README's example: plan (llm) -> scaffold (Claude Code, git) -> verify
// (a sandbox clones and builds it) -> summarise (template).
TEST_F(AgentTest, ThePortfolioExampleRunsEndToEnd) {
  start_model(slurp(std::string(RF_SOURCE_DIR) + "/examples/portfolio-model.json"));
  const std::string token = random_token("ghp_");
  std::filesystem::create_directories(dir_ + "/git");
  git_.start({"/usr/bin/python3", RF_GIT_SERVER_PY, "--root", dir_ + "/git", "--port", "0",
              "--port-file", dir_ + "/git-port", "--token", token, "--anonymous-read", "--log",
              dir_ + "/git.log", "--init", "site"},
             dir_ + "/git-port", dir_ + "/git-server.log");
  std::string out, err;
  ASSERT_EQ(run({"secret", "set", "demo-anthropic"}, &out, &err, random_token("sk-ant-")), 0);
  ASSERT_EQ(run({"secret", "set", "demo-github"}, &out, &err, token), 0);
  ASSERT_EQ(
      run({"identity", "profile", "set", "portfolio", "--level", "workflow", "--workflow",
           "portfolio", "ANTHROPIC_API_KEY=secret:demo-anthropic",
           "ANTHROPIC_BASE_URL=value:http://" + model_rule(), "GITHUB_TOKEN=secret:demo-github"},
          &out, &err),
      0)
      << err;
  std::string example = slurp(std::string(RF_SOURCE_DIR) + "/examples/portfolio.yaml");
  for (const auto& [from, to] :
       {std::pair<std::string, int>{"18080", model_.port()}, {"18081", git_.port()}}) {
    for (size_t at = example.find(from); at != std::string::npos; at = example.find(from, at)) {
      example.replace(at, from.size(), std::to_string(to));
    }
  }
  const std::string wf = file("portfolio.yaml", example);
  start_worker(resolving(), {"PLANNER_KEY=" + random_token("sk-planner-")});
  ASSERT_EQ(run({"workflow", "run", wf, "--project", "acme", "--run-id", "port1", "--follow"}, &out,
                &err),
            0)
      << out << err;
  EXPECT_NE(out.find("> scaffold       cli_agent  attempt 1"), std::string::npos) << out;
  EXPECT_NE(out.find("verify | build ok: "), std::string::npos) << out;
  const json r = show("port1");
  const std::string commit = step(r, "scaffold")["outputs"]["artifact"]["commit"];
  EXPECT_EQ(git("rev-parse main"), commit + "\n");
  EXPECT_EQ(step(r, "summarise")["outputs"]["output"], "Built " + commit + ": 0");
  EXPECT_EQ(step(r, "plan")["outputs"]["output"],
            "Requirements: one page, a gallery of three photos, an about section, minimal style.");
  // The agent got the plan in its prompt.
  bool planned = false;
  for (const auto& q : model_requests()) {
    planned = planned || (q.value("api", "") == "anthropic" &&
                          q.dump().find("Scaffold the site described in Requirements: one page") !=
                              std::string::npos);
  }
  EXPECT_TRUE(planned);
  ASSERT_EQ(run({"run", "show", "port1"}, &out, &err), 0);
  EXPECT_NE(out.find("scaffold       cli_agent"), std::string::npos) << out;
  EXPECT_NE(out.find("artifact: git " + git_url()), std::string::npos) << out;
}

// S3: the workspace as a tar, uploaded (one PUT, and multipart when large) to
// s3rver, with keys from identity; our SigV4 equals botocore's for the same
// requests.
TEST_F(AgentTest, S3ArtifactsUploadAndSignAsBotocoreDoes) {
  // The signatures, against botocore on requests like ours.
  for (const json& req :
       {json{{"method", "PUT"},
             {"host", "s3.test:9000"},
             {"path", "/site/runs/a%20b.tar"},
             {"query", json::array()},
             {"headers", json::array({json::array({"Content-Type", "application/x-tar"})})},
             {"payload_sha256", artifact::sha256_hex("tar bytes")},
             {"access_key", "AKIDEXAMPLE"},
             {"secret_key", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"},
             {"region", "eu-west-1"},
             {"service", "s3"},
             {"amz_date", "20261125T101010Z"}},
        json{{"method", "POST"},
             {"host", "s3.test:9000"},
             {"path", "/site/big.tar"},
             {"query", json::array({json::array({"uploadId", "abc/123"}),
                                    json::array({"partNumber", "2"})})},
             {"headers", json::array()},
             {"payload_sha256", artifact::sha256_hex("")},
             {"access_key", "AKIDEXAMPLE"},
             {"secret_key", "secret"},
             {"session_token", "FwoGZXIvYXdzE-token"},
             {"region", "us-east-1"},
             {"service", "s3"},
             {"amz_date", "20261125T000001Z"}}}) {
    const Ran golden = run_capture({"/usr/bin/python3", RF_SIGV4_GOLDEN_PY}, {}, req.dump());
    ASSERT_EQ(golden.status, 0) << golden.out;
    const json g = json::parse(golden.out);
    artifact::SigV4Request r;
    r.method = req["method"];
    r.host = req["host"];
    r.path = req["path"];
    for (const auto& q : req["query"]) r.query.emplace_back(q[0], q[1]);
    for (const auto& h : req["headers"]) r.headers.emplace_back(h[0], h[1]);
    r.payload_sha256 = req["payload_sha256"];
    artifact::AwsCredentials c{req["access_key"], req["secret_key"],
                               req.value("session_token", "")};
    const auto ours = artifact::sign_v4(r, c, req["region"], "s3", req["amz_date"]);
    EXPECT_EQ(ours.canonical_request, g["canonical_request"]) << req;
    std::string auth;
    for (const auto& [k, v] : ours.headers) {
      if (k == "Authorization") auth = v;
    }
    EXPECT_EQ(auth, g["authorization"]) << req;
  }
  // The upload, through s3rver.
  const std::string s3dir = dir_ + "/s3";
  std::filesystem::create_directories(s3dir);
  const Ran started =
      run_capture({"/bin/bash", RF_S3_SERVER_SH, "start", s3dir, "--bucket", "site"}, {});
  ASSERT_EQ(started.status, 0) << started.out << slurp(s3dir + "/log");
  const std::string port = slurp(s3dir + "/port").substr(0, slurp(s3dir + "/port").find('\n'));
  std::string out, err;
  ASSERT_EQ(run({"secret", "set", "acme-s3-secret"}, &out, &err, "S3RVER"), 0);
  ASSERT_EQ(run({"identity", "profile", "set", "acme", "--level", "project", "--project", "acme",
                 "AWS_ACCESS_KEY_ID=value:S3RVER", "AWS_SECRET_ACCESS_KEY=secret:acme-s3-secret"},
                &out, &err),
            0)
      << err;
  const std::string adapter = file("maker.yaml", R"(name: maker
argv: [sh, -c, "head -c {{prompt}} /dev/urandom > blob.bin && echo made", x]
result: {from: stdout, format: text}
)");
  start_worker(resolving());
  const std::string wf = file("s3.yaml", R"(name: s3
steps:
  - id: small
    mode: cli_agent
    agent: )" + adapter + R"(
    prompt: "1000"
    sandbox: {network: {allow: ["s3.test:)" + port +
                                             R"(", "127.0.0.1/32"]}}
    artifact: {dest: s3, endpoint: "http://s3.test:)" +
                                             port + R"(", bucket: site, key: "{{run.id}}/small.tar"}
  - id: big
    mode: cli_agent
    agent: )" + adapter + R"(
    prompt: "20000000"
    sandbox: {network: {allow: ["s3.test:)" + port +
                                             R"(", "127.0.0.1/32"]}}
    artifact: {dest: s3, endpoint: "http://s3.test:)" +
                                             port + R"(", bucket: site, key: "{{run.id}}/big.tar"}
  - id: refused
    mode: cli_agent
    agent: )" + adapter + R"(
    prompt: "10"
    artifact: {dest: s3, endpoint: "http://s3.test:)" +
                                             port + R"(", bucket: site}
    allow_failure: true
)");
  const int code = run({"workflow", "run", wf, "--project", "acme", "--run-id", "s1"}, &out, &err);
  run_capture({"/bin/bash", RF_S3_SERVER_SH, "stop", s3dir}, {});
  ASSERT_EQ(code, 0) << out << err;
  const json r = show("s1");
  const json small = step(r, "small")["outputs"]["artifact"];
  EXPECT_EQ(small["parts"], 0);
  EXPECT_EQ(small["key"], "s1/small.tar");
  const json big = step(r, "big")["outputs"]["artifact"];
  EXPECT_EQ(big["parts"], 3);  // 8 MiB parts
  // What s3rver stored is the tar we sent, byte for byte.
  for (const json* a : {&small, &big}) {
    const std::string stored =
        s3dir + "/data/site/" + (*a)["key"].get<std::string>() + "._S3rver_object";
    ASSERT_TRUE(std::filesystem::exists(stored)) << stored;
    EXPECT_EQ(artifact::sha256_hex(slurp(stored)), (*a)["sha256"]) << *a;
  }
  // A step whose sandbox may not reach the endpoint may not upload there either.
  EXPECT_NE(
      step(r, "refused")["error"].get<std::string>().find("the step's sandbox has no network"),
      std::string::npos)
      << step(r, "refused");
}

// The agent asks for GITHUB_TOKEN just in time (issue 13): the scripted model
// makes the real Claude Code run rf-cred through its Bash tool, in a
// cli_agent_jit step, and the worker's policy answers by the step's scope:
// push is allowed (the agent's shell gets the value: the tool result the
// model sees holds its hash), admin is denied (the agent sees the refusal's
// words), deploy asks a human, who approves from another process while the
// step waits. The value is in no output, run record or store row.
// Done when (issue 13): a gateway-delivered Anthropic key reaches the model
// while the sandbox only ever held a placeholder. The fake model speaks HTTPS
// (a test certificate the worker's --egress-ca-file trusts); Claude Code in a
// cli_agent step gets ANTHROPIC_BASE_URL pointing at the egress proxy's
// gateway and a placeholder for ANTHROPIC_API_KEY; the gateway sends the real
// key over verified TLS. Every model request carried the real key; the
// agent's tool saw only the placeholder; nothing recorded holds the key.
TEST_F(AgentTest, ClaudeCodeReachesTheModelThroughTheGatewayHoldingOnlyAPlaceholder) {
  const std::string cert = dir_ + "/model-cert.pem", key_pem = dir_ + "/model-key.pem";
  ASSERT_EQ(run_capture({"/usr/bin/openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                         "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key_pem, "-out", cert,
                         "-days", "2", "-subj", "/CN=model.test", "-addext",
                         "subjectAltName=DNS:model.test"},
                        {})
                .status,
            0);
  start_model(R"({"turns": [
  {"tool": {"name": "Bash", "input": {"command": "printf 'key:%s\\n' \"$ANTHROPIC_API_KEY\" > seen.txt; printf 'url:%s\\n' \"$ANTHROPIC_BASE_URL\" >> seen.txt; cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c '^ANTHROPIC_API_KEY=rfph_' >> seen.txt; cat seen.txt", "description": "look at the key"}}},
  {"text": "looked"}
]})",
              {"--cert", cert, "--key", key_pem});
  const std::string key = random_token("sk-ant-");
  std::string out, err;
  ASSERT_EQ(run({"secret", "set", "acme-anthropic"}, &out, &err, key), 0) << err;
  ASSERT_EQ(run({"identity", "profile", "set", "acme", "--level", "project", "--project", "acme",
                 "ANTHROPIC_API_KEY=gateway:acme-anthropic,preset=anthropic,upstream=https://" +
                     model_rule()},
                &out, &err),
            0)
      << err;
  start_worker({"--proxy-resolve", "model.test=127.0.0.1", "--egress-ca-file", cert});
  const std::string wf = file("gateway.yaml", R"(name: site
steps:
  - id: look
    mode: cli_agent
    agent: claude-code
    sandbox: {network: {allow: [")" + model_rule() +
                                                  R"(", "127.0.0.1/32"]}}
    prompt: "Look at your key"
)");
  ASSERT_EQ(
      run({"workflow", "run", wf, "--project", "acme", "--run-id", "g1", "--follow"}, &out, &err),
      0)
      << out << err << slurp(dir_ + "/model.log");
  const json r = show("g1");
  EXPECT_EQ(step(r, "look")["outputs"]["output"], "looked");
  // Every request reached the model with the real key, sent by the gateway.
  const auto requests = model_requests();
  int messages = 0;
  std::string tool_result;
  for (const auto& q : requests) {
    if (q.value("api", "") != "anthropic") continue;
    ++messages;
    EXPECT_EQ(q["headers"]["x-api-key"], key);
    const std::string body = q["body"].dump();
    if (body.find("tool_result") != std::string::npos) tool_result = body;
  }
  EXPECT_GE(messages, 2);
  // The agent's tool saw a placeholder and the gateway's URL, in its own
  // environment and in every process's.
  EXPECT_NE(tool_result.find("key:rfph_"), std::string::npos) << tool_result.substr(0, 2000);
  EXPECT_NE(tool_result.find("url:http://127.0.0.1:3128/.rf/gw/ANTHROPIC_API_KEY"),
            std::string::npos);
  EXPECT_EQ(tool_result.find(key), std::string::npos);
  EXPECT_EQ(tool_result.find("[REDACTED"), std::string::npos);
  EXPECT_EQ(out.find(key), std::string::npos);
  EXPECT_EQ(r.dump().find(key), std::string::npos);
  stop_workers();
  EXPECT_EQ(slurp(worker::store_path(state_)).find(key), std::string::npos);
}

// git over HTTPS through the gateway (issue 13): the profile's github preset
// points git at the gateway for the upstream (url.<gateway>.insteadOf, from
// the environment), and the gateway adds the token as basic auth; the step's
// sandbox held a placeholder only. A clone and a push to the test git server
// (https, a test certificate the worker trusts), which insists on the token.
TEST_F(AgentTest, GitClonesAndPushesThroughTheGatewayWithoutTheTokenInTheSandbox) {
  const std::string cert = dir_ + "/git-cert.pem", key_pem = dir_ + "/git-key.pem";
  ASSERT_EQ(
      run_capture({"/usr/bin/openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                   "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key_pem, "-out", cert,
                   "-days", "2", "-subj", "/CN=git.test", "-addext", "subjectAltName=DNS:git.test"},
                  {})
          .status,
      0);
  const std::string token = random_token("ghp_");
  start_git(token, {"--tls-cert", cert, "--tls-key", key_pem});
  const std::string upstream = "https://git.test:" + std::to_string(git_.port());
  std::string out, err;
  ASSERT_EQ(run({"secret", "set", "acme-github"}, &out, &err, token), 0) << err;
  ASSERT_EQ(run({"identity", "profile", "set", "site", "--level", "workflow", "--workflow", "site",
                 "GITHUB_TOKEN=gateway:acme-github,preset=github,upstream=" + upstream},
                &out, &err),
            0)
      << err;
  start_worker({"--proxy-resolve", "git.test=127.0.0.1", "--egress-ca-file", cert});
  const std::string wf = file(
      "git-gw.yaml",
      R"(name: site
steps:
  - id: push
    mode: identity_scoped
    identity: {workflow: site}
    sandbox: {network: {allow: ["git.test:)" +
          std::to_string(git_.port()) +
          R"(", "127.0.0.1/32"]}}
    run: 'cd /tmp && git clone -q )" +
          upstream +
          R"(/site.git c 2>/dev/null && cd c && git config user.email a@b.c && git config user.name a && echo hi > f && git add f && git commit -qm gateway && git push -q origin HEAD:main 2>&1 && echo pushed && env | grep -c "^GITHUB_TOKEN=rfph_"'
)");
  ASSERT_EQ(
      run({"workflow", "run", wf, "--project", "acme", "--run-id", "gp", "--follow"}, &out, &err),
      0)
      << out << err << slurp(dir_ + "/git.log");
  const json r = show("gp");
  EXPECT_EQ(step(r, "push")["outputs"]["stdout"], "pushed\n1\n") << r.dump();
  EXPECT_EQ(git("show main:f"), "hi\n");
  EXPECT_EQ(git("log -1 --format=%s main"), "gateway\n");
  // The server saw the token on every request (it refuses any other).
  EXPECT_NE(slurp(dir_ + "/git.log").find("git-receive-pack"), std::string::npos);
  EXPECT_EQ(r.dump().find(token), std::string::npos);
  EXPECT_EQ(r.dump().find("[REDACTED"), std::string::npos);
  stop_workers();
  EXPECT_EQ(slurp(worker::store_path(state_)).find(token), std::string::npos);
}

TEST_F(AgentTest, ClaudeCodeAsksForACredentialAndThePolicyAnswers) {
  start_model(R"({"turns": [
  {"tool": {"name": "Bash", "input": {"command": "if v=$(rf-cred get GITHUB_TOKEN --scope \"$SCOPE\" --reason 'push the site'); then printf %s \"$v\" | sha256sum | cut -c1-64 | sed s/^/sha:/; fi", "description": "ask for the token"}}},
  {"text": "asked"}
]})");
  const std::string key = random_token("sk-ant-");
  const std::string token = random_token("ghp_");
  std::string out, err;
  ASSERT_EQ(run({"secret", "set", "acme-anthropic"}, &out, &err, key), 0) << err;
  ASSERT_EQ(run({"secret", "set", "github-acme"}, &out, &err, token), 0) << err;
  ASSERT_EQ(run({"identity", "profile", "set", "acme", "--level", "project", "--project", "acme",
                 "ANTHROPIC_API_KEY=secret:acme-anthropic",
                 "ANTHROPIC_BASE_URL=value:http://" + model_rule(), "GITHUB_TOKEN=jit:github-acme"},
                &out, &err),
            0)
      << err;
  const std::string policy = file("jit.yaml", R"(rules:
  - secret: "github-*"
    scope: push
    agent: claude-code
    verdict: allow
  - secret: "github-*"
    scope: deploy
    verdict: ask
    timeout: 60s
  - secret: "github-*"
    verdict: deny
    scope: admin
  - secret: "github-*"
    scope: slow
    verdict: ask
    timeout: 1s
)");
  start_worker({"--jit-policy", policy, "--proxy-resolve", "model.test=127.0.0.1"});
  auto workflow = [&](const std::string& scope) {
    return file("jit-" + scope + ".yaml", R"(name: site
steps:
  - id: build
    mode: cli_agent_jit
    agent: claude-code
    env: {SCOPE: )" + scope + R"(}
    sandbox: {network: {allow: [")" + model_rule() +
                                              R"(", "127.0.0.1/32"]}}
    prompt: "Push the site"
)");
  };
  // The tool result the model saw in the request that came after the tool call.
  auto tool_result = [&](size_t from) {
    const auto requests = model_requests();
    for (size_t i = from; i < requests.size(); ++i) {
      const std::string body = requests[i]["body"].dump();
      if (requests[i].value("api", "") == "anthropic" &&
          body.find("tool_result") != std::string::npos) {
        return body;
      }
    }
    return std::string();
  };
  // The tool_result of a request body, not the whole (tens of KB) request.
  auto around = [](const std::string& body) {
    const size_t at = body.rfind("tool_result");
    return at == std::string::npos ? std::string("(no tool_result)")
                                   : body.substr(at > 300 ? at - 300 : 0, 400);
  };
  // push: allowed.
  ASSERT_EQ(
      run({"workflow", "run", workflow("push"), "--project", "acme", "--run-id", "j1", "--follow"},
          &out, &err),
      0)
      << out << err << slurp(dir_ + "/model.log");
  EXPECT_EQ(step(show("j1"), "build")["outputs"]["output"], "asked");
  // What the policy was asked, and what it said.
  ASSERT_EQ(run({"audit", "show", "--json"}, &out, &err), 0) << err;
  json evaluated;
  for (const auto& e : json::parse(out)) {
    if (e["kind"] == "jit.evaluated") evaluated = e["detail"];
  }
  EXPECT_EQ(evaluated["scope"], "push") << evaluated;
  EXPECT_EQ(evaluated["agent"], "claude-code") << evaluated;
  EXPECT_EQ(evaluated["step"], "build") << evaluated;
  EXPECT_EQ(evaluated["verdict"], "allow") << evaluated;
  EXPECT_NE(tool_result(0).find("sha:" + sha256_hex(token)), std::string::npos)
      << around(tool_result(0));
  // admin: denied; the agent read why.
  size_t seen = model_requests().size();
  ASSERT_EQ(
      run({"workflow", "run", workflow("admin"), "--project", "acme", "--run-id", "j2", "--follow"},
          &out, &err),
      0)
      << out << err;
  const std::string denied = tool_result(seen);
  EXPECT_NE(denied.find("rf-cred: refused: denied by rule 3 (" + policy + ":10)"),
            std::string::npos)
      << around(denied);
  EXPECT_EQ(denied.find(sha256_hex(token)), std::string::npos) << around(denied);
  // deploy: asked; approved from another process while the step waits.
  seen = model_requests().size();
  Cli follower({"workflow", "run", workflow("deploy"), "--project", "acme", "--run-id", "j3",
                "--follow", "--state-dir", state_});
  auto st = store::Store::open(worker::store_path(state_));
  ASSERT_TRUE(st.ok());
  int64_t id = 0;
  const auto end = std::chrono::steady_clock::now() + 60s;
  while (id == 0 && std::chrono::steady_clock::now() < end) {
    auto pending = store::WorkflowStore(**st).pending_approvals("acme");
    if (pending.ok() && !pending->empty()) id = pending->front().id;
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_NE(id, 0) << follower.err();
  ASSERT_EQ(run({"approvals", "list", "--json"}, &out, &err), 0) << err;
  const json pending = json::parse(out);
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0]["kind"], "credential");
  EXPECT_EQ(pending[0]["step"], "build");
  EXPECT_EQ(pending[0]["request"]["agent"], "claude-code");
  EXPECT_EQ(pending[0]["request"]["scope"], "deploy");
  ASSERT_EQ(run({"approvals", "approve", std::to_string(id), "--as", "alice"}, &out, &err), 0)
      << err;
  ASSERT_EQ(follower.wait(120s), 0) << follower.out() << follower.err();
  EXPECT_NE(tool_result(seen).find("sha:" + sha256_hex(token)), std::string::npos)
      << around(tool_result(seen));
  // slow: an ask nobody answers is denied at its timeout; the agent reads why.
  seen = model_requests().size();
  ASSERT_EQ(
      run({"workflow", "run", workflow("slow"), "--project", "acme", "--run-id", "j4", "--follow"},
          &out, &err),
      0)
      << out << err;
  const std::string timed_out = tool_result(seen);
  EXPECT_NE(timed_out.find("got no answer within 1s, so it counts as denied"), std::string::npos)
      << around(timed_out);
  EXPECT_EQ(timed_out.find(sha256_hex(token)), std::string::npos) << around(timed_out);
  // Nowhere outside the sandbox (the model saw only hashes and refusals).
  for (const char* run_id : {"j1", "j2", "j3", "j4"}) {
    EXPECT_EQ(show(run_id).dump().find(token), std::string::npos) << run_id;
  }
  for (const auto& q : model_requests()) EXPECT_EQ(q.dump().find(token), std::string::npos);
  stop_workers();
  EXPECT_EQ(slurp(worker::store_path(state_)).find(token), std::string::npos);
}

// A real agent as an MCP client (issue 14): Claude Code with --mcp-config
// starts `ringfence mcp` on stdio; the scripted model has it create a sandbox
// and run a command there through the MCP tools, and the command's output
// comes back to the model as the tool's result.
TEST_F(AgentTest, ClaudeCodeRunsACommandThroughRingfenceMcp) {
  // Named after this process: two suite runs on one host share its cgroups.
  const std::string id = "rf-claude-mcp-" + std::to_string(::getpid());
  start_model(R"({"turns": [
  {"tool": {"name": "mcp__ringfence__sandbox_create", "input": {"id": ")" +
              id + R"(", "limits": {"memory": "256m"}}}},
  {"tool": {"name": "mcp__ringfence__sandbox_exec", "input": {"sandbox_id": ")" +
              id +
              R"(", "cmd": "echo made-by-claude > /workspace/x && cat /workspace/x && id -u"}}},
  {"text": "the sandbox said made-by-claude"}
]})");
  const std::string config = file(
      "mcp.json", R"({"mcpServers": {"ringfence": {"type": "stdio", "command": ")" +
                      std::string(RF_CLI_PATH) + R"(", "args": ["mcp", "--project", "acme"]}}})");
  std::filesystem::create_directories(dir_ + "/home");
  const std::string cmd =
      "cd " + dir_ + " && env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=" + dir_ +
      "/home IS_SANDBOX=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 ANTHROPIC_API_KEY=sk-test-mcp "
      "ANTHROPIC_BASE_URL=http://127.0.0.1:" +
      std::to_string(model_.port()) +
      " timeout 120 /usr/local/bin/claude -p 'use the ringfence sandbox' --mcp-config " + config +
      " --strict-mcp-config --dangerously-skip-permissions > " + dir_ + "/claude.out 2> " + dir_ +
      "/claude.err";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << slurp(dir_ + "/claude.err");
  // The model was offered our tools, and got each tool's result back (Claude
  // Code passes MCP's structuredContent on as the tool_result's text).
  bool offered = false;
  json create_result, exec_result;
  for (const json& r : model_requests()) {
    if (!r["body"].is_object()) continue;
    offered = offered || r["body"].dump().find("mcp__ringfence__sandbox_exec") != std::string::npos;
    for (const json& m : r["body"].value("messages", json::array())) {
      if (!m.contains("content") || !m["content"].is_array()) continue;
      for (const json& block : m["content"]) {
        if (block.value("type", "") != "tool_result") continue;
        std::string text;
        if (block["content"].is_string()) text = block["content"];
        if (block["content"].is_array()) {
          for (const json& c : block["content"]) text += c.value("text", "");
        }
        const json parsed = json::parse(text, nullptr, false);
        if (!parsed.is_object()) continue;
        if (parsed.contains("spec")) create_result = parsed;
        if (parsed.contains("exit_code")) exec_result = parsed;
      }
    }
  }
  EXPECT_TRUE(offered) << "Claude Code did not offer the MCP tools to the model";
  EXPECT_EQ(create_result.value("sandbox_id", ""), id) << create_result;
  EXPECT_EQ(exec_result.value("exit_code", -1), 0) << exec_result;
  const std::string stdout_text = exec_result.value("stdout", "");
  EXPECT_EQ(stdout_text.rfind("made-by-claude\n", 0), 0u) << exec_result;
  EXPECT_EQ(stdout_text.find("\n0\n"), std::string::npos) << "not as root: " << stdout_text;
  // `ringfence mcp` ended with Claude Code and took its sandbox with it.
  std::string out, err;
  run({"sandbox", "list", "--backend", "native", "--json"}, &out, &err);
  EXPECT_EQ(out.find(id), std::string::npos) << out;
}

}  // namespace
}  // namespace rf::testing
