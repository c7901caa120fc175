// The tenant boundary (issue 39), tried as a hostile tenant tries it: with
// nothing but its own project's API token, against the real `ringfence
// serve` and a worker on this host (loopback only). Each test is named after
// the attack it stops, and asserts the exact answer: the status, the field
// and the words, and that nothing reached what the attack aimed at.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "api/api.h"
#include "store/store.h"
#include "support/ci_skip.h"
#include "support/cli_process.h"
#include "support/http_probe.h"
#include "support/serve_process.h"

namespace rf::testing {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

// A service on this host's loopback that a tenant must never reach: it
// counts the connections it gets.
class LoopbackTarget {
 public:
  LoopbackTarget() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(fd_, 64), 0);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      while (!stop_) {
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, 100) != 1) continue;
        const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) continue;
        ++hits_;
        const std::string reply = "HTTP/1.0 200 OK\r\nContent-Length: 6\r\n\r\nsecret";
        (void)!::write(c, reply.data(), reply.size());
        ::close(c);
      }
    });
  }
  ~LoopbackTarget() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  int hits() const { return hits_.load(); }

 private:
  int fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> hits_{0};
  std::thread thread_;
};

std::string deep_json(size_t levels) { return std::string(levels, '[') + std::string(levels, ']'); }

class Tenancy : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) RF_SKIP() << "the API's sandboxes are native, which need root";
    char tmpl[] = "/tmp/rf-tenancy-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    for (auto& w : workers_) {
      w->signal(SIGTERM);
      w->wait(60s);
    }
    if (server_) {
      server_->signal(SIGTERM);
      EXPECT_EQ(server_->wait(30s), 0) << server_->err();
    }
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::string token(const std::string& project, std::vector<std::string> extra = {}) {
    return make_token(dir_, project, extra);
  }
  // `ringfence WORD WORD --state-dir DIR REST...` to its end.
  int cli(std::vector<std::string> args, std::string* out = nullptr, std::string* err = nullptr,
          std::optional<std::string> in = std::nullopt, const std::vector<std::string>& env = {}) {
    args.insert(args.begin() + std::min<size_t>(2, args.size()), {"--state-dir", dir_});
    Cli c(args, std::move(in), env);
    const int code = c.wait(120s);
    if (out) *out = c.out();
    if (err) *err = c.err();
    return code;
  }
  void policy(const std::string& project, std::vector<std::string> args) {
    std::vector<std::string> a{"policy", "set", "--project", project};
    a.insert(a.end(), args.begin(), args.end());
    std::string err;
    ASSERT_EQ(cli(a, nullptr, &err), 0) << err;
  }
  // serve, and a worker whose door holds the API's sandboxes.
  void serve(std::vector<std::string> extra = {}) {
    workers_.push_back(start_door_worker(dir_));
    serve_only(std::move(extra));
  }
  void serve_only(std::vector<std::string> extra = {}) {
    server_ = start_serve(dir_, &port_, extra);
    ASSERT_NE(port_, 0);
  }
  Cli& worker(std::vector<std::string> flags = {}, const std::vector<std::string>& env = {}) {
    std::vector<std::string> a{"worker",  "start", "--state-dir",    dir_,
                               "--grace", "2s",    "--sandbox-mode", "per_run"};
    a.insert(a.end(), flags.begin(), flags.end());
    workers_.push_back(std::make_unique<Cli>(a, std::nullopt, env));
    auto store = store::Store::open(dir_ + "/ringfence.db");
    EXPECT_TRUE(store.ok());
    bool up = false;
    for (int i = 0; store.ok() && i < 1500 && !up; ++i) {
      if (i) std::this_thread::sleep_for(20ms);
      auto w = (*store)->workers_serving("pa", store::now_ms() - 10'000);
      up = w && !w->empty();
    }
    EXPECT_TRUE(up) << "no worker came up: " << workers_.back()->err();
    return *workers_.back();
  }
  HttpReply call(const std::string& method, const std::string& target, const std::string& tok,
                 const std::string& body = "", const std::map<std::string, std::string>& h = {}) {
    HttpProbe p(port_);
    EXPECT_TRUE(p.connected());
    return p.request(method, target, tok, body, h);
  }
  std::string create(const std::string& tok, const std::string& spec = "{}") {
    auto r = call("POST", "/v1/sandboxes", tok, spec);
    EXPECT_EQ(r.status, 201) << r.body;
    return r.status == 201 ? json::parse(r.body).value("id", "") : "";
  }
  json exec(const std::string& tok, const std::string& id, const json& body) {
    auto r = call("POST", "/v1/sandboxes/" + id + "/exec", tok, body.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return r.status == 200 ? json::parse(r.body) : json();
  }
  // The answer's status and its error's field; the words must be in its error.
  static void expect(const HttpReply& r, int status, const std::string& field,
                     const std::string& words) {
    EXPECT_EQ(r.status, status) << r.body;
    const json j = json::parse(r.body, nullptr, false);
    ASSERT_TRUE(j.is_object()) << r.body;
    if (!field.empty()) {
      EXPECT_EQ(j.value("field", ""), field) << r.body;
    }
    EXPECT_NE(j.value("error", "").find(words), std::string::npos) << r.body;
  }
  static std::string workflow_body(const std::string& yaml, json extra = json::object()) {
    extra["workflow"] = yaml;
    return extra.dump();
  }

  std::string dir_;
  std::unique_ptr<Cli> server_;
  std::vector<std::unique_ptr<Cli>> workers_;
  int port_ = 0;
};

// ---- 1. A principal: what a request names is checked against its token.

TEST_F(Tenancy, ATokenCannotActAsAnotherUserInAWorkflowRun) {
  const std::string unbound = token("pb");
  const std::string bob = token("pb", {"--user", "bob"});
  serve();
  const std::string wf =
      "name: w\nsteps:\n  - {id: a, mode: in_process, kind: template, "
      "template: hi}\n";
  expect(call("POST", "/v1/workflows/runs", unbound, workflow_body(wf, {{"user", "alice"}})), 403,
         "user", "bound to no user");
  expect(call("POST", "/v1/workflows/runs", bob, workflow_body(wf, {{"user", "alice"}})), 403,
         "user", "acts as user bob only");
  // Naming the user in a step's identity is the same request.
  const std::string in_step =
      "name: w\nsteps:\n  - {id: a, mode: identity_scoped, run: 'true', identity: {user: alice}}\n";
  auto r = call("POST", "/v1/workflows/runs", bob, workflow_body(in_step));
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_NE(r.body.find("identity.user"), std::string::npos) << r.body;
  // Its own user, named or not, is the token's.
  auto own = call("POST", "/v1/workflows/runs", bob, workflow_body(wf, {{"user", "bob"}}));
  ASSERT_EQ(own.status, 201) << own.body;
  auto shown = call("GET", "/v1/runs/" + json::parse(own.body)["id"].get<std::string>(), bob);
  EXPECT_EQ(json::parse(shown.body)["user"], "bob");
  auto implied = call("POST", "/v1/workflows/runs", bob, workflow_body(wf));
  ASSERT_EQ(implied.status, 201) << implied.body;
  shown = call("GET", "/v1/runs/" + json::parse(implied.body)["id"].get<std::string>(), bob);
  EXPECT_EQ(json::parse(shown.body)["user"], "bob");
}

TEST_F(Tenancy, AReplayRunsOnlyWhatTheTokenCouldStart) {
  const std::string alice = token("pb", {"--user", "alice"});
  const std::string bob = token("pb", {"--user", "bob"});
  serve_only();  // no worker: the run stays queued until cancelled
  const std::string wf =
      "name: w\nsteps:\n  - {id: a, mode: in_process, kind: template, "
      "template: hi}\n";
  auto made = call("POST", "/v1/workflows/runs", alice, workflow_body(wf));
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string id = json::parse(made.body)["id"];
  ASSERT_EQ(call("POST", "/v1/runs/" + id + ":cancel", alice, "{}").status, 200);
  // Bob may see the run (his project's) but not run it again as alice.
  expect(call("POST", "/v1/runs/" + id + ":replay", bob, ""), 403, "user", "acts as user bob only");
  EXPECT_EQ(call("POST", "/v1/runs/" + id + ":replay", alice, "").status, 201);
}

TEST_F(Tenancy, ATokenCannotActAsAnotherUserInACall) {
  const std::string unbound = token("pb");
  const std::string bob = token("pb", {"--user", "bob"});
  serve();
  expect(call("POST", "/v1/calls", unbound,
              R"({"run": "r1", "argv": ["true"], "identity": {"user": "alice"}})"),
         403, "identity.user", "bound to no user");
  expect(call("POST", "/v1/calls", bob,
              R"({"run": "r1", "argv": ["true"], "identity": {"user": "alice"}})"),
         403, "identity.user", "acts as user bob only");
}

TEST_F(Tenancy, AnAgentTokenGetsNoServerWideRoutes) {
  const std::string agent = token("pa");
  const std::string op = token("ops", {"--role", "operator"});
  serve();
  for (const char* target : {"/metrics", "/v1/fleet"}) {
    expect(call("GET", target, agent), 403, "", "needs an operator token");
    EXPECT_EQ(call("GET", target, op).status, 200) << target;
  }
  // Another project's approvals and audit: nothing, as for a project that
  // does not exist; an operator may ask.
  expect(call("GET", "/v1/approvals?project=pb", agent), 404, "project", "no project pb");
  expect(call("GET", "/v1/audit?project=pb", agent), 404, "project", "no project pb");
  EXPECT_EQ(call("GET", "/v1/approvals?project=pb", op).status, 200);
}

// ---- 2. The operator policy: limits, networks, destinations, the worker's environment.

TEST_F(Tenancy, LimitsAboveTheCeilingAreRefusedNamingTheLimitAndTheCeiling) {
  const std::string tok = token("pa");
  policy("pa", {"--memory", "1g", "--timeout", "5m"});
  serve();
  expect(call("POST", "/v1/sandboxes", tok, R"({"limits": {"memory": "64g"}})"), 403,
         "limits.memory", "above the ceiling of 1g set by the operator policy of project pa");
  expect(call("POST", "/v1/sandboxes", tok, R"({"limits": {"cpus": 64}})"), 403, "limits.cpus",
         "this host's capacity");
  expect(call("POST", "/v1/sandboxes", tok, R"({"limits": {"timeout": "1h"}})"), 403,
         "limits.timeout", "above the ceiling of 5m");
  const std::string id = create(tok);
  expect(call("POST", "/v1/sandboxes/" + id + "/exec", tok, R"({"cmd": "true", "timeout": 3600})"),
         403, "timeout", "above the ceiling of 5m");
  expect(call("POST", "/v1/calls", tok, R"({"run": "r", "argv": ["true"], "timeout": "1h"})"), 403,
         "timeout", "above the ceiling of 5m");
  // The local operator is bounded by the host alone.
  std::string err;
  EXPECT_EQ(cli({"sandbox", "exec", "--mem", "1t", "--", "true"}, nullptr, &err), 2) << err;
  EXPECT_NE(err.find("--mem: 1t is more than this host's memory"), std::string::npos) << err;
}

TEST_F(Tenancy, ASandboxCannotReachTheHostsLoopbackThroughTheProxy) {
  LoopbackTarget target;
  const std::string tok = token("pa");
  serve();
  for (const std::string& rule : std::vector<std::string>{
           target.address(), "127.0.0.0/8", "[::1]:80", "169.254.169.254", "10.0.0.0/8"}) {
    auto r =
        call("POST", "/v1/sandboxes", tok, json{{"network", "proxy"}, {"allow", {rule}}}.dump());
    EXPECT_EQ(r.status, 403) << rule << ": " << r.body;
    EXPECT_TRUE(r.body.find("beyond public address space") != std::string::npos ||
                r.body.find("this server's own API") != std::string::npos)
        << r.body;
  }
  EXPECT_EQ(target.hits(), 0);
}

TEST_F(Tenancy, ASandboxCannotReachServeItselfEvenWhenTheOperatorAllowsLoopback) {
  const std::string tok = token("pa");
  policy("pa", {"--egress-allow", "127.0.0.0/8"});
  serve();
  const std::string self = "127.0.0.1:" + std::to_string(port_);
  auto r = call("POST", "/v1/sandboxes", tok, json{{"network", "proxy"}, {"allow", {self}}}.dump());
  expect(r, 403, "allow[0]", "this server's own API");
  r = call("POST", "/v1/sandboxes", tok,
           json{{"network", "proxy"}, {"allow", {"127.0.0.0/8"}}}.dump());
  expect(r, 403, "allow[0]", "this server's own API");
}

TEST_F(Tenancy, AnHttpStepCannotReachTheHostsLoopback) {
  LoopbackTarget target;
  const std::string tok = token("pa");
  serve();
  const std::string wf =
      "name: w\nsteps:\n  - id: get\n    mode: in_process\n    kind: http\n"
      "    url: http://" +
      target.address() + "/\n    allow: [\"" + target.address() + "\"]\n";
  auto r = call("POST", "/v1/workflows/runs", tok, workflow_body(wf));
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_NE(r.body.find("beyond public address space"), std::string::npos) << r.body;
  // The same run queued by the operator's own door is checked again by the worker.
  worker();
  const std::string file = dir_ + "/w.yaml";
  std::ofstream(file) << wf;
  std::string out, err;
  EXPECT_NE(cli({"workflow", "run", file, "--project", "pa", "--run-id", "h1"}, &out, &err), 0);
  EXPECT_EQ(cli({"run", "show", "h1", "--json"}, &out, &err), 0) << err;
  EXPECT_NE(out.find("refused by the operator policy"), std::string::npos) << out;
  EXPECT_EQ(target.hits(), 0);
}

TEST_F(Tenancy, AnLlmStepCannotSendTheWorkersEnvironmentAnywhere) {
  LoopbackTarget target;
  const std::string tok = token("pa");
  // Even with its destination allowed, the worker's variables are not a tenant's to name.
  policy("pa", {"--egress-allow", target.address()});
  serve();
  const std::string wf =
      "name: w\nsteps:\n  - id: ask\n    mode: in_process\n    kind: llm\n"
      "    model: {api: openai_chat, base_url: \"http://" +
      target.address() +
      "/v1\", model: m, key_env: WORKER_CLOUD_KEY}\n"
      "    prompt: hi\n";
  expect(call("POST", "/v1/workflows/runs", tok, workflow_body(wf)), 403, "",
         "WORKER_CLOUD_KEY is not readable by steps");
  worker({}, {"WORKER_CLOUD_KEY=sk-worker-own-key"});
  const std::string file = dir_ + "/w.yaml";
  std::ofstream(file) << wf;
  std::string out, err;
  EXPECT_NE(cli({"workflow", "run", file, "--project", "pa", "--run-id", "k1"}, &out, &err), 0);
  EXPECT_EQ(cli({"run", "show", "k1", "--json"}, &out, &err), 0) << err;
  EXPECT_NE(out.find("WORKER_CLOUD_KEY"), std::string::npos) << out;
  EXPECT_EQ(target.hits(), 0) << "the worker sent nothing, its key least of all";
}

TEST_F(Tenancy, AWorkflowStepCannotAskForTheHostsNetwork) {
  const std::string tok = token("pa");
  serve();
  const std::string wf =
      "name: w\nsteps:\n  - {id: a, mode: sandboxed, run: 'true', sandbox: {network: host}}\n";
  auto r = call("POST", "/v1/workflows/runs", tok, workflow_body(wf));
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_NE(r.body.find("network host is not allowed"), std::string::npos) << r.body;
  EXPECT_EQ(call("POST", "/v1/sandboxes", tok, R"({"network": "host"})").status, 400);
}

TEST_F(Tenancy, AModeOrStepKindTheOperatorLeftOutIsRefused) {
  const std::string tok = token("pa");
  policy("pa", {"--modes", "in_process", "--step-kinds", "template,json"});
  serve();
  auto r = call("POST", "/v1/workflows/runs", tok,
                workflow_body("name: w\nsteps:\n  - {id: a, mode: sandboxed, run: 'true'}\n"));
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_NE(r.body.find("execution mode sandboxed is not allowed"), std::string::npos) << r.body;
  r = call("POST", "/v1/workflows/runs", tok,
           workflow_body("name: w\nsteps:\n  - {id: a, mode: in_process, kind: sleep, "
                         "duration: 1s}\n"));
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_NE(r.body.find("step kind sleep is not allowed"), std::string::npos) << r.body;
}

TEST_F(Tenancy, AQueuedCallsTimeoutIsCappedByTheWorker) {
  const std::string tok = token("pa");
  serve_only();
  worker({"--sandbox-timeout", "2s"});
  auto made =
      call("POST", "/v1/calls", tok, R"({"run": "r1", "cmd": "sleep 60", "timeout": 3600})");
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string id = std::to_string(json::parse(made.body)["id"].get<int64_t>());
  json shown;
  for (int i = 0; i < 600; ++i) {
    if (i) std::this_thread::sleep_for(100ms);
    shown = json::parse(call("GET", "/v1/calls/" + id, tok).body);
    if (shown["state"] == "done") break;
  }
  ASSERT_EQ(shown["state"], "done") << shown.dump();
  EXPECT_EQ(shown["result"]["limit"], "timeout") << shown.dump();
  EXPECT_NE(shown["stderr"].get<std::string>().find("sandbox.timeout caps it at 2s"),
            std::string::npos)
      << shown.dump();
}

// ---- 5. A front door that bad input cannot take down.

TEST_F(Tenancy, DeeplyNestedJsonIsA400AndServeStaysUp) {
  const std::string tok = token("pa");
  serve();
  const std::string id = create(tok);
  const std::string deep = deep_json(100'000);
  for (const std::string& target : std::vector<std::string>{
           "/v1/sandboxes", "/v1/calls", "/v1/workflows/runs", "/v1/sandboxes/" + id + "/exec"}) {
    expect(call("POST", target, tok, deep), 400, "", "nested deeper than 64 levels");
  }
  auto mcp = call("POST", "/mcp", tok, deep, {{"Content-Type", "application/json"}});
  EXPECT_EQ(mcp.status, 400) << mcp.body;
  EXPECT_NE(mcp.body.find("-32700"), std::string::npos) << mcp.body;
  // The server, and the sandbox it held, are still there.
  EXPECT_EQ(call("GET", "/v1/sandboxes/" + id, tok).status, 200);
  EXPECT_EQ(exec(tok, id, {{"cmd", "echo alive"}})["stdout"], "alive\n");
}

TEST_F(Tenancy, DeeplyNestedJsonOnMcpStdioIsAnErrorNotACrash) {
  const std::string line =
      deep_json(100'000) + "\n" + R"({"jsonrpc": "2.0", "id": 7, "method": "ping"})" + "\n";
  Cli mcp({"mcp", "--project", "pa"}, line);
  EXPECT_EQ(mcp.wait(60s), 0) << mcp.err();
  EXPECT_NE(mcp.out().find("nested deeper than 64 levels"), std::string::npos) << mcp.out();
  EXPECT_NE(mcp.out().find(R"("id":7)"), std::string::npos) << "it answered the next message";
}

TEST_F(Tenancy, AMistypedFieldIsA400NamingItNeverA500) {
  const std::string tok = token("pa");
  serve();
  const std::string wf =
      "name: w\nsteps:\n  - {id: a, mode: in_process, kind: template, "
      "template: hi}\n";
  expect(call("POST", "/v1/workflows/runs", tok, workflow_body(wf, {{"user", 5}})), 400, "user",
         "expected a string");
  auto run = call("POST", "/v1/workflows/runs", tok, workflow_body(wf));
  ASSERT_EQ(run.status, 201) << run.body;
  const std::string rid = json::parse(run.body)["id"];
  expect(call("POST", "/v1/runs/" + rid + ":cancel", tok, R"({"reason": 5})"), 400, "reason",
         "expected a string");
  expect(call("POST", "/v1/sandboxes", tok, "[1, 2]"), 400, "spec", "expected a JSON object");
  // A mistyped query parameter is named too, never read as absent: ?projetc=
  // is not silently the caller's own project.
  expect(call("GET", "/v1/audit?limt=5", tok), 400, "limt",
         "unknown query parameter (allowed: project,after,limit)");
  expect(call("GET", "/v1/sandboxes?projetc=pb", tok), 400, "projetc",
         "unknown query parameter (allowed: project,name,state,metadata)");
  expect(call("GET", "/v1/secrets?x=1", tok), 400, "x",
         "unknown query parameter (this route takes none)");
  expect(call("DELETE", "/v1/secrets/k?hard=yes", tok), 400, "hard", "expected true or false");
  // And a list of another project is what an unknown project's is.
  token("pb");
  for (const std::string route : {"/v1/sandboxes", "/v1/runs"}) {
    const auto other = call("GET", route + "?project=pb", tok);
    const auto unknown = call("GET", route + "?project=nope", tok);
    EXPECT_EQ(other.status, 404) << route << other.body;
    EXPECT_EQ(unknown.status, 404) << route << unknown.body;
    EXPECT_EQ(json::parse(other.body)["field"], json::parse(unknown.body)["field"]);
  }
  // MCP: a mistyped argument is a tool error, and the server answers on.
  const json write = {{"jsonrpc", "2.0"},
                      {"id", 1},
                      {"method", "tools/call"},
                      {"params",
                       {{"name", "sandbox_file_write"},
                        {"arguments",
                         {{"sandbox_id", create(tok)},
                          {"path", "/workspace/x"},
                          {"content", "x"},
                          {"encoding", 5}}}}}};
  auto r = call("POST", "/mcp", tok, write.dump(), {{"Content-Type", "application/json"}});
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("\"isError\":true"), std::string::npos) << r.body;
  const json init = {{"jsonrpc", 5}, {"id", 2}, {"method", "ping"}};
  r = call("POST", "/mcp", tok, init.dump(), {{"Content-Type", "application/json"}});
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("-32600"), std::string::npos) << r.body;
}

TEST_F(Tenancy, IdleConnectionsCannotLockOtherClientsOut) {
  const std::string tok = token("pa");
  serve();
  std::vector<int> idle;
  for (int i = 0; i < 4100; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port_));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd);
      break;
    }
    idle.push_back(fd);
  }
  EXPECT_GE(idle.size(), 4000u);
  // Another client of the same address is served, and its sandbox made.
  EXPECT_EQ(call("GET", "/healthz", "").status, 200);
  const std::string id = create(tok);
  EXPECT_FALSE(id.empty());
  for (int fd : idle) ::close(fd);
}

TEST_F(Tenancy, AConnectionThatSendsNothingIsClosedAtTheRequestTimeout) {
  serve({"--request-timeout", "1s"});
  HttpProbe silent(port_);
  ASSERT_TRUE(silent.connected());
  EXPECT_TRUE(silent.closed_within(30s));
}

TEST_F(Tenancy, AnotherProjectsAuditEventAnswersAsAnUnknownOne) {
  const std::string pa = token("pa");
  const std::string pb = token("pb", {"--name", "pb-secret-name"});  // pb's token.create event
  serve();
  std::string seen_by_pa, missing;
  // Events 1 and 2 are the two tokens' creation: 2 is pb's.
  auto theirs = call("GET", "/v1/audit/proofs/inclusion?seq=2", pa);
  auto none = call("GET", "/v1/audit/proofs/inclusion?seq=99999", pa);
  EXPECT_EQ(theirs.status, 404);
  EXPECT_EQ(none.status, 404);
  std::string body = theirs.body;
  if (auto at = body.find("event 2:"); at != std::string::npos) body.replace(at, 8, "event 99999:");
  EXPECT_EQ(body, none.body);
  EXPECT_EQ(theirs.body.find("pb-secret-name"), std::string::npos);
  // pb reads its own.
  auto own = call("GET", "/v1/audit/proofs/inclusion?seq=2", pb);
  EXPECT_EQ(own.status, 200) << own.body;
  // The verdict says intact, not how much every project did.
  const json verdict = json::parse(call("GET", "/v1/audit:verify", pa).body);
  EXPECT_EQ(verdict, (json{{"intact", true}}));
}

TEST_F(Tenancy, ASandboxIdIsTheServersSoIdsOfOtherProjectsTellNothing) {
  const std::string pa = token("pa");
  const std::string pb = token("pb");
  serve();
  const std::string theirs = create(pb);
  auto taken = call("POST", "/v1/sandboxes", pa, json{{"id", theirs}}.dump());
  auto unused = call("POST", "/v1/sandboxes", pa, R"({"id": "rf-000000000000"})");
  EXPECT_EQ(taken.status, 400);
  EXPECT_EQ(unused.status, 400);
  EXPECT_EQ(taken.body, unused.body);
  // And another project's sandbox answers as an unknown one, whatever is asked of it.
  auto get = call("GET", "/v1/sandboxes/" + theirs, pa);
  auto unknown = call("GET", "/v1/sandboxes/rf-000000000000", pa);
  EXPECT_EQ(get.status, 404);
  std::string body = get.body;
  body.replace(body.find(theirs), theirs.size(), "rf-000000000000");
  EXPECT_EQ(body, unknown.body);
}

TEST_F(Tenancy, AnotherProjectsRunNamesAnswerAsUnusedOnes) {
  const std::string pa = token("pa");
  const std::string pb = token("pb");
  serve_only();
  const std::string wf =
      "name: w\nsteps:\n  - {id: a, mode: in_process, kind: template, "
      "template: hi}\n";
  // pa's runs: a call's r1 and a workflow run w1.
  ASSERT_EQ(call("POST", "/v1/calls", pa, R"({"run": "r1", "argv": ["true"]})").status, 201);
  auto mine = call("POST", "/v1/workflows/runs", pa, workflow_body(wf, {{"run_id", "w1"}}));
  ASSERT_EQ(mine.status, 201) << mine.body;
  // pb names the same, and names of no one: the answers are alike.
  auto taken = call("POST", "/v1/calls", pb, R"({"run": "r1", "argv": ["true"]})");
  auto unused = call("POST", "/v1/calls", pb, R"({"run": "r9", "argv": ["true"]})");
  EXPECT_EQ(taken.status, 201) << taken.body;
  EXPECT_EQ(unused.status, 201) << unused.body;
  auto shown = json::parse(
      call("GET", "/v1/calls/" + std::to_string(json::parse(taken.body)["id"].get<int64_t>()), pb)
          .body);
  EXPECT_EQ(shown["run"], "r1") << shown.dump();
  auto theirs = call("POST", "/v1/workflows/runs", pb, workflow_body(wf, {{"run_id", "w1"}}));
  auto free = call("POST", "/v1/workflows/runs", pb, workflow_body(wf, {{"run_id", "w9"}}));
  EXPECT_EQ(theirs.status, 201) << theirs.body;
  EXPECT_EQ(free.status, 201) << free.body;
  EXPECT_EQ(json::parse(theirs.body)["id"], "w1");
  // Each project sees its own w1, and pb's second w1 is refused as pa's would be.
  auto pb_w1 = json::parse(call("GET", "/v1/runs/w1", pb).body);
  auto pa_w1 = json::parse(call("GET", "/v1/runs/w1", pa).body);
  EXPECT_EQ(pb_w1["project"], "pb") << pb_w1.dump();
  EXPECT_EQ(pa_w1["project"], "pa") << pa_w1.dump();
  auto again_b = call("POST", "/v1/workflows/runs", pb, workflow_body(wf, {{"run_id", "w1"}}));
  auto again_a = call("POST", "/v1/workflows/runs", pa, workflow_body(wf, {{"run_id", "w1"}}));
  EXPECT_EQ(again_b.status, 409);
  EXPECT_EQ(again_a.status, 409);
  EXPECT_EQ(again_b.body, again_a.body) << "pb's w1 answers as pa's";
}

TEST_F(Tenancy, AnMcpOriginIsParsedNotMatchedAsAPrefix) {
  const std::string tok = token("pa");
  serve();
  const std::string ping = R"({"jsonrpc": "2.0", "id": 1, "method": "ping"})";
  for (const char* origin : {"http://127.0.0.1.evil.example", "http://localhost.evil.example",
                             "http://localhost@evil.example", "http://[::1].evil.example",
                             "http://127.0.0.1:80@evil.example", "null"}) {
    auto r =
        call("POST", "/mcp", tok, ping, {{"Content-Type", "application/json"}, {"Origin", origin}});
    EXPECT_EQ(r.status, 403) << origin << ": " << r.body;
  }
  for (const char* origin : {"http://127.0.0.1:8080", "http://localhost", "http://[::1]:3000"}) {
    auto r =
        call("POST", "/mcp", tok, ping, {{"Content-Type", "application/json"}, {"Origin", origin}});
    EXPECT_EQ(r.status, 200) << origin << ": " << r.body;
  }
}

// ---- 6. A client that leaves ends its command.

TEST_F(Tenancy, ACommandEndsWhenItsClientLeaves) {
  const std::string tok = token("pa");
  serve();
  const std::string id = create(tok);
  auto sleepers = [&] {
    return exec(tok, id, {{"cmd", "ps -eo comm | grep -c '^sleep$' || true"}})["stdout"];
  };
  // Silent and streaming, then silent and not streaming: the client hangs up.
  for (bool streaming : {true, false}) {
    {
      HttpProbe p(port_);
      const std::string body = R"({"cmd": "sleep 300"})";
      std::string req = "POST /v1/sandboxes/" + id + "/exec HTTP/1.1\r\nHost: x\r\n" +
                        "Authorization: Bearer " + tok +
                        "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" +
                        (streaming ? "Accept: text/event-stream\r\n" : "") + "\r\n" + body;
      ASSERT_TRUE(p.send_raw(req));
      // The command is running before the client leaves.
      bool started = false;
      for (int i = 0; i < 200 && !started; ++i) {
        std::this_thread::sleep_for(50ms);
        started = sleepers() == "1\n";
      }
      ASSERT_TRUE(started) << (streaming ? "streaming" : "plain");
    }
    bool gone = false;
    for (int i = 0; i < 200 && !gone; ++i) {
      std::this_thread::sleep_for(50ms);
      gone = sleepers() == "0\n";
    }
    EXPECT_TRUE(gone) << (streaming ? "streaming" : "plain") << ": the command outlived its client";
  }
  auto metrics = call("GET", "/metrics", token("ops", {"--role", "operator"}));
  EXPECT_NE(metrics.body.find("ringfence_execs_abandoned_total 2"), std::string::npos)
      << metrics.body;
}

// ---- 7. Per-call figures.

TEST_F(Tenancy, PeakMemoryIsTheCallsNotTheSandboxLife) {
  const std::string tok = token("pa");
  serve();
  const std::string id = create(tok, R"({"limits": {"memory": "512m"}})");
  const json big = exec(tok, id, {{"argv", {"python3", "-c", "b = bytearray(200 << 20)"}}});
  EXPECT_GE(big["peak_memory_bytes"].get<uint64_t>(), 200ull << 20) << big.dump();
  const json small = exec(tok, id, {{"argv", {"true"}}});
  EXPECT_LT(small["peak_memory_bytes"].get<uint64_t>(), 64ull << 20) << small.dump();
}

// ---- docs/openapi.yaml describes every route serve answers.

TEST(TenancyDocs, TheOpenApiDescriptionHasEveryRoute) {
  std::ifstream in(std::string(RF_SOURCE_DIR) + "/docs/openapi.yaml");
  ASSERT_TRUE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  for (const std::string& route : api::Api::route_names()) {
    const auto space = route.find(' ');
    std::string method = route.substr(0, space);
    for (char& c : method) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const std::string path = route.substr(space + 1);
    // The path item ("  /v1/runs/{id}:cancel:" or quoted) and, within it, the method.
    size_t at = doc.find("\n  " + path + ":\n");
    if (at == std::string::npos) at = doc.find("\n  '" + path + "':\n");
    if (at == std::string::npos) at = doc.find("\n  \"" + path + "\":\n");
    ASSERT_NE(at, std::string::npos) << route << " has no path item in docs/openapi.yaml";
    // The item ends where the next key of `paths` (two spaces, then not a space) begins.
    size_t next = at + 1;
    while ((next = doc.find("\n  ", next + 1)) != std::string::npos && doc[next + 3] == ' ') {
    }
    const std::string item =
        doc.substr(at, next == std::string::npos ? std::string::npos : next - at);
    EXPECT_NE(item.find("\n    " + method + ":"), std::string::npos)
        << route << ": the path item has no " << method << " operation";
  }
}

}  // namespace
}  // namespace rf::testing
