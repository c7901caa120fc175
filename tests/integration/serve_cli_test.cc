// `ringfence serve` (issue 14) as a new user meets it: the real binary makes a
// token, serves on a loopback port, and a client creates a native sandbox,
// runs commands (JSON and server-sent events), moves files and deletes it. A
// token of another project sees none of it; hostile requests (no token, a
// revoked one, malformed JSON, oversized heads and bodies, a slow client, too
// many requests at once) get the exact status and an error that names what.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/capture.h"
#include "support/ci_skip.h"
#include "support/cli_process.h"
#include "support/http_probe.h"
#include "support/serve_process.h"

namespace rf::testing {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

class ServeCli : public ServedTest {
 protected:
  // An operator's token: the server-wide routes (/metrics, /v1/fleet) need one.
  std::string operator_token(const std::string& project) {
    return make_token(dir_, project, {"--role", "operator"});
  }
  // The secret P-key and an identity profile of project P that gives it to
  // calls as API_KEY.
  void project_key(const std::string& project, const std::string& value) {
    Cli set({"secret", "set", project + "-key", "--state-dir", dir_}, value);
    ASSERT_EQ(set.wait(30s), 0) << set.err();
    Cli profile({"identity", "profile", "set", project, "--level", "project", "--project", project,
                 "API_KEY=secret:" + project + "-key", "--state-dir", dir_});
    ASSERT_EQ(profile.wait(30s), 0) << profile.err();
  }
};

TEST_F(ServeCli, ASandboxIsMadeUsedAndDeletedOverHttp) {
  const std::string tok = token("acme", {"--name", "ci"});
  ASSERT_EQ(tok.rfind("rft_", 0), 0u) << tok;
  serve();
  EXPECT_EQ(call("GET", "/healthz", "").status, 200);

  auto made =
      call("POST", "/v1/sandboxes", tok, R"({"limits": {"memory": "256m"}, "network": "none"})");
  ASSERT_EQ(made.status, 201) << made.body;
  const json sb = json::parse(made.body);
  const std::string id = sb["id"];
  EXPECT_EQ(made.header("location"), "/v1/sandboxes/" + id);
  EXPECT_EQ(sb["spec"]["limits"]["memory"], "256m");
  EXPECT_EQ(sb["spec"]["limits"]["pids"], 256) << "missing fields take the CLI's defaults";
  EXPECT_EQ(sb["project"], "acme");

  // One keep-alive connection for everything below.
  HttpProbe p(port_);
  auto list = p.request("GET", "/v1/sandboxes", tok);
  ASSERT_EQ(list.status, 200);
  ASSERT_EQ(json::parse(list.body)["sandboxes"].size(), 1u);

  auto ran = p.request("POST", "/v1/sandboxes/" + id + "/exec", tok,
                       R"({"argv": ["sh", "-c", "echo out; echo err >&2; id -u; exit 3"]})");
  ASSERT_EQ(ran.status, 200) << ran.body;
  json r = json::parse(ran.body);
  EXPECT_EQ(r["exit_code"], 3);
  EXPECT_EQ(r["stderr"], "err\n");
  const std::string out = r["stdout"];
  ASSERT_EQ(out.rfind("out\n", 0), 0u) << out;
  EXPECT_NE(std::stoi(out.substr(4)), 0) << "the sandbox never runs as root";

  // Not UTF-8: base64; stdin; env; cwd.
  ran =
      p.request("POST", "/v1/sandboxes/" + id + "/exec", tok,
                R"({"cmd": "printf '\\377\\376'; cat; echo $GREETING; pwd", "stdin": "from stdin ",
                      "env": {"GREETING": "hi"}, "cwd": "/tmp"})");
  ASSERT_EQ(ran.status, 200) << ran.body;
  r = json::parse(ran.body);
  EXPECT_TRUE(r["stdout"].is_null());
  EXPECT_EQ(r["stdout_base64"],
            "//5mcm9tIHN0ZGluIGhpCi90bXAK");  // \xff\xfe "from stdin hi\n/tmp\n"

  // A limit that ends the call is reported by name.
  ran = p.request("POST", "/v1/sandboxes/" + id + "/exec", tok,
                  R"({"argv": ["sleep", "30"], "timeout": 1})");
  ASSERT_EQ(ran.status, 200) << ran.body;
  r = json::parse(ran.body);
  EXPECT_EQ(r["timed_out"], true);
  EXPECT_EQ(r["limit"], "timeout");

  // Server-sent events: started, each write as it comes, then exit.
  auto streamed = p.request("POST", "/v1/sandboxes/" + id + "/exec", tok,
                            R"({"cmd": "echo one; sleep 0.3; echo two >&2; exit 7"})",
                            {{"Accept", "text/event-stream"}});
  ASSERT_EQ(streamed.status, 200);
  EXPECT_EQ(streamed.header("content-type"), "text/event-stream");
  const std::string& ev = streamed.body;
  const auto started = ev.find("event: started\n");
  const auto one = ev.find("event: stdout\ndata: {\"data\":\"one\\n\"}");
  const auto two = ev.find("event: stderr\ndata: {\"data\":\"two\\n\"}");
  const auto exit = ev.find("event: exit\ndata: ");
  ASSERT_NE(started, std::string::npos) << ev;
  ASSERT_NE(one, std::string::npos) << ev;
  ASSERT_NE(two, std::string::npos) << ev;
  ASSERT_NE(exit, std::string::npos) << ev;
  EXPECT_LT(started, one);
  EXPECT_LT(one, two);
  EXPECT_LT(two, exit);
  EXPECT_EQ(json::parse(ev.substr(exit + 18, ev.find('\n', exit + 18) - exit - 18))["exit_code"],
            7);

  // Files: upload, see it from a command, download, list.
  const std::string bytes("line\0with nul\n", 14);
  auto put =
      p.request("PUT", "/v1/sandboxes/" + id + "/files?path=%2Fworkspace%2Fa%20b.txt", tok, bytes);
  ASSERT_EQ(put.status, 201) << put.body;
  ran = p.request("POST", "/v1/sandboxes/" + id + "/exec", tok,
                  R"({"cmd": "wc -c < '/workspace/a b.txt'; echo made > /workspace/made"})");
  EXPECT_EQ(json::parse(ran.body)["stdout"], "14\n");
  auto got = p.request("GET", "/v1/sandboxes/" + id + "/files?path=/workspace/a%20b.txt", tok);
  ASSERT_EQ(got.status, 200);
  EXPECT_EQ(got.body, bytes);
  got = p.request("GET", "/v1/sandboxes/" + id + "/files?path=/workspace/made", tok);
  EXPECT_EQ(got.body, "made\n");
  auto ls = p.request("GET", "/v1/sandboxes/" + id + "/files:list?path=/workspace", tok);
  ASSERT_EQ(ls.status, 200) << ls.body;
  const json listed = json::parse(ls.body);
  std::set<std::string> names;
  for (const auto& e : listed["entries"]) names.insert(e["name"].get<std::string>());
  EXPECT_EQ(names, (std::set<std::string>{"a b.txt", "made"}));

  // The root is read-only, as for every tool call; the error says why.
  put = p.request("PUT", "/v1/sandboxes/" + id + "/files?path=/usr/bin/evil", tok, "x");
  EXPECT_EQ(put.status, 400);
  EXPECT_NE(put.body.find("/usr/bin/evil"), std::string::npos) << put.body;

  EXPECT_EQ(p.request("GET", "/metrics", tok).status, 403)
      << "an agent's token sees no server-wide figures";
  auto metrics = p.request("GET", "/metrics", operator_token("acme"));
  ASSERT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("ringfence_sandboxes_live{backend=\"native\"} 1"), std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find("ringfence_sandbox_setup_seconds_count 1"), std::string::npos);

  auto del = p.request("DELETE", "/v1/sandboxes/" + id, tok);
  EXPECT_EQ(del.status, 204);
  EXPECT_EQ(p.request("GET", "/v1/sandboxes/" + id, tok).status, 404);
  EXPECT_EQ(p.request("DELETE", "/v1/sandboxes/" + id, tok).status, 404);
  // Nothing of it is left on the host.
  Cli inventory({"sandbox", "list", "--backend", "native", "--json"});
  inventory.wait(30s);
  EXPECT_EQ(inventory.out().find(id), std::string::npos) << inventory.out();
}

TEST_F(ServeCli, ATokenSeesOnlyItsOwnProject) {
  const std::string a = token("alpha");
  const std::string b = token("beta");
  serve();
  const std::string id = create(a);
  ASSERT_FALSE(id.empty());
  for (const auto& [method, target, body] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"GET", "/v1/sandboxes/" + id, ""},
           {"POST", "/v1/sandboxes/" + id + "/exec", R"({"argv": ["true"]})"},
           {"GET", "/v1/sandboxes/" + id + "/files?path=/etc/hostname", ""},
           {"PUT", "/v1/sandboxes/" + id + "/files?path=/workspace/x", "x"},
           {"GET", "/v1/sandboxes/" + id + "/files:list?path=/workspace", ""},
           {"DELETE", "/v1/sandboxes/" + id, ""}}) {
    auto r = call(method, target, b, body);
    EXPECT_EQ(r.status, 404) << method << " " << target << ": " << r.body;
    EXPECT_NE(r.body.find("no sandbox " + id), std::string::npos) << r.body;
  }
  EXPECT_EQ(json::parse(call("GET", "/v1/sandboxes", b).body)["sandboxes"].size(), 0u);
  EXPECT_EQ(json::parse(call("GET", "/v1/sandboxes", a).body)["sandboxes"].size(), 1u);
  EXPECT_EQ(call("GET", "/v1/sandboxes/" + id, a).status, 200) << "B's attempts changed nothing";
}

TEST_F(ServeCli, TokensAreStoredHashedAndRevokedOrExpiredOnesAreRefused) {
  const std::string tok = token("acme", {"--name", "laptop"});
  const std::string short_lived = token("acme", {"--expires", "1s"});
  serve();
  EXPECT_EQ(call("GET", "/v1/sandboxes", tok).status, 200);
  EXPECT_EQ(call("GET", "/v1/sandboxes", short_lived).status, 200);

  // No token, a malformed header, a made-up token: 401 with a challenge and a reason.
  auto r = call("GET", "/v1/sandboxes", "");
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.header("www-authenticate"), "Bearer realm=\"ringfence\"");
  EXPECT_NE(r.body.find("no token"), std::string::npos) << r.body;
  r = call("GET", "/v1/sandboxes", "", "", {{"Authorization", "Basic YTpi"}});
  EXPECT_EQ(r.status, 401);
  r = call("GET", "/v1/sandboxes", "rft_" + std::string(43, 'A'));
  EXPECT_EQ(r.status, 401);
  EXPECT_NE(r.body.find("unknown token"), std::string::npos) << r.body;

  // Neither the store nor its log nor `token list` holds the token.
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir_)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    EXPECT_EQ(ss.str().find(tok.substr(4)), std::string::npos) << entry.path();
  }
  Cli list({"token", "list", "--state-dir", dir_, "--json"});
  ASSERT_EQ(list.wait(30s), 0);
  EXPECT_EQ(list.out().find(tok.substr(4)), std::string::npos);
  const json tokens = json::parse(list.out());
  ASSERT_EQ(tokens.size(), 2u);
  std::string id;
  for (const auto& t : tokens) {
    if (t["name"] == "laptop") id = t["id"];
  }
  ASSERT_EQ(id.rfind("tok_", 0), 0u);

  Cli revoke({"token", "revoke", id, "--state-dir", dir_});
  ASSERT_EQ(revoke.wait(30s), 0) << revoke.err();
  // The server trusts what it read for at most a second.
  std::this_thread::sleep_for(1200ms);
  r = call("GET", "/v1/sandboxes", tok);
  EXPECT_EQ(r.status, 401);
  EXPECT_NE(r.body.find("token " + id + " is revoked"), std::string::npos) << r.body;
  r = call("GET", "/v1/sandboxes", short_lived);
  EXPECT_EQ(r.status, 401);
  EXPECT_NE(r.body.find("has expired"), std::string::npos) << r.body;
  Cli again({"token", "revoke", "tok_000000000000", "--state-dir", dir_});
  EXPECT_EQ(again.wait(30s), 1);
  EXPECT_NE(again.err().find("there is no token tok_000000000000"), std::string::npos);
}

TEST_F(ServeCli, BadRequestsGetAClearErrorNamingTheField) {
  const std::string tok = token("acme");
  serve({"--max-body", "1k"});
  auto expect = [&](const HttpReply& r, int status, const std::string& field,
                    const std::string& words) {
    EXPECT_EQ(r.status, status) << r.body;
    if (r.status != status) return;
    const json j = json::parse(r.body);
    if (!field.empty()) {
      EXPECT_EQ(j.value("field", ""), field) << r.body;
    }
    EXPECT_NE(j.value("error", "").find(words), std::string::npos) << r.body;
  };
  expect(call("POST", "/v1/sandboxes", tok, "{not json"), 400, "spec", "not valid JSON");
  expect(call("POST", "/v1/sandboxes", tok, R"({"limits": {"memory": "1m"}})"), 400,
         "limits.memory", "8m");
  expect(call("POST", "/v1/sandboxes", tok, R"({"colour": "red"})"), 400, "colour",
         "unknown field");
  expect(call("POST", "/v1/sandboxes", tok, R"({"workspace": "/etc"})"), 400, "workspace",
         "set by the server");
  expect(call("POST", "/v1/sandboxes", tok, R"({"network": "host"})"), 400, "network",
         "not allowed");
  expect(call("POST", "/v1/sandboxes", tok, R"({"backend": "local"})"), 400, "backend",
         "runs native sandboxes");
  const std::string id = create(tok);
  const std::string exec = "/v1/sandboxes/" + id + "/exec";
  expect(call("POST", exec, tok, R"({"argv": "ls"})"), 400, "argv", "array of strings");
  expect(call("POST", exec, tok, R"({"argv": ["ls", 3]})"), 400, "argv[1]", "expected a string");
  expect(call("POST", exec, tok, R"({"argv": ["ls"], "cmd": "ls"})"), 400, "argv", "exactly one");
  expect(call("POST", exec, tok, R"({"cmd": "ls", "timeout": "soon"})"), 400, "timeout",
         "duration");
  expect(call("POST", exec, tok, R"({"cmd": "ls", "cwd": "relative"})"), 400, "cwd", "absolute");
  expect(call("POST", exec, tok, R"({"cmd": "ls", "sudo": true})"), 400, "sudo", "unknown field");
  expect(call("GET", "/v1/sandboxes/" + id + "/files", tok), 400, "path", "?path=");
  expect(call("GET", "/v1/sandboxes/" + id + "/files?path=%zz", tok), 400, "path",
         "percent-encoding");
  expect(call("GET", "/v1/nothing", tok), 404, "", "no such route");
  auto wrong = call("PATCH", "/v1/sandboxes/" + id, tok, "{}");
  EXPECT_EQ(wrong.status, 405);
  EXPECT_EQ(wrong.header("allow"), "GET, DELETE");

  // A body over --max-body: 413 before it is read; a head over 16 KiB: 431.
  HttpProbe big(port_);
  auto too_big = big.request("PUT", "/v1/sandboxes/" + id + "/files?path=/workspace/big", tok,
                             std::string(4096, 'x'));
  EXPECT_EQ(too_big.status, 413) << too_big.body;
  EXPECT_TRUE(big.closed_within(5s));
  HttpProbe fat(port_);
  auto fat_head =
      fat.request("GET", "/v1/sandboxes", tok, "", {{"X-Pad", std::string(20000, 'p')}});
  EXPECT_EQ(fat_head.status, 431) << fat_head.body;
  // Garbage is a 400 and the connection ends; the server goes on serving.
  HttpProbe junk(port_);
  ASSERT_TRUE(junk.send_raw("\x16\x03\x01 not http at all\r\n\r\n"));
  EXPECT_EQ(junk.read_reply(5s).status, 400);
  EXPECT_EQ(call("GET", "/v1/sandboxes/" + id, tok).status, 200);
}

TEST_F(ServeCli, SlowAndGreedyClientsAreCutOffWithoutHurtingOthers) {
  const std::string tok = token("acme");
  serve({"--request-timeout", "1s", "--max-requests-per-token", "2"});
  const std::string id = create(tok);

  // Slowloris: a head that never ends gets 408 after --request-timeout.
  HttpProbe slow(port_);
  ASSERT_TRUE(slow.send_raw("GET /v1/sandboxes HTTP/1.1\r\nHost: x\r\n"));
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 3; ++i) {
    std::this_thread::sleep_for(300ms);
    slow.send_raw("X-Drip: " + std::to_string(i) + "\r\n");
  }
  auto cut = slow.read_reply(10s);
  EXPECT_EQ(cut.status, 408);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);

  // Two calls in flight for this token; a third gets 429 and Retry-After.
  std::vector<std::unique_ptr<HttpProbe>> held;
  for (int i = 0; i < 2; ++i) {
    held.push_back(std::make_unique<HttpProbe>(port_));
    const std::string body = R"({"argv":["sleep","1.5"]})";
    ASSERT_TRUE(held.back()->send_raw(
        "POST /v1/sandboxes/" + id + "/exec HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + tok +
        "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body));
  }
  std::this_thread::sleep_for(400ms);
  auto third = call("GET", "/v1/sandboxes", tok);
  EXPECT_EQ(third.status, 429) << third.body;
  EXPECT_EQ(third.header("retry-after"), "1");
  for (auto& h : held) EXPECT_EQ(h->read_reply(10s).status, 200);
  EXPECT_EQ(call("GET", "/v1/sandboxes", tok).status, 200) << "the slots came back";

  // A streaming client that goes away ends its call.
  {
    HttpProbe gone(port_);
    const std::string body = R"({"cmd":"while :; do echo tick; sleep 0.05; done"})";
    ASSERT_TRUE(gone.send_raw("POST /v1/sandboxes/" + id +
                              "/exec HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n"
                              "Authorization: Bearer " +
                              tok + "\r\nContent-Length: " + std::to_string(body.size()) +
                              "\r\n\r\n" + body));
    std::this_thread::sleep_for(500ms);
  }
  const auto end = std::chrono::steady_clock::now() + 10s;
  int running = -1;
  while (std::chrono::steady_clock::now() < end) {
    running = json::parse(call("GET", "/v1/sandboxes/" + id, tok).body)["calls_running"];
    if (running == 0) break;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(running, 0);
}

TEST_F(ServeCli, RunsApprovalsAndAuditBelongToTheTokensProject) {
  const std::string alice = token("alpha", {"--name", "alice"});
  const std::string bob = token("alpha", {"--name", "bob"});
  const std::string other = token("beta");
  serve_only();
  Cli worker({"worker", "start", "--state-dir", dir_, "--sandbox-mode", "per_run"});
  const std::string wf = R"(name: gated
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
    template: "shipped by {{steps.gate.json.by}}"
)";
  // A workflow with a problem: 400 naming the line and key.
  auto bad = call("POST", "/v1/workflows/runs", alice,
                  json{{"workflow", "name: x\nsteps:\n  - id: a\n    mode: inproc\n"}}.dump());
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("inproc"), std::string::npos) << bad.body;
  auto started = call("POST", "/v1/workflows/runs", alice, json{{"workflow", wf}}.dump());
  ASSERT_EQ(started.status, 201) << started.body;
  const std::string run = json::parse(started.body)["id"];

  // The approval shows for alpha only; bob is not an approver; beta sees nothing.
  json pending;
  for (int i = 0; i < 200; ++i) {
    pending = json::parse(call("GET", "/v1/approvals", alice).body)["approvals"];
    if (!pending.empty()) break;
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_EQ(pending.size(), 1u) << worker.err();
  const std::string id = std::to_string(pending[0]["id"].get<int64_t>());
  EXPECT_EQ(pending[0]["request"]["message"], "Ship " + run + "?");
  EXPECT_EQ(json::parse(call("GET", "/v1/approvals", other).body)["approvals"].size(), 0u);
  EXPECT_EQ(call("POST", "/v1/approvals/" + id + ":approve", other, "{}").status, 404);
  EXPECT_EQ(call("GET", "/v1/runs/" + run, other).status, 404);
  EXPECT_EQ(call("POST", "/v1/runs/" + run + ":cancel", other, "{}").status, 404);
  EXPECT_EQ(call("POST", "/v1/runs/" + run + ":replay", other, "{}").status, 404);
  EXPECT_EQ(json::parse(call("GET", "/v1/runs", other).body)["runs"].size(), 0u);
  auto early = call("POST", "/v1/runs/" + run + ":replay", alice, "{}");
  EXPECT_EQ(early.status, 409) << "a run still waiting has nothing to replay yet";
  EXPECT_NE(early.body.find("has not ended yet"), std::string::npos) << early.body;
  auto refused = call("POST", "/v1/approvals/" + id + ":approve", bob, "{}");
  EXPECT_EQ(refused.status, 403);
  EXPECT_NE(refused.body.find("is not one of its approvers"), std::string::npos) << refused.body;
  EXPECT_EQ(call("POST", "/v1/approvals/" + id + ":deny", alice, "{}").status, 400)
      << "a denial needs a reason";

  // Follow the run's events while alice approves.
  HttpProbe follow(port_);
  ASSERT_TRUE(follow.send_raw("GET /v1/runs/" + run +
                              "/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + alice +
                              "\r\n\r\n"));
  auto ok = call("POST", "/v1/approvals/" + id + ":approve", alice, R"({"reason": "looks good"})");
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(json::parse(ok.body)["state"], "approved");
  const auto events = follow.read_reply(60s);
  ASSERT_EQ(events.status, 200);
  EXPECT_NE(events.body.find("event: end"), std::string::npos) << events.body;
  auto shown = call("GET", "/v1/runs/" + run, alice);
  ASSERT_EQ(shown.status, 200);
  const json r = json::parse(shown.body);
  EXPECT_EQ(r["state"], "succeeded") << shown.body;
  ASSERT_EQ(r["steps"].size(), 2u);
  EXPECT_EQ(r["steps"][1]["mode"], "in_process");
  EXPECT_NE(r["steps"][1]["outputs"].dump().find("shipped by token alice (tok_"), std::string::npos)
      << shown.body;

  // Replayed: a new run of the same workflow, marked as such, whose approval
  // asks a person again (never answered from the record); its run JSON says
  // what the replay did with each step.
  auto again = call("POST", "/v1/runs/" + run + ":replay", alice, "{}");
  ASSERT_EQ(again.status, 201) << again.body;
  EXPECT_EQ(json::parse(again.body)["replay_of"], run);
  const std::string second = json::parse(again.body)["id"];
  EXPECT_NE(second, run);
  json asked;
  for (int i = 0; i < 200 && asked.empty(); ++i) {
    asked = json::parse(call("GET", "/v1/approvals", alice).body)["approvals"];
    if (asked.empty()) std::this_thread::sleep_for(50ms);
  }
  ASSERT_EQ(asked.size(), 1u) << "the replay did not ask again: " << worker.err();
  EXPECT_EQ(asked[0]["run"], second);
  EXPECT_EQ(asked[0]["request"]["message"], "Ship " + second + "?");
  const std::string id2 = std::to_string(asked[0]["id"].get<int64_t>());
  ASSERT_EQ(call("POST", "/v1/approvals/" + id2 + ":approve", alice, "{}").status, 200);
  json replayed;
  for (int i = 0; i < 600; ++i) {
    replayed = json::parse(call("GET", "/v1/runs/" + second, alice).body);
    if (replayed["state"] != "queued" && replayed["state"] != "running") break;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(replayed["state"], "succeeded") << replayed.dump() << worker.err();
  EXPECT_EQ(replayed["replay_of"], run);
  EXPECT_EQ(replayed["steps"][1]["outputs"]["output"], r["steps"][1]["outputs"]["output"])
      << replayed.dump();
  EXPECT_EQ(replayed["steps"][0]["replay"]["action"], "asked again") << replayed.dump();
  EXPECT_EQ(replayed["replay"]["of"], run) << replayed.dump();
  ASSERT_EQ(replayed["replay"]["steps"].size(), 2u) << replayed.dump();
  EXPECT_EQ(replayed["replay"]["steps"][0]["step"], "gate");
  EXPECT_EQ(replayed["replay"]["steps"][0]["action"], "asked again");
  EXPECT_EQ(replayed["replay"]["steps"][1]["step"], "ship");
  EXPECT_EQ(replayed["replay"]["steps"][1]["action"], "re-run") << replayed.dump();
  EXPECT_EQ(call("GET", "/v1/runs/" + second, other).status, 404);

  // The audit chain: alpha's token sees the decision; beta's none of alpha's events.
  const json mine = json::parse(call("GET", "/v1/audit", alice).body)["events"];
  EXPECT_NE(mine.dump().find("approval.approve"), std::string::npos) << mine.dump();
  const json theirs = json::parse(call("GET", "/v1/audit", other).body)["events"];
  EXPECT_EQ(theirs.dump().find("alpha"), std::string::npos) << theirs.dump();
  EXPECT_EQ(json::parse(call("GET", "/v1/audit:verify", alice).body)["intact"], true);
  worker.signal(SIGTERM);
  worker.wait(30s);
}

TEST_F(ServeCli, CallsGoToTheWorkersAndComeBackRedacted) {
  const std::string tok = token("acme");
  const std::string other = token("beta");
  const std::string secret = "sk-live-0123456789abcdefXYZ";
  ASSERT_NO_FATAL_FAILURE(project_key("acme", secret));
  serve_only();
  Cli worker({"worker", "start", "--state-dir", dir_, "--sandbox-mode", "per_run", "--worker-id",
              "w-redact"});

  auto made = call("POST", "/v1/calls", tok,
                   R"({"run": "r1", "cmd": "echo hello; echo $API_KEY; echo err >&2; exit 3",
                       "identity": {}})");
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string id = std::to_string(json::parse(made.body)["id"].get<int64_t>());
  // Followed as server-sent events to its end.
  HttpProbe follow(port_);
  auto events =
      follow.request("GET", "/v1/calls/" + id, tok, "", {{"Accept", "text/event-stream"}}, 60s);
  ASSERT_EQ(events.status, 200);
  EXPECT_NE(events.body.find("event: stdout\ndata: {\"data\":\"hello\\n"), std::string::npos)
      << events.body;
  EXPECT_NE(events.body.find("event: end"), std::string::npos) << events.body;
  EXPECT_EQ(events.body.find(secret), std::string::npos) << "the value never leaves";
  // Then as one JSON answer.
  auto shown = call("GET", "/v1/calls/" + id, tok);
  ASSERT_EQ(shown.status, 200);
  const json j = json::parse(shown.body);
  EXPECT_EQ(j["state"], "done");
  EXPECT_EQ(j["exit_code"], 3);
  EXPECT_EQ(j["stderr"], "err\n");
  EXPECT_NE(j["stdout"].get<std::string>().find("[REDACTED:API_KEY]"), std::string::npos)
      << shown.body;
  EXPECT_EQ(shown.body.find(secret), std::string::npos);
  // The worker's figures count the redaction (its next heartbeat, within a second).
  std::string metrics;
  const std::string redacted = R"(ringfence_redactions_total{worker="w-redact"} 1)";
  const std::string op = operator_token("ops");
  for (int i = 0; i < 100 && metrics.find(redacted) == std::string::npos; ++i) {
    if (i) std::this_thread::sleep_for(100ms);
    metrics = call("GET", "/metrics", op).body;
  }
  EXPECT_NE(metrics.find(redacted + "\n"), std::string::npos) << metrics;
  EXPECT_EQ(metrics.find(secret), std::string::npos);
  // Another project: 404; bad input: 400 naming the field.
  EXPECT_EQ(call("GET", "/v1/calls/" + id, other).status, 404);
  auto bad = call("POST", "/v1/calls", tok, R"({"cmd": "true"})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("\"field\":\"run\""), std::string::npos) << bad.body;
  // A revoked secret: the call is refused before it is queued, naming key and secret.
  Cli revoke({"secret", "revoke", "acme-key", "--state-dir", dir_});
  ASSERT_EQ(revoke.wait(30s), 0) << revoke.err();
  auto refused =
      call("POST", "/v1/calls", tok, R"({"run": "r2", "argv": ["true"], "identity": {}})");
  EXPECT_EQ(refused.status, 403) << refused.body;
  EXPECT_NE(refused.body.find("acme-key"), std::string::npos) << refused.body;
  worker.signal(SIGTERM);
  worker.wait(30s);
}

// `ringfence call --api` (issue 40): the same call through serve, with no
// store and no store credentials on the client, only the project's token in
// the environment (never argv). Output streams back redacted, the exit code
// is the command's, and each way it can fail has its own exit code.
TEST_F(ServeCli, CallThroughServeNeedsOnlyTheProjectsToken) {
  const std::string tok = token("acme");
  const std::string secret = "sk-live-0123456789abcdefXYZ";
  ASSERT_NO_FATAL_FAILURE(project_key("acme", secret));
  serve_only();
  Cli worker({"worker", "start", "--state-dir", dir_, "--sandbox-mode", "per_run"});
  const std::string api = "http://127.0.0.1:" + std::to_string(port_);
  const std::string env = "RINGFENCE_TOKEN=" + tok;
  // A client in another directory: no state dir, no store here.
  {
    Cli c({"call", "--api", api, "--run", "r1", "--identity", "--", "sh", "-c",
           "echo hello; echo $API_KEY; echo err >&2; exit 3"},
          std::nullopt, {env, "HOME=" + dir_ + "/nohome"});
    EXPECT_EQ(c.wait(60s), 3) << c.err();
    EXPECT_EQ(c.out(), "hello\n[REDACTED:API_KEY]\n");
    EXPECT_NE(c.err().find("err\n"), std::string::npos) << c.err();
    EXPECT_EQ(c.out().find(secret) + c.err().find(secret), 2 * std::string::npos);
    EXPECT_FALSE(std::filesystem::exists(dir_ + "/nohome")) << "nothing written on the client";
  }
  // stdin that is not UTF-8 comes back byte for byte; the token from a file.
  {
    const std::string bytes("\xff\x00\xfe-end", 6);
    std::ofstream(dir_ + "/in", std::ios::binary) << bytes;
    std::ofstream(dir_ + "/token") << tok << "\n";
    Cli c({"call", "--api", api + "/", "--token-file", dir_ + "/token", "--run", "r1", "--stdin",
           dir_ + "/in", "--", "cat"});
    EXPECT_EQ(c.wait(60s), 0) << c.err();
    EXPECT_EQ(c.out(), bytes);
  }
  // A command that cannot start says why, as the store path does.
  {
    Cli c({"call", "--api", api, "--run", "r1", "--", "no-such-command"}, std::nullopt, {env});
    EXPECT_EQ(c.wait(60s), 127);
    EXPECT_NE(c.err().find("no-such-command: command not found"), std::string::npos) << c.err();
  }
  // Refused before anything is queued: a forged token (125), no token, a
  // flag of the store path, a token in argv (2), nobody listening (122).
  {
    Cli c({"call", "--api", api, "--run", "r1", "--", "true"}, std::nullopt,
          {"RINGFENCE_TOKEN=rft_forged"});
    EXPECT_EQ(c.wait(30s), 125);
    EXPECT_NE(c.err().find("HTTP 401"), std::string::npos) << c.err();
    EXPECT_NE(c.err().find("the call was never queued"), std::string::npos) << c.err();
    EXPECT_EQ(c.err().find("rft_forged"), std::string::npos) << "the token is never echoed";
  }
  {
    Cli c({"call", "--api", api, "--run", "r1", "--", "true"}, std::nullopt, {"RINGFENCE_TOKEN="});
    EXPECT_EQ(c.wait(30s), 2);
    EXPECT_NE(c.err().find("RINGFENCE_TOKEN"), std::string::npos) << c.err();
  }
  {
    Cli c({"call", "--api", api, "--project", "beta", "--run", "r1", "--", "true"}, std::nullopt,
          {env});
    EXPECT_EQ(c.wait(30s), 2);
    EXPECT_NE(c.err().find("--project goes with the store, not --api"), std::string::npos)
        << c.err();
  }
  {
    Cli c({"call", "--api", api, "--token", tok, "--run", "r1", "--", "true"});
    EXPECT_EQ(c.wait(30s), 2) << "no flag takes a token";
  }
  {
    Cli c({"call", "--api", "http://127.0.0.1:1", "--run", "r1", "--", "true"}, std::nullopt,
          {env});
    EXPECT_EQ(c.wait(30s), 122);
    EXPECT_NE(c.err().find("the call was never queued"), std::string::npos) << c.err();
  }
  // serve gone mid-call: queued, outcome unknown here (123), and the call
  // went on (the worker finished it).
  {
    Cli c({"call", "--api", api, "--run", "r-gone", "--", "sh", "-c", "echo started; sleep 2"},
          std::nullopt, {env});
    ASSERT_TRUE(c.stdout_shows("started", 60s)) << c.err();
    server_->signal(SIGKILL);
    (void)server_->wait(30s);
    server_.reset();
    EXPECT_EQ(c.wait(30s), 123);
    EXPECT_NE(c.err().find("was queued and its outcome is unknown here"), std::string::npos)
        << c.err();
  }
  worker.signal(SIGTERM);
  EXPECT_EQ(worker.wait(60s), 0) << worker.err();
}

// Issue 41, lifetimes: a sandbox lives its timeout (the policy's default, at
// most its maximum), can be given a new one, ends when idle if asked, and is
// found again by name or metadata; its end is audited with the reason, and a
// call in flight when it expires says so.
TEST_F(ServeCli, SandboxesLiveTheirTimeoutAndAreFoundByNameAndMetadata) {
  const std::string tok = token("acme");
  const std::string other = token("beta");
  policy("acme", {"--sandbox-timeout", "30m", "--sandbox-timeout-max", "2h"});
  serve();
  auto sandbox_of = [](const HttpReply& r) { return json::parse(r.body); };

  // The policy's default, and its maximum.
  auto plain = call("POST", "/v1/sandboxes", tok, "{}");
  ASSERT_EQ(plain.status, 201) << plain.body;
  const json p = sandbox_of(plain);
  const int64_t lives = p["expires_at"].get<int64_t>() - p["created_at"].get<int64_t>();
  EXPECT_GE(lives, 30 * 60 * 1000);
  EXPECT_LT(lives, 31 * 60 * 1000);
  EXPECT_TRUE(p["name"].is_null());
  EXPECT_EQ(p["metadata"], json::object());
  auto too_long = call("POST", "/v1/sandboxes", tok, R"({"timeout": "3h"})");
  EXPECT_EQ(too_long.status, 403) << too_long.body;
  EXPECT_NE(too_long.body.find("above the most a sandbox may live, 2h, set by the operator "
                               "policy of project acme"),
            std::string::npos)
      << too_long.body;
  EXPECT_NE(too_long.body.find("\"field\":\"timeout\""), std::string::npos);

  // Bad lifetime fields name the field.
  for (const auto& [body, field] : std::vector<std::pair<std::string, std::string>>{
           {R"({"name": "../x"})", "name"},
           {R"({"name": 7})", "name"},
           {R"({"metadata": {"team": 1}})", "metadata.team"},
           {R"({"metadata": ["a"]})", "metadata"},
           {R"({"timeout": -1})", "timeout"},
           {R"({"idle_timeout": "soon"})", "idle_timeout"}}) {
    auto r = call("POST", "/v1/sandboxes", tok, body);
    EXPECT_EQ(r.status, 400) << body << " " << r.body;
    EXPECT_NE(r.body.find("\"field\":\"" + field + "\""), std::string::npos) << r.body;
  }

  // Named, with metadata: unique in the project, found by name and metadata;
  // another project's same name is its own.
  auto dev = call("POST", "/v1/sandboxes", tok,
                  R"({"name": "dev", "metadata": {"team": "a", "tier": "gold"}})");
  ASSERT_EQ(dev.status, 201) << dev.body;
  const std::string dev_id = sandbox_of(dev)["id"];
  auto twice = call("POST", "/v1/sandboxes", tok, R"({"name": "dev"})");
  EXPECT_EQ(twice.status, 409) << twice.body;
  EXPECT_NE(twice.body.find("\"field\":\"name\""), std::string::npos) << twice.body;
  auto theirs = call("POST", "/v1/sandboxes", other, R"({"name": "dev"})");
  ASSERT_EQ(theirs.status, 201) << theirs.body;
  const std::string their_id = sandbox_of(theirs)["id"];
  auto ids = [&](const std::string& query, const std::string& t) {
    auto r = call("GET", "/v1/sandboxes" + query, t);
    EXPECT_EQ(r.status, 200) << query << " " << r.body;
    std::vector<std::string> out;
    if (r.status == 200) {
      const json listed = json::parse(r.body);
      for (const auto& s : listed["sandboxes"]) out.push_back(s["id"]);
    }
    return out;
  };
  EXPECT_EQ(ids("?name=dev", tok), std::vector<std::string>{dev_id});
  EXPECT_EQ(ids("?name=dev", other), std::vector<std::string>{their_id});
  EXPECT_EQ(ids("?metadata=team%3Da%26tier%3Dgold", tok), std::vector<std::string>{dev_id});
  EXPECT_TRUE(ids("?metadata=team%3Db", tok).empty());
  EXPECT_TRUE(ids("?metadata=team%3Da", other).empty());
  EXPECT_TRUE(ids("?state=paused", tok).empty());
  EXPECT_EQ(ids("?state=running", tok).size(), 2u);
  EXPECT_EQ(call("GET", "/v1/sandboxes?state=asleep", tok).status, 400);

  // A new timeout from now: bounded, unknown and other projects' ids are 404.
  auto longer = call("PUT", "/v1/sandboxes/" + dev_id + "/timeout", tok, R"({"timeout": "90m"})");
  ASSERT_EQ(longer.status, 200) << longer.body;
  EXPECT_GT(sandbox_of(longer)["expires_at"].get<int64_t>(),
            sandbox_of(dev)["expires_at"].get<int64_t>());
  EXPECT_EQ(call("PUT", "/v1/sandboxes/" + dev_id + "/timeout", tok, R"({"timeout": "3h"})").status,
            403);
  EXPECT_EQ(
      call("PUT", "/v1/sandboxes/" + dev_id + "/timeout", tok, R"({"timeout": 5, "x": 1})").status,
      400);
  EXPECT_EQ(
      call("PUT", "/v1/sandboxes/" + their_id + "/timeout", tok, R"({"timeout": "1m"})").status,
      404);
  EXPECT_EQ(call("PUT", "/v1/sandboxes/rf-nosuch/timeout", tok, R"({"timeout": "1m"})").status,
            404);

  // Ends when its timeout runs out, and a call in flight says so.
  auto brief = call("POST", "/v1/sandboxes", tok, R"({"timeout": 2})");
  ASSERT_EQ(brief.status, 201) << brief.body;
  const std::string brief_id = sandbox_of(brief)["id"];
  auto cut =
      call("POST", "/v1/sandboxes/" + brief_id + "/exec", tok, R"({"argv": ["sleep", "60"]})");
  EXPECT_NE(cut.body.find("expired (its timeout ran out)"), std::string::npos) << cut.body;
  // Idle: a call longer than the idle timeout keeps it; quiet after, it ends.
  auto idle = call("POST", "/v1/sandboxes", tok, R"({"idle_timeout": 1})");
  ASSERT_EQ(idle.status, 201) << idle.body;
  const std::string idle_id = sandbox_of(idle)["id"];
  auto busy =
      call("POST", "/v1/sandboxes/" + idle_id + "/exec", tok, R"({"argv": ["sleep", "2"]})");
  ASSERT_EQ(busy.status, 200) << busy.body;
  EXPECT_EQ(json::parse(busy.body)["exit_code"], 0) << "not idle while a call runs";
  // The call ends as its sandbox is destroyed; the audit event follows.
  std::map<std::string, std::string> why;
  for (int i = 0; i < 300 && (why[brief_id].empty() || why[idle_id].empty()); ++i) {
    if (i > 0) std::this_thread::sleep_for(100ms);
    const json audit = json::parse(call("GET", "/v1/audit", tok).body);
    for (const auto& e : audit["events"]) {
      if (e["kind"] == "sandbox.destroy" && e.contains("sandbox") && e["detail"].is_object())
        why[e["sandbox"]] = e["detail"].value("reason", "") + "/" + e["detail"].value("by", "");
    }
  }
  EXPECT_EQ(why[brief_id], "timeout/expiry");
  EXPECT_EQ(why[idle_id], "idle/expiry");
  EXPECT_EQ(call("GET", "/v1/sandboxes/" + idle_id, tok).status, 404);
  EXPECT_EQ(call("GET", "/v1/sandboxes/" + brief_id, tok).status, 404);
  auto all = ids("", tok);
  EXPECT_EQ(
      std::count(all.begin(), all.end(), idle_id) + std::count(all.begin(), all.end(), brief_id),
      0);
  // The others live on.
  EXPECT_EQ(call("GET", "/v1/sandboxes/" + dev_id, tok).status, 200);

  // Defaults set at creation: where calls run and what they see, unless a
  // call says otherwise (that call only).
  auto homed = call("POST", "/v1/sandboxes", tok, R"({"cwd": "/tmp", "env": {"GREETING": "hi"}})");
  ASSERT_EQ(homed.status, 201) << homed.body;
  const std::string homed_id = sandbox_of(homed)["id"];
  EXPECT_EQ(sandbox_of(homed)["cwd"], "/tmp");
  auto run = [&](const std::string& body) {
    auto r = call("POST", "/v1/sandboxes/" + homed_id + "/exec", tok, body);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.status == 200 ? json::parse(r.body)["stdout"].get<std::string>() : "";
  };
  EXPECT_EQ(run(R"({"cmd": "pwd; echo $GREETING"})"), "/tmp\nhi\n");
  EXPECT_EQ(
      run(R"({"cmd": "pwd; echo $GREETING", "cwd": "/workspace", "env": {"GREETING": "yo"}})"),
      "/workspace\nyo\n");
  EXPECT_EQ(run(R"({"cmd": "pwd"})"), "/tmp\n") << "the call's own cwd was its alone";
  auto relative = call("POST", "/v1/sandboxes", tok, R"({"cwd": "tmp"})");
  EXPECT_EQ(relative.status, 400);
  EXPECT_NE(relative.body.find("\"field\":\"cwd\""), std::string::npos) << relative.body;
}

// Issue 41, files: stat and a listing to a depth, each path resolved inside
// the sandbox (a symlink to "/" is listed, never followed); bad depths and
// trees beyond the bound are 400s naming depth, another project's sandbox a 404.
TEST_F(ServeCli, FilesAreStatedAndListedToADepthInsideTheSandbox) {
  const std::string tok = token("acme");
  const std::string other = token("beta");
  serve();
  const std::string id = create(tok);
  auto made = call(
      "POST", "/v1/sandboxes/" + id + "/exec", tok,
      R"({"cmd": "mkdir -p /workspace/a/b/c && printf hi > /workspace/a/b/c/f && ln -s / /workspace/a/root-link && mkdir /workspace/m && cd /workspace/m && seq 1 10001 | xargs touch"})");
  ASSERT_EQ(made.status, 200) << made.body;
  ASSERT_EQ(json::parse(made.body)["exit_code"], 0) << made.body;
  auto stat = [&](const std::string& path, const std::string& t = "") {
    return call("GET", "/v1/sandboxes/" + id + "/files:stat?path=" + path, t.empty() ? tok : t);
  };
  auto f = stat("/workspace/a/b/c/f");
  ASSERT_EQ(f.status, 200) << f.body;
  EXPECT_EQ(json::parse(f.body)["type"], "file");
  EXPECT_EQ(json::parse(f.body)["size"], 2);
  EXPECT_EQ(json::parse(stat("/workspace/a").body)["type"], "dir");
  EXPECT_EQ(json::parse(stat("/workspace/a/root-link").body)["type"], "symlink");
  auto missing = stat("/workspace/nope");
  EXPECT_EQ(missing.status, 404);
  EXPECT_NE(missing.body.find("/workspace/nope"), std::string::npos) << missing.body;
  EXPECT_EQ(stat("/workspace/a", other).status, 404) << "another project's sandbox is unknown";

  auto names = [&](const std::string& query) {
    auto r = call("GET", "/v1/sandboxes/" + id + "/files:list?path=/workspace/a" + query, tok);
    EXPECT_EQ(r.status, 200) << r.body;
    std::vector<std::string> out;
    if (r.status == 200) {
      const json listed = json::parse(r.body);
      for (const auto& e : listed["entries"]) out.push_back(e["name"]);
    }
    return out;
  };
  EXPECT_EQ(names(""), (std::vector<std::string>{"b", "root-link"}));
  EXPECT_EQ(names("&depth=2"), (std::vector<std::string>{"b", "root-link", "b/c"}));
  // All of it: the symlink to "/" is an entry, not a way out.
  EXPECT_EQ(names("&depth=16"), (std::vector<std::string>{"b", "root-link", "b/c", "b/c/f"}));
  for (const char* bad : {"0", "17", "x", ""}) {
    auto r =
        call("GET", "/v1/sandboxes/" + id + "/files:list?path=/workspace&depth=" + std::string(bad),
             tok);
    EXPECT_EQ(r.status, 400) << bad;
    EXPECT_NE(r.body.find("\"field\":\"depth\""), std::string::npos) << r.body;
  }
  auto many = call("GET", "/v1/sandboxes/" + id + "/files:list?path=/workspace/m", tok);
  EXPECT_EQ(many.status, 400) << many.body.substr(0, 200);
  EXPECT_NE(many.body.find("more than 10000 entries under /workspace/m"), std::string::npos)
      << many.body.substr(0, 300);
}

// Issue 41, files: directories made, paths removed and renamed, each
// resolved inside the sandbox by its tool runner (protocol 0.4): a symlink to
// "/" is removed itself, a symlink into the read-only root leads nowhere
// writable, a rename across its mounts fails; every refusal is a 400 naming
// what, another project's sandbox a 404.
TEST_F(ServeCli, FilesAreMadeRemovedAndMovedInsideTheSandbox) {
  const std::string tok = token("acme");
  const std::string other = token("beta");
  serve();
  const std::string id = create(tok);
  const std::string base = "/v1/sandboxes/" + id;
  auto type_of = [&](const std::string& path) {
    auto r = call("GET", base + "/files:stat?path=" + path, tok);
    return r.status == 200 ? json::parse(r.body)["type"].get<std::string>() : std::string("none");
  };
  EXPECT_EQ(call("POST", base + "/files:mkdir?path=/workspace/x", tok).status, 201);
  auto again = call("POST", base + "/files:mkdir?path=/workspace/x", tok);
  EXPECT_EQ(again.status, 400);
  EXPECT_NE(again.body.find("File exists"), std::string::npos) << again.body;
  EXPECT_EQ(call("POST", base + "/files:mkdir?path=/workspace/x", tok).status, 400);
  EXPECT_EQ(call("POST", base + "/files:mkdir?path=/workspace/p/q/r&parents=true", tok).status,
            201);
  EXPECT_EQ(type_of("/workspace/p/q/r"), "dir");
  EXPECT_EQ(call("POST", base + "/files:mkdir?path=/workspace/y&parents=yes", tok).status, 400);

  ASSERT_EQ(call("PUT", base + "/files?path=/workspace/x/f", tok, "data").status, 201);
  auto moved = call("POST", base + "/files:move", tok,
                    R"({"from": "/workspace/x/f", "to": "/workspace/p/g"})");
  EXPECT_EQ(moved.status, 200) << moved.body;
  EXPECT_EQ(type_of("/workspace/x/f"), "none");
  EXPECT_EQ(type_of("/workspace/p/g"), "file");
  // Into the read-only root, or across the sandbox's mounts: refused.
  auto ro =
      call("POST", base + "/files:move", tok, R"({"from": "/workspace/p/g", "to": "/usr/g"})");
  EXPECT_EQ(ro.status, 400) << ro.body;
  auto across = call("POST", base + "/files:move", tok,
                     R"({"from": "/workspace/p/g", "to": "/workspace/../../../tmp/g"})");
  EXPECT_EQ(across.status, 400) << across.body;
  EXPECT_EQ(type_of("/workspace/p/g"), "file") << "nothing moved";
  for (const char* body :
       {R"({"from": "/workspace/p/g"})", R"({"from": "/workspace/p/g", "to": "rel"})",
        R"({"from": "/workspace/p/g", "to": "/workspace/h", "x": 1})"}) {
    EXPECT_EQ(call("POST", base + "/files:move", tok, body).status, 400) << body;
  }

  // Symlinks: the link is removed, never what it names; a directory through
  // a link into the read-only root cannot be made.
  auto links = call("POST", base + "/exec", tok,
                    R"({"cmd": "ln -s / /workspace/out && ln -s /usr /workspace/usrlink"})");
  ASSERT_EQ(json::parse(links.body)["exit_code"], 0) << links.body;
  EXPECT_EQ(call("DELETE", base + "/files?path=/workspace/out&recursive=true", tok).status, 204);
  EXPECT_EQ(type_of("/workspace/out"), "none");
  EXPECT_EQ(type_of("/usr/bin"), "dir") << "what the link named is untouched";
  auto through = call("POST", base + "/files:mkdir?path=/workspace/usrlink/made", tok);
  EXPECT_EQ(through.status, 400) << through.body;
  EXPECT_NE(through.body.find("Read-only file system"), std::string::npos) << through.body;

  // A directory with things in it goes only when asked recursively.
  auto full = call("DELETE", base + "/files?path=/workspace/p", tok);
  EXPECT_EQ(full.status, 400);
  EXPECT_NE(full.body.find("Directory not empty"), std::string::npos) << full.body;
  EXPECT_EQ(call("DELETE", base + "/files?path=/workspace/p&recursive=maybe", tok).status, 400);
  EXPECT_EQ(call("DELETE", base + "/files?path=/workspace/p&recursive=true", tok).status, 204);
  EXPECT_EQ(type_of("/workspace/p"), "none");
  EXPECT_EQ(call("DELETE", base + "/files?path=/workspace/p", tok).status, 400) << "gone already";

  // Another project's sandbox is unknown.
  EXPECT_EQ(call("DELETE", base + "/files?path=/workspace/x", other).status, 404);
  EXPECT_EQ(call("POST", base + "/files:mkdir?path=/workspace/z", other).status, 404);
  EXPECT_EQ(type_of("/workspace/x"), "dir");
}

// Issue 41 from the CLI: `sandbox create | find | set-timeout | delete
// --api`, with the project's token in the environment only.
TEST_F(ServeCli, TheCliMakesFindsExtendsAndDeletesSandboxesThroughServe) {
  const std::string tok = token("acme");
  serve();
  const std::string api = "http://127.0.0.1:" + std::to_string(port_);
  const std::vector<std::string> env = {"RINGFENCE_TOKEN=" + tok};
  auto cli = [&](std::vector<std::string> args) {
    args.insert(args.begin(), "sandbox");
    args.push_back("--api");
    args.push_back(api);
    return std::make_unique<Cli>(args, std::nullopt, env);
  };
  auto made = cli({"create", "--name", "dev", "--metadata", "team=a", "--timeout", "20m", "--cwd",
                   "/tmp", "--env", "GREETING=hi"});
  ASSERT_EQ(made->wait(60s), 0) << made->err();
  std::string id = made->out();
  while (!id.empty() && id.back() == '\n') id.pop_back();
  ASSERT_EQ(id.rfind("rf-", 0), 0u) << id;
  auto found = cli({"find", "--name", "dev"});
  ASSERT_EQ(found->wait(30s), 0) << found->err();
  EXPECT_NE(found->out().find(id), std::string::npos) << found->out();
  EXPECT_NE(found->out().find("{\"team\":\"a\"}"), std::string::npos) << found->out();
  auto none = cli({"find", "--metadata", "team=b", "--json"});
  ASSERT_EQ(none->wait(30s), 0) << none->err();
  EXPECT_EQ(none->out(), "[]\n");
  auto later = cli({"set-timeout", id, "90m"});
  ASSERT_EQ(later->wait(30s), 0) << later->err();
  EXPECT_NE(later->out().find(id + " expires at 20"), std::string::npos) << later->out();
  auto too_long = cli({"set-timeout", id, "48h"});
  EXPECT_EQ(too_long->wait(30s), 2);
  EXPECT_NE(too_long->err().find("HTTP 403"), std::string::npos) << too_long->err();
  auto bad = cli({"create", "--metadata", "novalue"});
  EXPECT_EQ(bad->wait(30s), 2);
  EXPECT_NE(bad->err().find("--metadata"), std::string::npos) << bad->err();
  auto bad_env = cli({"create", "--env", "=s3cret-value"});
  EXPECT_EQ(bad_env->wait(30s), 2);
  EXPECT_NE(bad_env->err().find("--env"), std::string::npos) << bad_env->err();
  EXPECT_EQ(bad_env->err().find("s3cret-value"), std::string::npos) << "a value is never echoed";
  auto bad_name = cli({"create", "--name", "../x"});
  EXPECT_EQ(bad_name->wait(30s), 2);
  EXPECT_NE(bad_name->err().find("--name"), std::string::npos) << bad_name->err();
  auto gone = cli({"delete", id});
  ASSERT_EQ(gone->wait(30s), 0) << gone->err();
  auto again = cli({"delete", id});
  EXPECT_EQ(again->wait(30s), 2);
  EXPECT_NE(again->err().find("HTTP 404"), std::string::npos) << again->err();
  // No token: a usage error naming where the token is looked for.
  Cli untokened({"sandbox", "find", "--api", api}, std::nullopt, {"RINGFENCE_TOKEN="});
  EXPECT_EQ(untokened.wait(30s), 2);
  EXPECT_NE(untokened.err().find("RINGFENCE_TOKEN"), std::string::npos) << untokened.err();
}

// GET /v1/fleet (an operator's route: it names hosts) shows the workers
// that may serve a project, with that project's load only; a call's
// "requires" routes it by label, and bad labels get a 400 naming the field
// (issue 16).
TEST_F(ServeCli, TheFleetAndCallsRoutedByLabel) {
  const std::string tok = token("acme");
  const std::string op = operator_token("ops");
  serve_only();
  Cli gpu({"worker", "start", "--state-dir", dir_, "--sandbox-mode", "none", "--worker-id", "w-gpu",
           "--host-id", "rack1", "--label", "gpu=true"});
  Cli pinned({"worker", "start", "--state-dir", dir_, "--sandbox-mode", "per_worker", "--project",
              "beta", "--worker-id", "w-beta"});
  json fleet;
  for (int i = 0; i < 200; ++i) {
    if (i) std::this_thread::sleep_for(50ms);
    auto got = call("GET", "/v1/fleet?project=acme", op);
    ASSERT_EQ(got.status, 200) << got.body;
    fleet = json::parse(got.body);
    if (fleet["live_workers"] == 1) break;
  }
  ASSERT_EQ(fleet["workers"].size(), 1u) << fleet.dump();  // w-beta serves beta only
  EXPECT_EQ(fleet["workers"][0]["id"], "w-gpu");
  EXPECT_EQ(fleet["workers"][0]["host_id"], "rack1");
  EXPECT_EQ(fleet["workers"][0]["labels"], (json{{"gpu", "true"}}));
  EXPECT_EQ(fleet["workers"][0]["live"], true);
  auto made =
      call("POST", "/v1/calls", tok,
           R"({"run": "r1", "argv": ["echo", "on gpu"], "requires": {"labels": {"gpu": "true"}}})");
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string id = std::to_string(json::parse(made.body)["id"].get<int64_t>());
  json shown;
  for (int i = 0; i < 200; ++i) {
    if (i) std::this_thread::sleep_for(50ms);
    shown = json::parse(call("GET", "/v1/calls/" + id, tok).body);
    if (shown["state"] == "done") break;
  }
  EXPECT_EQ(shown["state"], "done") << shown.dump();
  EXPECT_EQ(shown["stdout"], "on gpu\n");
  // Beta sees w-beta (and w-gpu, which serves every project), none of acme's load.
  EXPECT_EQ(call("GET", "/v1/fleet", tok).status, 403) << "an agent's token sees no fleet";
  auto beta_fleet = json::parse(call("GET", "/v1/fleet?project=beta", op).body);
  EXPECT_EQ(beta_fleet["workers"].size(), 2u) << beta_fleet.dump();
  for (const auto& w : beta_fleet["workers"]) EXPECT_EQ(w["held_calls"], 0);
  auto bad = call("POST", "/v1/calls", tok,
                  R"({"run": "r2", "argv": ["true"], "requires": {"labels": {"gpu": true}}})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("\"field\":\"requires.labels.gpu\""), std::string::npos) << bad.body;
  bad = call("POST", "/v1/calls", tok,
             R"({"run": "r2", "argv": ["true"], "requires": {"zone": "b"}})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("\"field\":\"requires.zone\""), std::string::npos) << bad.body;
  EXPECT_EQ(call("POST", "/v1/fleet", op, "{}").status, 405);
  gpu.signal(SIGTERM);
  pinned.signal(SIGTERM);
  gpu.wait(30s);
  pinned.wait(30s);
}

// /metrics shows what serve's own sandboxes did (egress decisions) and, from
// the store, each live worker's figures as its heartbeat wrote them: calls by
// outcome, its pool, its mode and backend, labelled with the worker's id. A
// stopped worker drops out.
TEST_F(ServeCli, MetricsCountEgressDecisionsAndShowEachLiveWorker) {
  const std::string tok = token("acme");
  // An origin on loopback the sandbox may reach through the proxy.
  const int origin = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(origin, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(origin, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(origin, 8), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(origin, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int origin_port = ntohs(addr.sin_port);
  std::thread answer([origin] {
    pollfd p{origin, POLLIN, 0};
    if (::poll(&p, 1, 30'000) != 1) return;
    const int c = ::accept(origin, nullptr, nullptr);
    if (c < 0) return;
    char buf[4096];
    (void)!::read(c, buf, sizeof buf);
    const std::string reply = "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok";
    (void)!::write(c, reply.data(), reply.size());
    ::close(c);
  });
  const std::string allow = "127.0.0.1:" + std::to_string(origin_port);
  // Loopback is no tenant's to reach unless the operator lists it: acme may
  // reach this one origin, beta nothing on loopback.
  policy("acme", {"--egress-allow", allow});
  // The API's sandbox lives on this worker (issue 39): its egress is the worker's.
  worker_ = start_door_worker(dir_, {"--worker-id", "w-metrics", "--pool-target", "1"});
  serve_only();
  auto refused = call("POST", "/v1/sandboxes", token("beta"),
                      R"({"network": "proxy", "allow": [")" + allow + R"("]})");
  EXPECT_EQ(refused.status, 403) << refused.body;
  const std::string id = create(tok, R"({"network": "proxy", "allow": [")" + allow + R"("]})");
  // --noproxy "": through the proxy even to loopback (NO_PROXY names it).
  auto code = [&](const std::string& url) {
    auto r =
        call("POST", "/v1/sandboxes/" + id + "/exec", tok,
             json{{"argv",
                   {"curl", "-s", "--noproxy", "", "-o", "/dev/null", "-w", "%{http_code}", url}}}
                 .dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body).value("stdout", "");
  };
  EXPECT_EQ(code("http://" + allow + "/"), "200");
  EXPECT_EQ(code("http://refused.test/"), "403");
  answer.join();
  ::close(origin);
  Cli& worker = *worker_;

  auto made = call("POST", "/v1/calls", tok, R"({"run": "r1", "argv": ["true"]})");
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string call_id = std::to_string(json::parse(made.body)["id"].get<int64_t>());
  std::string metrics;
  auto has = [&](const std::string& line) {
    return metrics.find(line + "\n") != std::string::npos;
  };
  const auto end = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < end) {
    metrics = call("GET", "/metrics", operator_token("ops")).body;
    if (has(R"(ringfence_worker_calls_total{worker="w-metrics",outcome="finished"} 3)") &&
        has(R"(ringfence_worker_pool_ready{worker="w-metrics"} 1)"))
      break;
    std::this_thread::sleep_for(100ms);
  }
  // The two API calls and the queued one, all through the worker's guarded path.
  EXPECT_TRUE(has(R"(ringfence_egress_decisions_total{worker="w-metrics",decision="allowed"} 1)"))
      << metrics;
  EXPECT_TRUE(has(R"(ringfence_egress_decisions_total{worker="w-metrics",decision="refused"} 1)"))
      << metrics;
  EXPECT_TRUE(has("ringfence_workers_live 1")) << metrics;
  EXPECT_TRUE(has(R"(ringfence_worker_calls_total{worker="w-metrics",outcome="finished"} 3)"))
      << metrics;
  EXPECT_TRUE(has(
      R"(ringfence_worker_info{worker="w-metrics",mode="per_run",backend="native",version=")" RF_VERSION
      R"("} 1)"))
      << metrics;
  EXPECT_TRUE(has(R"(ringfence_worker_pool_ready{worker="w-metrics"} 1)")) << metrics;
  EXPECT_TRUE(has(R"(ringfence_worker_pool_target{worker="w-metrics"} 1)")) << metrics;
  EXPECT_TRUE(has("# TYPE ringfence_worker_calls_total counter")) << metrics;
  EXPECT_TRUE(has("# TYPE ringfence_worker_pool_ready gauge")) << metrics;
  EXPECT_TRUE(has("ringfence_calls_queued 0")) << metrics;
  // Stopped: out of the figures at once.
  worker.signal(SIGTERM);
  EXPECT_EQ(worker.wait(30s), 0) << worker.err();
  worker_.reset();
  metrics = call("GET", "/metrics", operator_token("ops")).body;
  EXPECT_TRUE(has("ringfence_workers_live 0")) << metrics;
  EXPECT_EQ(metrics.find("w-metrics"), std::string::npos) << metrics;
}

// HTTPS: `serve --tls-cert --tls-key` answers over TLS with that certificate
// (curl verifies it), streams server-sent events through it, and keeps
// OpenSSL in ringfence-serve-tls: serve itself listens on a unix socket only
// root may reach. Plain HTTP and a handshake that never comes get nothing and
// hold nobody up; a key that is not the certificate's stops serve, naming it.
TEST_F(ServeCli, HttpsWithTheGivenCertificate) {
  const std::string cert = dir_ + "/cert.pem", key = dir_ + "/key.pem";
  const auto made = run_capture(
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 "
      "-subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout " +
      key + " -out " + cert + " 2>&1");
  ASSERT_EQ(made.second, 0) << made.first;
  const std::string tok = token("acme");
  serve({"--tls-cert", cert, "--tls-key", key});
  EXPECT_NE(server_->out().find("listening on https://127.0.0.1:"), std::string::npos)
      << server_->out();
  const std::string base = "https://127.0.0.1:" + std::to_string(port_);
  const std::string curl = "curl -sS --max-time 20 --cacert " + cert + " ";
  // A client that never says hello holds up nobody.
  HttpProbe silent(port_);
  ASSERT_TRUE(silent.connected());
  EXPECT_EQ(run_capture(curl + base + "/healthz").first, "{\"ok\":true}\n");
  // Verified for real: without our CA curl refuses (60: peer certificate).
  EXPECT_EQ(run_capture("curl -sS --max-time 20 " + base + "/healthz 2>/dev/null").second, 60);
  // Plain HTTP to the TLS port: no answer (the handshake fails), and serve goes on.
  HttpProbe plain(port_);
  EXPECT_EQ(plain.request("GET", "/healthz").status, 0);
  const std::string auth = "-H 'Authorization: Bearer " + tok + "' ";
  auto created = run_capture(curl + auth + "-X POST -d '{}' " + base + "/v1/sandboxes");
  ASSERT_EQ(created.second, 0);
  const std::string id = json::parse(created.first).value("id", "");
  ASSERT_FALSE(id.empty()) << created.first;
  auto streamed = run_capture(curl + "-N " + auth + "-H 'Accept: text/event-stream' -d " +
                              R"('{"cmd": "echo one; sleep 0.2; echo two"}' )" + base +
                              "/v1/sandboxes/" + id + "/exec");
  ASSERT_EQ(streamed.second, 0);
  const std::string& ev = streamed.first;
  const auto started = ev.find("event: started"), one = ev.find("\"one\\n\""),
             two = ev.find("\"two\\n\""), exit = ev.find("event: exit");
  ASSERT_NE(exit, std::string::npos) << ev;
  EXPECT_LT(started, one) << ev;
  EXPECT_LT(one, two) << ev;
  EXPECT_LT(two, exit) << ev;
  // serve's own socket: root's only.
  std::string own;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) {
    if (e.path().filename().string().rfind("serve-", 0) == 0) own = e.path();
  }
  ASSERT_FALSE(own.empty());
  struct stat st {};
  ASSERT_EQ(::stat(own.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // Stopped: the socket is gone with it.
  server_->signal(SIGTERM);
  EXPECT_EQ(server_->wait(30s), 0) << server_->err();
  server_.reset();
  EXPECT_FALSE(std::filesystem::exists(own));

  // A key that is not the certificate's, a missing file, half a pair, a unix socket.
  const std::string other = dir_ + "/other.pem";
  ASSERT_EQ(
      run_capture("openssl genpkey -algorithm ec -pkeyopt ec_paramgen_curve:prime256v1 -out " +
                  other + " 2>&1")
          .second,
      0);
  auto refused = [&](std::vector<std::string> args, int code, const std::string& says) {
    std::vector<std::string> a{"serve", "--listen", "127.0.0.1:0", "--state-dir", dir_};
    a.insert(a.end(), args.begin(), args.end());
    Cli c(a);
    EXPECT_EQ(c.wait(30s), code) << c.err();
    EXPECT_NE(c.err().find(says), std::string::npos) << c.err();
  };
  refused({"--tls-cert", cert, "--tls-key", other}, 125,
          "--tls-key " + other + ": is not the key of --tls-cert " + cert);
  refused({"--tls-cert", dir_ + "/missing.pem", "--tls-key", key}, 125,
          "--tls-cert " + dir_ + "/missing.pem");
  refused({"--tls-cert", cert}, 2, "--tls-cert and --tls-key go together");
}

// Secrets over the API: set, listed and revoked by a project's token, their
// value never in an answer, a log or the store's file; another project's
// token sees none of them; a secret set this way is injected and redacted
// like any other.
TEST_F(ServeCli, SecretsAreTheTokensProjectsAndTheirValuesNeverComeBack) {
  const std::string tok = token("alpha", {"--name", "ci"});
  const std::string other = token("beta");
  const std::string secret = "sk-api-set-9876543210fedcbaQRS";
  serve_only();
  const json value = {{"value", secret}};
  auto made = call("PUT", "/v1/secrets/api-key", tok, value.dump());
  EXPECT_EQ(made.status, 201) << made.body;
  EXPECT_EQ(json::parse(made.body)["version"], 1);
  auto again = call("PUT", "/v1/secrets/api-key", tok, value.dump());
  EXPECT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(json::parse(again.body)["version"], 2);
  auto listed = call("GET", "/v1/secrets", tok);
  ASSERT_EQ(listed.status, 200) << listed.body;
  const json list = json::parse(listed.body)["secrets"];
  ASSERT_EQ(list.size(), 1u) << listed.body;
  EXPECT_EQ(list[0]["name"], "api-key");
  EXPECT_EQ(list[0]["state"], "active");
  EXPECT_EQ(listed.body.find(secret), std::string::npos);
  // Another project's token: nothing to see, nothing to touch.
  EXPECT_EQ(json::parse(call("GET", "/v1/secrets", other).body)["secrets"].size(), 0u);
  EXPECT_EQ(call("GET", "/v1/secrets/api-key", other).status, 404);
  EXPECT_EQ(call("DELETE", "/v1/secrets/api-key", other).status, 404);
  EXPECT_EQ(call("PUT", "/v1/secrets/api-key", other, R"({"value": "beta's own"})").status, 201);
  EXPECT_EQ(json::parse(call("GET", "/v1/secrets/api-key", tok).body)["version"], 2);
  // Bad input names the field, and never echoes the body.
  auto not_json = call("PUT", "/v1/secrets/api-key", tok, "{\"value\": \"" + secret);
  EXPECT_EQ(not_json.status, 400);
  EXPECT_NE(not_json.body.find("\"field\":\"body\""), std::string::npos) << not_json.body;
  EXPECT_EQ(not_json.body.find(secret), std::string::npos) << not_json.body;
  auto not_text = call("PUT", "/v1/secrets/api-key", tok, R"({"value": 5})");
  EXPECT_EQ(not_text.status, 400);
  EXPECT_NE(not_text.body.find("\"field\":\"value\""), std::string::npos) << not_text.body;
  auto bad_name = call("PUT", "/v1/secrets/..%2Fbeta%2Fapi-key", tok, value.dump());
  EXPECT_EQ(bad_name.status, 400);
  EXPECT_NE(bad_name.body.find("\"field\":\"name\""), std::string::npos) << bad_name.body;
  // Naming another project's secret by the store's own form (P:NAME) is refused too.
  for (const std::string method : {"PUT", "GET", "DELETE"}) {
    auto other_form = call(method, "/v1/secrets/beta%3Aapi-key", tok, value.dump());
    EXPECT_EQ(other_form.status, 400) << method << ": " << other_form.body;
    EXPECT_NE(other_form.body.find("\"field\":\"name\""), std::string::npos) << other_form.body;
  }
  EXPECT_EQ(json::parse(call("GET", "/v1/secrets/api-key", other).body)["version"], 1)
      << "beta's secret is untouched";

  // Injected where a call asks for its identity, redacted on the way out.
  Cli profile({"identity", "profile", "set", "alpha", "--level", "project", "--project", "alpha",
               "API_KEY=secret:alpha:api-key", "--state-dir", dir_});
  ASSERT_EQ(profile.wait(30s), 0) << profile.err();
  Cli worker({"worker", "start", "--state-dir", dir_, "--sandbox-mode", "per_run"});
  auto run =
      call("POST", "/v1/calls", tok, R"({"run": "r1", "cmd": "echo $API_KEY", "identity": {}})");
  ASSERT_EQ(run.status, 201) << run.body;
  const std::string id = std::to_string(json::parse(run.body)["id"].get<int64_t>());
  HttpProbe follow(port_);
  auto events =
      follow.request("GET", "/v1/calls/" + id, tok, "", {{"Accept", "text/event-stream"}}, 60s);
  EXPECT_NE(events.body.find("[REDACTED:API_KEY]"), std::string::npos) << events.body;
  EXPECT_EQ(events.body.find(secret), std::string::npos);
  // Revoked: the next call that asks for it is refused before it is queued.
  auto revoked = call("DELETE", "/v1/secrets/api-key", tok);
  EXPECT_EQ(revoked.status, 200) << revoked.body;
  EXPECT_EQ(json::parse(revoked.body)["state"], "revoked");
  auto refused =
      call("POST", "/v1/calls", tok, R"({"run": "r2", "argv": ["true"], "identity": {}})");
  EXPECT_EQ(refused.status, 403) << refused.body;
  worker.signal(SIGTERM);
  worker.wait(30s);

  // Never in the audit log (which names the token), the server's output, or
  // the store's file in plaintext.
  Cli audit({"audit", "show", "--json", "--state-dir", dir_});
  ASSERT_EQ(audit.wait(30s), 0) << audit.err();
  EXPECT_NE(audit.out().find("\"kind\":\"secret.set\""), std::string::npos);
  EXPECT_NE(audit.out().find("token ci ("), std::string::npos) << audit.out();
  EXPECT_EQ(audit.out().find(secret), std::string::npos);
  server_->signal(SIGTERM);
  EXPECT_EQ(server_->wait(30s), 0) << server_->err();
  EXPECT_EQ(server_->out().find(secret), std::string::npos);
  EXPECT_EQ(server_->err().find(secret), std::string::npos);
  server_.reset();
  for (const auto& f : std::filesystem::recursive_directory_iterator(dir_)) {
    if (!f.is_regular_file()) continue;
    EXPECT_EQ(slurp(f.path()).find(secret), std::string::npos) << f.path();
  }
}

// The load test: 64 clients for 60 s (RF_SERVE_LOAD_SECONDS to change), each
// on its own kept-alive connection mixing exec, uploads, downloads and
// streamed execs over 8 sandboxes. No request fails; afterwards the server
// holds no more descriptors or threads than before, and no sandbox is left.
TEST_F(ServeCli, SixtyFourClientsForAMinuteLeakNothing) {
  const std::string tok = token("acme");
  serve({"--max-requests-per-token", "256"});
  auto count = [&](const char* what) {
    const std::string dir = "/proc/" + std::to_string(server_->pid()) + "/" + what;
    size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir)) n += !e.path().empty();
    return n;
  };
  std::vector<std::string> ids;
  for (int i = 0; i < 8; ++i) ids.push_back(create(tok));
  // Warm: one request of each kind, so lazily made things exist before the baseline.
  call("POST", "/v1/sandboxes/" + ids[0] + "/exec", tok, R"({"argv": ["true"]})");
  std::this_thread::sleep_for(1500ms);
  const size_t fds_before = count("fd"), threads_before = count("task");

  const char* env = std::getenv("RF_SERVE_LOAD_SECONDS");
#ifdef RF_SERVE_LOAD_DEFAULT_SECONDS
  const int seconds = env ? std::atoi(env) : RF_SERVE_LOAD_DEFAULT_SECONDS;  // TSAN: slower
#else
  const int seconds = env ? std::atoi(env) : 60;
#endif
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> done{0};
  std::mutex mu;
  std::vector<std::string> failures;
  std::vector<std::thread> clients;
  for (int c = 0; c < 64; ++c) {
    clients.emplace_back([&, c] {
      HttpProbe p(port_);
      const std::string base = "/v1/sandboxes/" + ids[c % 8];
      auto check = [&](const HttpReply& r, int want, const char* what, const std::string& must) {
        if (r.status == want && r.body.find(must) != std::string::npos) return true;
        std::lock_guard lock(mu);
        failures.push_back(std::string(what) + ": " + std::to_string(r.status) + " " +
                           r.body.substr(0, 200));
        return false;
      };
      for (int i = 0; !stop.load(); ++i) {
        const std::string name = "/tmp/c" + std::to_string(c) + "-" + std::to_string(i % 4);
        bool ok = true;
        switch (i % 4) {
          case 0:
            ok = check(p.request("POST", base + "/exec", tok,
                                 R"({"cmd": "echo c)" + std::to_string(c) + R"("})"),
                       200, "exec", "\"stdout\":\"c" + std::to_string(c) + "\\n\"");
            break;
          case 1:
            ok = check(p.request("PUT", base + "/files?path=" + name, tok, "payload " + name), 201,
                       "upload", name);
            break;
          case 2:
            ok =
                check(p.request("GET", base + "/files?path=/tmp/c" + std::to_string(c) + "-1", tok),
                      200, "download", "payload");
            break;
          case 3:
            ok = check(p.request("POST", base + "/exec", tok, R"({"argv": ["echo", "streamed"]})",
                                 {{"Accept", "text/event-stream"}}),
                       200, "stream", "event: exit");
            break;
        }
        if (!ok) return;
        ++done;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  stop = true;
  for (auto& t : clients) t.join();
  EXPECT_TRUE(failures.empty()) << failures.size() << " failed, first: " << failures.front();
  EXPECT_GT(done.load(), 64u * 4) << "every client made every kind of request";
  std::printf("load: %llu requests in %d s from 64 clients\n",
              static_cast<unsigned long long>(done.load()), seconds);

  // The clients are gone: their connections and threads go too.
  size_t fds = 0, threads = 0;
  for (int i = 0; i < 100; ++i) {
    fds = count("fd");
    threads = count("task");
    if (fds <= fds_before && threads <= threads_before) break;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_LE(fds, fds_before) << "descriptors leaked";
  EXPECT_LE(threads, threads_before) << "threads leaked";
  auto listed = json::parse(call("GET", "/v1/sandboxes", tok).body)["sandboxes"];
  EXPECT_EQ(listed.size(), 8u) << "no sandbox made or lost";
  for (const auto& id : ids) EXPECT_EQ(call("DELETE", "/v1/sandboxes/" + id, tok).status, 204);
  Cli inventory({"sandbox", "list", "--backend", "native", "--json"});
  inventory.wait(30s);
  for (const auto& id : ids) EXPECT_EQ(inventory.out().find(id), std::string::npos) << id;
}

// The API's sandboxes live on a worker (issue 39): serve's restart keeps
// them, and `sandbox list` shows them with their project; the worker's stop
// ends them and leaves nothing behind.
TEST_F(ServeCli, ApiSandboxesLiveOnTheWorkerAndEndWithIt) {
  const std::string tok = token("acme");
  serve();
  std::vector<std::string> ids{create(tok), create(tok)};
  server_->signal(SIGTERM);
  EXPECT_EQ(server_->wait(30s), 0) << server_->err();
  serve_only();
  for (const auto& id : ids) EXPECT_EQ(call("GET", "/v1/sandboxes/" + id, tok).status, 200) << id;
  Cli listed({"sandbox", "list", "--state-dir", dir_, "--json"});
  listed.wait(30s);
  const json all = json::parse(listed.out(), nullptr, false);
  int mine = 0;
  for (const auto& s : all.is_array() ? all : json::array()) {
    if (std::find(ids.begin(), ids.end(), s.value("id", "")) == ids.end()) continue;
    ++mine;
    EXPECT_EQ(s.value("project", ""), "acme") << s.dump();
    EXPECT_EQ(s.value("mode", ""), "api") << s.dump();
  }
  EXPECT_EQ(mine, 2) << listed.out();
  worker_->signal(SIGTERM);
  EXPECT_EQ(worker_->wait(60s), 0) << worker_->err();
  worker_.reset();
  Cli inventory({"sandbox", "list", "--backend", "native", "--json"});
  inventory.wait(30s);
  for (const auto& id : ids) EXPECT_EQ(inventory.out().find(id), std::string::npos) << id;
  for (const auto& id : ids) EXPECT_EQ(call("GET", "/v1/sandboxes/" + id, tok).status, 404) << id;
}

// Every sandbox of a project, whichever door made it (the API's, a queued
// call's run), is in the console's snapshot and in `sandbox list` with its
// project, run and mode (issue 39: worker sandboxes were missing there).
TEST_F(ServeCli, TheConsoleAndSandboxListShowEverySandboxOfEveryDoor) {
  const std::string tok = token("acme");
  serve();
  const std::string api_id = create(tok);
  auto made = call("POST", "/v1/calls", tok, R"({"run": "r1", "argv": ["true"]})");
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string call_id = std::to_string(json::parse(made.body)["id"].get<int64_t>());
  for (int i = 0; i < 200; ++i) {
    if (json::parse(call("GET", "/v1/calls/" + call_id, tok).body)["state"] == "done") break;
    std::this_thread::sleep_for(50ms);
  }
  HttpProbe console(port_);
  ASSERT_TRUE(console.send_raw(
      "GET /v1/console/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + tok + "\r\n\r\n"));
  json snapshot;
  for (int i = 0; i < 100 && snapshot.is_null(); ++i) {
    console.read_some(200ms);
    const std::string& got = console.buffered();
    const auto at = got.find("data: ");
    const auto end = at == std::string::npos ? at : got.find("\n", at);
    if (end != std::string::npos)
      snapshot = json::parse(got.substr(at + 6, end - at - 6), nullptr, false);
  }
  ASSERT_TRUE(snapshot.is_object()) << console.buffered();
  std::map<std::string, json> by_mode;
  for (const auto& sb : snapshot["sandboxes"]) by_mode[sb["mode"]] = sb;
  ASSERT_TRUE(by_mode.count("api")) << snapshot.dump();
  ASSERT_TRUE(by_mode.count("per_run")) << snapshot.dump();
  EXPECT_EQ(by_mode["api"]["id"], api_id);
  EXPECT_EQ(by_mode["per_run"]["run"], "r1");
  EXPECT_EQ(by_mode["per_run"]["project"], "acme");
  Cli listed({"sandbox", "list", "--state-dir", dir_, "--json"});
  listed.wait(30s);
  const json all = json::parse(listed.out(), nullptr, false);
  std::set<std::string> modes;
  for (const auto& s : all.is_array() ? all : json::array()) {
    if (s.value("project", json()).is_string() && s["project"] == "acme") modes.insert(s["mode"]);
  }
  EXPECT_EQ(modes, (std::set<std::string>{"api", "per_run"})) << listed.out();
}

// /v1/audit's limit and after are whole numbers in range, or a 400 naming
// the parameter: "abc" and -5 once came back as one event with 200, and
// after=xyz read as 0.
TEST_F(ServeCli, AuditQueryNumbersAreCheckedAndTheParameterNamed) {
  const std::string tok = token("acme");
  serve();
  auto expect = [&](const std::string& query, const std::string& field, const std::string& words) {
    const auto r = call("GET", "/v1/audit?" + query, tok);
    EXPECT_EQ(r.status, 400) << query << ": " << r.body;
    if (r.status != 400) return;
    const json j = json::parse(r.body);
    EXPECT_EQ(j.value("field", ""), field) << r.body;
    EXPECT_EQ(j.value("error", ""), words) << r.body;
  };
  expect("limit=abc", "limit", "limit \"abc\": expected a whole number from 1 to 1000");
  expect("limit=-5", "limit", "limit \"-5\": expected a whole number from 1 to 1000");
  expect("limit=0", "limit", "limit \"0\": expected a whole number from 1 to 1000");
  expect("limit=1001", "limit", "limit \"1001\": expected a whole number from 1 to 1000");
  expect("limit=", "limit", "limit \"\": expected a whole number from 1 to 1000");
  expect("after=xyz", "after",
         "after \"xyz\": expected an event's seq (a whole number, 0 or more)");
  expect("after=-1", "after", "after \"-1\": expected an event's seq (a whole number, 0 or more)");
  const auto ok = call("GET", "/v1/audit?limit=1&after=0", tok);
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_LE(json::parse(ok.body)["events"].size(), 1u) << ok.body;
}

// --max-requests-per-token below 1 would refuse every request: serve
// refuses it at the start, naming the flag.
TEST_F(ServeCli, ALimitThatWouldRefuseEveryRequestIsRefusedAtTheStart) {
  for (const std::string bad : {"-1", "0"}) {
    Cli c(
        {"serve", "--listen", "127.0.0.1:0", "--state-dir", dir_, "--max-requests-per-token", bad});
    EXPECT_EQ(c.wait(20s), 2) << bad << ": " << c.out() << c.err();
    EXPECT_EQ(c.err(),
              "ringfence: --max-requests-per-token " + bad + ": expected 1 or more requests\n")
        << bad;
  }
  Cli c({"serve", "--listen", "127.0.0.1:0", "--state-dir", dir_, "--max-sandboxes-per-project",
         "-1"});
  EXPECT_EQ(c.wait(20s), 2) << c.out() << c.err();
  EXPECT_EQ(c.err(), "ringfence: --max-sandboxes-per-project -1: expected 1 or more sandboxes\n");
}

}  // namespace
}  // namespace rf::testing
