// Sandboxes that live, through `ringfence serve` (issue 41): background
// processes, watches and volumes. Background processes (item 2), as an
// agent framework uses them: a command started in the background outlives
// its request and every exec after it; any number of clients follow its
// output (from its start or from now), before or after the one that started
// it left; stdin, signals and a terminal's size reach it; its output is
// bounded by the project's policy, as is how many run. Hostile: another
// project's token, a pid of another sandbox, malformed bodies, a signal that
// is no signal; a sandbox that expires ends its processes and tells every
// client following one why.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "support/ci_skip.h"
#include "support/cli_process.h"
#include "support/http_probe.h"
#include "support/serve_process.h"
#include "support/sse_follower.h"

namespace rf::testing {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

class ServeSessions : public ServedTest {
 protected:
  // Starts a process; its JSON (the test fails on another status).
  json start(const std::string& tok, const std::string& id, const json& body) {
    auto r = call("POST", "/v1/sandboxes/" + id + "/processes", tok, body.dump());
    EXPECT_EQ(r.status, 201) << r.body;
    return r.status == 201 ? json::parse(r.body) : json::object();
  }
  // The process's JSON once its state is no longer running.
  json ended(const std::string& tok, const std::string& id, int pid) {
    const auto end = std::chrono::steady_clock::now() + 30s;
    json p;
    while (std::chrono::steady_clock::now() < end) {
      auto r = call("GET",
                    "/v1/sandboxes/" + id + "/processes/" + std::to_string(pid) +
                        "/output?from=now&wait_ms=1000",
                    tok);
      EXPECT_EQ(r.status, 200) << r.body;
      if (r.status != 200) break;
      p = json::parse(r.body)["process"];
      if (p["state"] != "running") return p;
    }
    ADD_FAILURE() << "process " << pid << " did not end: " << p.dump();
    return p;
  }
};

TEST_F(ServeSessions, ABackgroundProcessOutlivesItsRequestAndAnyClientFollowsIt) {
  const std::string tok = token("acme");
  const std::string other = token("beta");
  serve();
  const std::string id = create(tok, R"({"cwd": "/tmp", "env": {"GREETING": "hi"}})");
  const std::string base = "/v1/sandboxes/" + id + "/processes";
  const json p = start(tok, id,
                       {{"cmd",
                         "echo ready $GREETING $(pwd); while read l; do echo got:$l; "
                         "echo err:$l >&2; done; exit 7"},
                        {"stdin", true},
                        {"tag", "echoer"}});
  const int pid = p.value("pid", 0);
  ASSERT_GT(pid, 1) << p.dump();
  EXPECT_EQ(p["state"], "running");
  EXPECT_EQ(p["tag"], "echoer");
  EXPECT_EQ(p["stdin_open"], true);
  const std::string one = base + "/" + std::to_string(pid);

  // Alive across later calls: an exec sees it, as a process of the sandbox.
  auto seen = call("POST", "/v1/sandboxes/" + id + "/exec", tok,
                   json{{"cmd", "kill -0 " + std::to_string(pid) + " && echo alive"}}.dump());
  ASSERT_EQ(seen.status, 200) << seen.body;
  EXPECT_EQ(json::parse(seen.body)["stdout"], "alive\n") << seen.body;
  auto listed = call("GET", base, tok);
  ASSERT_EQ(listed.status, 200) << listed.body;
  EXPECT_NE(listed.body.find("\"tag\":\"echoer\""), std::string::npos) << listed.body;

  // Two clients: one from its start (sees what it printed before), one from now.
  Follower from_start(port_, one + "/output?from=start", tok);
  ASSERT_TRUE(from_start.shows("ready hi /tmp")) << from_start.seen();
  Follower from_now(port_, one + "/output?from=now", tok);
  ASSERT_TRUE(from_now.shows("200 OK")) << from_now.seen();
  EXPECT_EQ(call("POST", one + "/stdin", tok, "hello\n").status, 204);
  EXPECT_TRUE(from_start.shows("got:hello")) << from_start.seen();
  EXPECT_TRUE(from_now.shows("got:hello")) << from_now.seen();
  EXPECT_TRUE(from_now.shows("event: stderr")) << from_now.seen();
  EXPECT_EQ(from_now.seen().find("ready"), std::string::npos) << "from now: nothing older";
  {
    // A client that leaves mid-stream costs the others nothing.
    Follower leaving(port_, one + "/output?from=start", tok);
    ASSERT_TRUE(leaving.shows("got:hello")) << leaving.seen();
  }
  EXPECT_EQ(call("POST", one + "/stdin", tok, "again\n").status, 204);
  EXPECT_TRUE(from_now.shows("got:again")) << from_now.seen();

  // Another project's token knows none of it.
  for (const auto& [method, target, body] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"GET", base, ""},
           {"POST", base, R"({"cmd": "true"})"},
           {"GET", one, ""},
           {"GET", one + "/output", ""},
           {"POST", one + "/stdin", "x\n"},
           {"POST", one + "/stdin:close", ""},
           {"POST", one + "/signal", R"({"signal": "KILL"})"},
           {"DELETE", one, ""}}) {
    auto r = call(method, target, other, body);
    EXPECT_EQ(r.status, 404) << method << " " << target << ": " << r.body;
    EXPECT_NE(r.body.find("no sandbox " + id), std::string::npos) << r.body;
  }
  // A pid of another sandbox of the same project is unknown here.
  const std::string second = create(tok);
  auto elsewhere =
      call("GET", "/v1/sandboxes/" + second + "/processes/" + std::to_string(pid), tok);
  EXPECT_EQ(elsewhere.status, 404) << elsewhere.body;
  EXPECT_NE(elsewhere.body.find("\"field\":\"pid\""), std::string::npos) << elsewhere.body;

  // Closing stdin ends the loop: every follower hears the end and the exit code.
  EXPECT_EQ(call("POST", one + "/stdin:close", tok).status, 204);
  EXPECT_TRUE(from_start.shows("event: end")) << from_start.seen();
  EXPECT_TRUE(from_now.shows("event: end")) << from_now.seen();
  EXPECT_NE(from_now.seen().find("\"exit_code\":7"), std::string::npos) << from_now.seen();
  const json done = ended(tok, id, pid);
  EXPECT_EQ(done["state"], "exited");
  EXPECT_EQ(done["exit_code"], 7);
  EXPECT_EQ(done["stdin_open"], false);
  auto all = call("GET", one + "/output?from=0", tok);
  ASSERT_EQ(all.status, 200) << all.body;
  const json out = json::parse(all.body);
  EXPECT_EQ(out["stdout"], "ready hi /tmp\ngot:hello\ngot:again\n");
  EXPECT_EQ(out["stderr"], "err:hello\nerr:again\n");
  EXPECT_EQ(out["ended"], true);
  EXPECT_EQ(out["next"], out["process"]["output_bytes"]);
  auto late = call("POST", one + "/stdin", tok, "late\n");
  EXPECT_EQ(late.status, 409) << late.body;
  EXPECT_NE(late.body.find("has ended"), std::string::npos) << late.body;
}

TEST_F(ServeSessions, SignalsBoundsAndBadRequestsGetExactAnswers) {
  const std::string tok = token("acme");
  policy("acme", {"--processes-max", "2", "--process-buffer", "4k"});
  serve();
  const std::string id = create(tok);
  const std::string base = "/v1/sandboxes/" + id + "/processes";
  const int a = start(tok, id, {{"argv", {"sleep", "1000"}}}).value("pid", 0);
  const int b = start(tok, id, {{"cmd", "head -c 100000 /dev/zero | tr '\\0' x; sleep 1000"}})
                    .value("pid", 0);
  ASSERT_GT(a, 0);
  ASSERT_GT(b, 0);
  // The policy's processes_max: a third is refused, naming it.
  auto third = call("POST", base, tok, R"({"argv": ["sleep", "1"]})");
  EXPECT_EQ(third.status, 429) << third.body;
  EXPECT_NE(third.body.find("processes_max"), std::string::npos) << third.body;

  // The buffer keeps the newest 4 KiB; a read from 0 says what fell out.
  const auto until = std::chrono::steady_clock::now() + 30s;
  json got;
  while (std::chrono::steady_clock::now() < until) {
    got = json::parse(call("GET", base + "/" + std::to_string(b) + "/output?from=0", tok).body);
    if (got["process"]["output_bytes"] == 100000) break;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(got["process"]["output_bytes"], 100000) << got.dump().substr(0, 300);
  EXPECT_EQ(got["skipped"], 100000 - 4096);
  EXPECT_EQ(got["stdout"], std::string(4096, 'x'));
  EXPECT_EQ(got["process"]["dropped_bytes"], 100000 - 4096);

  // Signals: TERM by name, and DELETE is KILL.
  EXPECT_EQ(
      call("POST", base + "/" + std::to_string(a) + "/signal", tok, R"({"signal": "SIGTERM"})")
          .status,
      204);
  const json termed = ended(tok, id, a);
  EXPECT_EQ(termed["exit_code"], 143);
  EXPECT_EQ(termed["signal"], 15);
  EXPECT_EQ(call("DELETE", base + "/" + std::to_string(b), tok).status, 204);
  EXPECT_EQ(ended(tok, id, b)["exit_code"], 137);
  auto twice = call("DELETE", base + "/" + std::to_string(b), tok);
  EXPECT_EQ(twice.status, 409) << twice.body;

  // Bad requests: a 400 naming the field, a 404 for what is not there.
  struct Bad {
    std::string method, target, body;
    int status;
    std::string field;
  };
  const std::string on_a = base + "/" + std::to_string(a);
  for (const Bad& bad : std::vector<Bad>{
           {"POST", base, R"({"cmd": "true", "sudo": true})", 400, "sudo"},
           {"POST", base, R"({"argv": []})", 400, "argv"},
           {"POST", base, R"({"cmd": "true", "tag": 5})", 400, "tag"},
           {"POST", base, R"({"cmd": "true", "rows": 40})", 400, "rows"},
           {"POST", base, R"({"cmd": "true", "pty": "yes", "cols": 9})", 400, "cols"},
           {"POST", base, "{not json", 400, "body"},
           {"POST", base, R"({"argv": ["/no/such/program"]})", 400, "argv"},
           {"POST", on_a + "/signal", R"({"signal": "NOPE"})", 400, "signal"},
           {"POST", on_a + "/signal", R"({"signal": 99})", 400, "signal"},
           {"POST", on_a + "/resize", R"({"rows": 0, "cols": 80})", 400, "rows"},
           {"GET", on_a + "/output?from=later", "", 400, "from"},
           {"GET", on_a + "/output?wait_ms=99999", "", 400, "wait_ms"},
           {"GET", base + "/abc", "", 404, "pid"},
           {"GET", base + "/999999", "", 404, "pid"},
           {"POST", base + "/999999/stdin", "x", 404, "pid"},
       }) {
    auto r = call(bad.method, bad.target, tok, bad.body);
    EXPECT_EQ(r.status, bad.status)
        << bad.method << " " << bad.target << " " << bad.body << ": " << r.body;
    EXPECT_NE(r.body.find("\"field\":\"" + bad.field + "\""), std::string::npos)
        << bad.target << " " << bad.body << ": " << r.body;
  }
  auto missing = call("POST", base, tok, R"({"argv": ["no-such-command-x"]})");
  EXPECT_NE(missing.body.find("command not found"), std::string::npos) << missing.body;
}

TEST_F(ServeSessions, ATerminalTakesInputAndResizesAndAnExpiryEndsItsProcesses) {
  const std::string tok = token("acme");
  serve();
  const std::string id = create(tok, R"({"timeout": 600})");
  const std::string base = "/v1/sandboxes/" + id + "/processes";
  const int sh = start(tok, id, {{"argv", {"/bin/sh"}}, {"pty", true}, {"rows", 30}, {"cols", 100}})
                     .value("pid", 0);
  ASSERT_GT(sh, 0);
  const std::string one = base + "/" + std::to_string(sh);
  Follower term(port_, one + "/output?from=start", tok);
  EXPECT_EQ(call("POST", one + "/stdin", tok, "stty size\n").status, 204);
  EXPECT_TRUE(term.shows("30 100")) << term.seen();
  EXPECT_EQ(call("POST", one + "/resize", tok, R"({"rows": 40, "cols": 120})").status, 204);
  EXPECT_EQ(call("POST", one + "/stdin", tok, "stty size\n").status, 204);
  EXPECT_TRUE(term.shows("40 120")) << term.seen();
  // A process without a terminal cannot be resized.
  const int plain = start(tok, id, {{"argv", {"sleep", "1000"}}}).value("pid", 0);
  auto no_tty = call("POST", base + "/" + std::to_string(plain) + "/resize", tok,
                     R"({"rows": 40, "cols": 120})");
  EXPECT_EQ(no_tty.status, 409) << no_tty.body;
  EXPECT_EQ(call("POST", one + "/stdin", tok, "exit 3\n").status, 204);
  EXPECT_TRUE(term.shows("event: end")) << term.seen();
  EXPECT_EQ(ended(tok, id, sh)["exit_code"], 3);

  // The sandbox runs out: its processes end, and a follower is told why.
  Follower sleeper(port_, base + "/" + std::to_string(plain) + "/output?from=start", tok);
  ASSERT_TRUE(sleeper.shows("200 OK")) << sleeper.seen();
  ASSERT_EQ(call("PUT", "/v1/sandboxes/" + id + "/timeout", tok, R"({"timeout": 1})").status, 200);
  EXPECT_TRUE(sleeper.shows("event: end")) << sleeper.seen();
  EXPECT_NE(sleeper.seen().find("its sandbox expired (its timeout ran out)"), std::string::npos)
      << sleeper.seen();
}

// Issue 41 item 3: a directory watched from inotify inside the sandbox,
// streamed: what a command does there arrives as create, write, rename,
// remove and chmod events named by the sandbox's paths, below directories
// made after the watch began too when recursive; a path resolves inside the
// sandbox (a symlink to "/" leads to the sandbox's own root); what cannot be
// watched is a 400 naming the path; a client that leaves ends its watch
// inside the sandbox (the runner keeps at most 64, and the 65th is refused
// until one ends).
TEST_F(ServeSessions, AWatchedDirectoryStreamsWhatChangesInIt) {
  const std::string tok = token("acme");
  const std::string other = token("beta");
  serve({"--max-requests-per-token", "512"});
  const std::string id = create(tok);
  const std::string base = "/v1/sandboxes/" + id;
  auto sh = [&](const std::string& cmd) {
    auto r = call("POST", base + "/exec", tok, json{{"cmd", cmd}}.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(json::parse(r.body)["exit_code"], 0) << r.body;
  };
  sh("mkdir -p /workspace/w/sub && ln -s / /workspace/w/root");
  Follower deep(port_, base + "/files:watch?path=/workspace/w&recursive=true", tok);
  ASSERT_TRUE(deep.shows("event: watching")) << deep.seen();
  Follower flat(port_, base + "/files:watch?path=/workspace/w", tok);
  ASSERT_TRUE(flat.shows("event: watching")) << flat.seen();
  sh("echo hi > /workspace/w/a.txt && mkdir /workspace/w/sub/new");
  ASSERT_TRUE(deep.shows(R"("dir":true,"path":"/workspace/w/sub/new","type":"create")"))
      << deep.seen();
  sh("echo x > /workspace/w/sub/new/deep.txt && mv /workspace/w/a.txt /workspace/w/b.txt && "
     "rm /workspace/w/b.txt && chmod 600 /workspace/w/sub/new/deep.txt");
  for (const char* want :
       {R"("dir":false,"path":"/workspace/w/a.txt","type":"create")",
        R"("dir":false,"path":"/workspace/w/a.txt","type":"write")",
        R"("dir":false,"path":"/workspace/w/sub/new/deep.txt","type":"create")",
        R"("dir":false,"path":"/workspace/w/a.txt","type":"rename")",
        R"("dir":false,"path":"/workspace/w/b.txt","type":"create")",
        R"("dir":false,"path":"/workspace/w/b.txt","type":"remove")",
        R"("dir":false,"path":"/workspace/w/sub/new/deep.txt","type":"chmod")"}) {
    EXPECT_TRUE(deep.shows(want)) << want << "\n" << deep.seen();
  }
  EXPECT_TRUE(flat.shows(R"("path":"/workspace/w/b.txt","type":"remove")")) << flat.seen();
  EXPECT_EQ(flat.seen().find("deep.txt"), std::string::npos) << "not recursive: " << flat.seen();
  // Through a symlink to "/": the sandbox's own /tmp, named as asked.
  Follower via_link(port_, base + "/files:watch?path=/workspace/w/root/tmp", tok);
  ASSERT_TRUE(via_link.shows("event: watching")) << via_link.seen();
  sh("touch /tmp/inside");
  EXPECT_TRUE(via_link.shows(R"("path":"/workspace/w/root/tmp/inside","type":"create")"))
      << via_link.seen();
  // Its directory removed: the watch ends and says why.
  sh("rm -r /workspace/w");
  EXPECT_TRUE(flat.shows("event: end")) << flat.seen();
  EXPECT_NE(flat.seen().find("the watched directory"), std::string::npos) << flat.seen();

  struct Bad {
    std::string target, token;
    int status;
    std::string field, says;
  };
  sh("mkdir -p /workspace/d && touch /workspace/d/f");
  for (const Bad& b : std::vector<Bad>{
           {"/files:watch?path=/workspace/d/f", tok, 400, "path", "Not a directory"},
           {"/files:watch?path=/workspace/none", tok, 400, "path", "No such file"},
           {"/files:watch?path=/workspace/d&recursive=yes", tok, 400, "recursive", "true or false"},
           {"/files:watch?path=workspace", tok, 400, "path", "absolute"},
           {"/files:watch?path=/workspace/d", other, 404, "id", "no sandbox"}}) {
    HttpProbe p(port_);
    auto r = p.request("GET", base + b.target, b.token, "", {{"Accept", "text/event-stream"}});
    EXPECT_EQ(r.status, b.status) << b.target << ": " << r.body;
    EXPECT_NE(r.body.find("\"field\":\"" + b.field + "\""), std::string::npos) << r.body;
    EXPECT_NE(r.body.find(b.says), std::string::npos) << r.body;
  }
  EXPECT_EQ(call("GET", base + "/files:watch?path=/workspace/d", tok).status, 406);

  // 64 at once is the runner's bound; a client that leaves frees its watch.
  // `deep` and `flat` ended with their directory: `via_link` is the one left.
  std::vector<std::unique_ptr<Follower>> many;
  for (int i = 0; i < 63; ++i) {
    many.push_back(std::make_unique<Follower>(port_, base + "/files:watch?path=/workspace/d", tok));
    ASSERT_TRUE(many.back()->shows("event: watching")) << i << ": " << many.back()->seen();
  }
  {
    HttpProbe p(port_);
    auto r = p.request("GET", base + "/files:watch?path=/workspace/d", tok, "",
                       {{"Accept", "text/event-stream"}});
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find("64 watches"), std::string::npos) << r.body;
  }
  many.clear();
  bool again = false;
  for (int i = 0; i < 100 && !again; ++i) {
    Follower f(port_, base + "/files:watch?path=/workspace/d", tok);
    again = f.shows("event: watching", 5s);
    if (!again) std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(again) << "the watches of the clients that left were ended";
}

// Issue 41 item 4: a project's named volume outlives its sandboxes, is
// mounted read-write in one and read-only in another at once, and is
// bounded by its size (a write past it fails inside with "No space left");
// another project neither sees nor mounts it; deleting it is refused while a
// sandbox mounts it, and audited.
TEST_F(ServeSessions, AVolumeOutlivesItsSandboxesAndIsTheProjectsAlone) {
  const std::string tok = token("acme");
  const std::string other = token("beta");
  policy("acme", {"--volume-size-max", "64m"});
  serve();
  auto made = call("POST", "/v1/volumes", tok, R"({"name": "state", "size": "32m"})");
  ASSERT_EQ(made.status, 201) << made.body;
  EXPECT_EQ(json::parse(made.body)["size_bytes"], 32 << 20);
  EXPECT_EQ(call("POST", "/v1/volumes", tok, R"({"name": "state"})").status, 409);
  auto too_big = call("POST", "/v1/volumes", tok, R"({"name": "big", "size": "1g"})");
  EXPECT_EQ(too_big.status, 403) << too_big.body;
  EXPECT_NE(too_big.body.find("volume_size_max"), std::string::npos) << too_big.body;
  for (const char* bad : {R"({"name": "../x"})", R"({"name": "ok", "size": "1k"})",
                          R"({"name": "ok", "extra": 1})", R"({"size": "1g"})"}) {
    EXPECT_EQ(call("POST", "/v1/volumes", tok, bad).status, 400) << bad;
  }

  auto sh = [&](const std::string& id, const std::string& cmd) {
    auto r = call("POST", "/v1/sandboxes/" + id + "/exec", tok, json{{"cmd", cmd}}.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return r.status == 200 ? json::parse(r.body) : json::object();
  };
  const std::string writer =
      create(tok, R"({"volumes": [{"name": "state", "path": "/var/agent/state"}]})");
  const std::string reader =
      create(tok, R"({"volumes": [{"name": "state", "path": "/data", "readonly": true}]})");
  ASSERT_FALSE(writer.empty());
  ASSERT_FALSE(reader.empty());
  json w =
      sh(writer, "echo kept > /var/agent/state/note && id -u && stat -c %u /var/agent/state/note");
  EXPECT_EQ(w["exit_code"], 0) << w.dump();
  EXPECT_EQ(w["stdout"], "1000\n1000\n") << "the sandbox's own user owns what it writes";
  EXPECT_EQ(sh(reader, "cat /data/note")["stdout"], "kept\n");
  json ro = sh(reader, "echo x > /data/other");
  EXPECT_NE(ro["exit_code"], 0);
  EXPECT_NE(ro["stderr"].get<std::string>().find("Read-only file system"), std::string::npos)
      << ro.dump();
  // Its size bounds it: a write past 32m fails inside.
  json full = sh(writer, "head -c 40000000 /dev/zero > /var/agent/state/big");
  EXPECT_NE(full["exit_code"], 0);
  EXPECT_NE(full["stderr"].get<std::string>().find("No space left"), std::string::npos)
      << full.dump();
  sh(writer, "rm /var/agent/state/big");
  auto shown = call("GET", "/v1/sandboxes/" + writer, tok);
  EXPECT_NE(
      shown.body.find(R"("volumes":[{"name":"state","path":"/var/agent/state","readonly":false}])"),
      std::string::npos)
      << shown.body;
  EXPECT_EQ(shown.body.find(dir_), std::string::npos) << "no host path reaches a tenant";

  // In use: not deleted. Another project: neither seen nor mounted.
  auto in_use = call("DELETE", "/v1/volumes/state", tok);
  EXPECT_EQ(in_use.status, 409) << in_use.body;
  EXPECT_NE(in_use.body.find("mounted by sandbox"), std::string::npos) << in_use.body;
  EXPECT_EQ(call("GET", "/v1/volumes/state", other).status, 404);
  EXPECT_EQ(call("DELETE", "/v1/volumes/state", other).status, 404);
  EXPECT_EQ(json::parse(call("GET", "/v1/volumes", other).body)["volumes"], json::array());
  auto theirs = call("POST", "/v1/sandboxes", other,
                     R"({"volumes": [{"name": "state", "path": "/var/agent/state"}]})");
  EXPECT_EQ(theirs.status, 400) << theirs.body;
  EXPECT_NE(theirs.body.find("\"field\":\"volumes[0].name\""), std::string::npos) << theirs.body;
  for (const char* bad : {R"({"volumes": [{"name": "state", "path": "/usr/lib"}]})",
                          R"({"volumes": [{"name": "state", "path": "relative"}]})",
                          R"({"volumes": [{"name": "state", "path": "/a/../proc"}]})",
                          R"({"volumes": [{"name": "state", "path": "/x", "mode": "rw"}]})",
                          R"({"volumes": "state"})"}) {
    auto r = call("POST", "/v1/sandboxes", tok, bad);
    EXPECT_EQ(r.status, 400) << bad << ": " << r.body;
    EXPECT_NE(r.body.find("\"field\":\"volumes"), std::string::npos) << r.body;
  }

  // Both sandboxes gone: the data stays for the next one.
  EXPECT_EQ(call("DELETE", "/v1/sandboxes/" + writer, tok).status, 204);
  EXPECT_EQ(call("DELETE", "/v1/sandboxes/" + reader, tok).status, 204);
  const std::string later =
      create(tok, R"({"volumes": [{"name": "state", "path": "/var/agent/state"}]})");
  EXPECT_EQ(sh(later, "cat /var/agent/state/note")["stdout"], "kept\n");
  EXPECT_EQ(call("DELETE", "/v1/sandboxes/" + later, tok).status, 204);
  EXPECT_EQ(call("DELETE", "/v1/volumes/state", tok).status, 204);
  EXPECT_EQ(call("GET", "/v1/volumes/state", tok).status, 404);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/volumes/acme/state.img")) << "its data is gone";
  const std::string audit = call("GET", "/v1/audit", tok).body;
  EXPECT_NE(audit.find("volume.create"), std::string::npos);
  EXPECT_NE(audit.find("volume.delete"), std::string::npos);
}

// Issue 41 item 5: a server a background process runs on the sandbox's own
// loopback is reached through serve (its runner relays the bytes; the
// sandbox has no route): the method, the path below the port, the query,
// the headers but the client's token, and the body go in; the answer's
// status, headers and body come out. Nothing listening is a 502 naming the
// port; another project's token a 404.
TEST_F(ServeSessions, APortInsideIsReachedThroughServeAndTheRunner) {
  const std::string tok = token("acme");
  const std::string other = token("beta");
  serve();
  const std::string id = create(tok);
  const std::string base = "/v1/sandboxes/" + id;
  const std::string server = R"(import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self): self.reply()
    def do_POST(self): self.reply()
    def reply(self):
        n = int(self.headers.get('Content-Length') or 0)
        body = self.rfile.read(n)
        seen = ' '.join(sorted(k.lower() for k in self.headers.keys()))
        out = ('%s %s\n%s\nhost=%s\n' % (self.command, self.path, seen, self.headers['Host'])).encode() + body
        self.send_response(201 if self.command == 'POST' else 200)
        self.send_header('Content-Type', 'text/plain')
        self.send_header('X-Echo', 'yes')
        self.send_header('Content-Length', str(len(out)))
        self.end_headers()
        self.wfile.write(out)
    def log_message(self, *a): pass
http.server.HTTPServer(('127.0.0.1', 8000), H).serve_forever()
)";
  ASSERT_EQ(call("PUT", base + "/files?path=/workspace/server.py", tok, server).status, 201);
  start(tok, id, {{"argv", {"python3", "/workspace/server.py"}}, {"tag", "web"}});
  HttpReply got;
  for (int i = 0; i < 200; ++i) {  // until it listens
    got = call("GET", base + "/ports/8000/a/b?x=1&y=%20z", tok);
    if (got.status != 502) break;
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(got.header("content-type"), "text/plain");
  EXPECT_EQ(got.header("x-echo"), "yes");
  EXPECT_EQ(got.body.substr(0, got.body.find('\n')), "GET /a/b?x=1&y=%20z");
  EXPECT_EQ(got.body.find("authorization"), std::string::npos)
      << "the token stays out: " << got.body;
  EXPECT_EQ(got.body.find("x-ringfence"), std::string::npos) << got.body;
  EXPECT_NE(got.body.find("host=127.0.0.1:8000"), std::string::npos) << got.body;
  {
    HttpProbe p(port_);
    auto posted =
        p.request("POST", base + "/ports/8000/submit", tok, "payload=1",
                  {{"Content-Type", "application/x-www-form-urlencoded"}, {"X-Custom", "kept"}});
    EXPECT_EQ(posted.status, 201) << posted.body;
    EXPECT_NE(posted.body.find("POST /submit"), std::string::npos) << posted.body;
    EXPECT_NE(posted.body.find("x-custom"), std::string::npos) << posted.body;
    EXPECT_EQ(posted.body.substr(posted.body.size() - 9), "payload=1") << posted.body;
  }
  EXPECT_EQ(call("GET", base + "/ports/8000/", tok).body.substr(0, 6), "GET /\n");
  auto none = call("GET", base + "/ports/8001/", tok);
  EXPECT_EQ(none.status, 502) << none.body;
  EXPECT_NE(none.body.find("127.0.0.1:8001"), std::string::npos) << none.body;
  EXPECT_NE(none.body.find("\"field\":\"port\""), std::string::npos) << none.body;
  for (const char* bad : {"0", "65536", "http"}) {
    auto r = call("GET", base + "/ports/" + std::string(bad) + "/", tok);
    EXPECT_EQ(r.status, 400) << bad << ": " << r.body;
  }
  // A token for this port alone, to hand to a browser: it opens the port's
  // pages (then as a cookie), and nothing else; the port never sees it.
  auto shared = call("POST", base + "/ports/8000:share", tok, R"({"ttl": "10m"})");
  ASSERT_EQ(shared.status, 201) << shared.body;
  const std::string url = json::parse(shared.body)["url"];
  const std::string ptok = json::parse(shared.body)["token"];
  auto page = call("GET", url, "");
  EXPECT_EQ(page.status, 200) << page.body;
  EXPECT_EQ(page.body.substr(0, 6), "GET /\n") << "the token's query parameter stays out";
  const std::string cookie = page.header("set-cookie");
  EXPECT_NE(cookie.find("HttpOnly; SameSite=Strict"), std::string::npos) << cookie;
  EXPECT_NE(cookie.find("Path=" + base + "/ports/8000/"), std::string::npos) << cookie;
  {
    HttpProbe p(port_);
    auto asset = p.request("GET", base + "/ports/8000/app.js", "", "",
                           {{"Cookie", "theme=dark; " + cookie.substr(0, cookie.find(';'))}});
    EXPECT_EQ(asset.status, 200) << asset.body;
    EXPECT_NE(asset.body.find("cookie"), std::string::npos) << "the page's own cookie goes on";
    HttpProbe q(port_);
    auto api_route =
        q.request("GET", base, "", "", {{"Cookie", cookie.substr(0, cookie.find(';'))}});
    EXPECT_EQ(api_route.status, 401) << "the token opens no API route";
  }
  auto other_port = call("GET", base + "/ports/8001/?rf_port_token=" + ptok, "");
  EXPECT_EQ(other_port.status, 401) << other_port.body;
  EXPECT_NE(other_port.body.find("another sandbox or port"), std::string::npos) << other_port.body;
  std::string forged = ptok;
  forged[forged.size() - 2] = forged[forged.size() - 2] == 'A' ? 'B' : 'A';
  auto bad_token = call("GET", base + "/ports/8000/?rf_port_token=" + forged, "");
  EXPECT_EQ(bad_token.status, 401) << bad_token.body;
  EXPECT_EQ(call("POST", base + "/ports/8000:share", other, "{}").status, 404);
  EXPECT_EQ(call("POST", base + "/ports/8000:share", tok, R"({"ttl": "48h"})").status, 400);
  auto theirs = call("GET", base + "/ports/8000/", other);
  EXPECT_EQ(theirs.status, 404) << theirs.body;
  EXPECT_EQ(theirs.body.find("GET /"), std::string::npos) << "nothing of the port leaks";
  EXPECT_EQ(call("GET", base + "/ports/8000/", "").status, 401);
}

// A masked client frame (RFC 6455 5.2) of `payload`.
std::string ws_frame(const std::string& payload, int opcode = 1) {
  std::string f(1, static_cast<char>(0x80 | opcode));
  const unsigned char mask[4] = {0x12, 0x34, 0x56, 0x78};
  if (payload.size() < 126) {
    f.push_back(static_cast<char>(0x80 | payload.size()));
  } else if (payload.size() < 65536) {
    f.push_back(static_cast<char>(0x80 | 126));
    f.push_back(static_cast<char>(payload.size() >> 8));
    f.push_back(static_cast<char>(payload.size() & 0xff));
  } else {
    f.push_back(static_cast<char>(0x80 | 127));
    for (int i = 7; i >= 0; --i) f.push_back(static_cast<char>((payload.size() >> (8 * i)) & 0xff));
  }
  f.append(reinterpret_cast<const char*>(mask), 4);
  for (size_t i = 0; i < payload.size(); ++i)
    f.push_back(static_cast<char>(payload[i] ^ mask[i % 4]));
  return f;
}

// One unmasked server frame from `p`: {opcode, payload}; opcode -1 if none came.
std::pair<int, std::string> ws_read(HttpProbe& p, std::string& pending) {
  auto need = [&](size_t n) {
    if (pending.size() < n) {
      if (!p.read_at_least(n - pending.size(), 30s)) return false;
      pending += p.take_buffered();
    }
    return true;
  };
  if (!need(2)) return {-1, ""};
  const int op = static_cast<unsigned char>(pending[0]) & 15;
  size_t n = static_cast<unsigned char>(pending[1]) & 127;
  size_t at = 2;
  if (n == 126) {
    if (!need(4)) return {-1, ""};
    n = (static_cast<size_t>(static_cast<unsigned char>(pending[2])) << 8) |
        static_cast<unsigned char>(pending[3]);
    at = 4;
  } else if (n == 127) {
    if (!need(10)) return {-1, ""};
    n = 0;
    for (int i = 0; i < 8; ++i) n = (n << 8) | static_cast<unsigned char>(pending[2 + i]);
    at = 10;
  }
  if (!need(at + n)) return {-1, ""};
  std::string payload = pending.substr(at, n);
  pending.erase(0, at + n);
  return {op, payload};
}

// Item 5, the rest: an answer streams as it comes (its first bytes reach
// the client while the port has not finished writing), a WebSocket stays
// open both ways through serve, the worker's door and the runner, and a
// port is reached by host name too ({port}-{id}.DOMAIN). Hostile: another
// project's token, no token, a forged host.
TEST_F(ServeSessions, APortsAnswerStreamsAWebSocketStaysOpenAndAHostNameReachesIt) {
  const std::string tok = token("acme");
  const std::string other = token("beta");
  serve({"--port-domain", "ports.test"});
  const std::string id = create(tok);
  const std::string base = "/v1/sandboxes/" + id;
  // /big: 1 MiB, then (once /workspace/go exists) 63 MiB more, then close.
  const std::string streamer = R"(import http.server, os, time
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.0'
    def do_GET(self):
        if self.path != '/big':
            self.send_response(204); self.end_headers(); return
        self.send_response(200)
        self.send_header('Content-Type', 'application/octet-stream')
        self.end_headers()
        block = bytes(i % 251 for i in range(1 << 20))
        self.wfile.write(block); self.wfile.flush()
        while not os.path.exists('/workspace/go'): time.sleep(0.01)
        for _ in range(63): self.wfile.write(block)
    def log_message(self, *a): pass
http.server.HTTPServer(('127.0.0.1', 8000), H).serve_forever()
)";
  const std::string echo = R"(import socket, hashlib, base64, struct, threading
def serve(c):
    data = b''
    while b'\r\n\r\n' not in data:
        d = c.recv(4096)
        if not d: return
        data += d
    head, buf = data.split(b'\r\n\r\n', 1)
    lines = head.split(b'\r\n')
    keys = [l.split(b':', 1)[1].strip() for l in lines if l.lower().startswith(b'sec-websocket-key')]
    if not keys:
        c.sendall(b'HTTP/1.1 426 Upgrade Required\r\nContent-Length: 0\r\nConnection: close\r\n\r\n')
        c.close(); return
    key = keys[0]
    path = lines[0].split(b' ')[1]
    acc = base64.b64encode(hashlib.sha1(key + b'258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest())
    c.sendall(b'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ' + acc + b'\r\n\r\n')
    def need(n):
        nonlocal buf
        while len(buf) < n:
            d = c.recv(65536)
            if not d: raise EOFError
            buf += d
        out, buf = buf[:n], buf[n:]
        return out
    def send(op, p):
        h = bytes([0x80 | op])
        if len(p) < 126: h += bytes([len(p)])
        elif len(p) < 65536: h += bytes([126]) + struct.pack('>H', len(p))
        else: h += bytes([127]) + struct.pack('>Q', len(p))
        c.sendall(h + p)
    send(1, b'path ' + path)
    while True:
        b0, b1 = need(2)
        op, n = b0 & 15, b1 & 127
        if n == 126: n = struct.unpack('>H', need(2))[0]
        elif n == 127: n = struct.unpack('>Q', need(8))[0]
        mask = need(4) if b1 & 128 else b'\0\0\0\0'
        p = need(n)
        p = bytes(x ^ mask[i % 4] for i, x in enumerate(p))
        if op == 8:
            send(8, b''); c.close(); return
        send(op, p)
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', 8001)); s.listen()
while True:
    c, _ = s.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
)";
  ASSERT_EQ(call("PUT", base + "/files?path=/workspace/stream.py", tok, streamer).status, 201);
  ASSERT_EQ(call("PUT", base + "/files?path=/workspace/echo.py", tok, echo).status, 201);
  start(tok, id, {{"argv", {"python3", "/workspace/stream.py"}}});
  start(tok, id, {{"argv", {"python3", "/workspace/echo.py"}}});
  for (int i = 0; i < 200; ++i) {  // until both listen
    const int a = call("GET", base + "/ports/8000/", tok).status;
    const int b = call("GET", base + "/ports/8001/", tok).status;
    if (a == 502 || b == 502) {
      std::this_thread::sleep_for(50ms);
      continue;
    }
    break;
  }

  // The first MiB comes while the port still waits (nothing is held back
  // for the whole answer), then the rest, 64 MiB in all, byte for byte.
  {
    HttpProbe p(port_);
    ASSERT_TRUE(p.send_raw("GET " + base + "/ports/8000/big HTTP/1.1\r\nHost: x\r\n" +
                           "Authorization: Bearer " + tok + "\r\nConnection: close\r\n\r\n"));
    ASSERT_TRUE(p.read_at_least(1u << 20, 30s))
        << "the first MiB did not come before the port finished: " << p.buffered().size();
    ASSERT_EQ(call("PUT", base + "/files?path=/workspace/go", tok, "go").status, 201);
    EXPECT_TRUE(p.closed_within(120s)) << "the answer did not end";
    std::string raw = p.take_buffered();
    const size_t head_end = raw.find("\r\n\r\n");
    ASSERT_NE(head_end, std::string::npos);
    EXPECT_NE(raw.substr(0, head_end).find("Transfer-Encoding: chunked"), std::string::npos)
        << raw.substr(0, head_end);
    // Chunks decoded.
    std::string body;
    size_t at = head_end + 4;
    bool ended = false;
    while (at < raw.size()) {
      const size_t eol = raw.find("\r\n", at);
      ASSERT_NE(eol, std::string::npos);
      const size_t n = std::stoul(raw.substr(at, eol - at), nullptr, 16);
      if (n == 0) {
        ended = true;
        break;
      }
      body.append(raw, eol + 2, n);
      at = eol + 2 + n + 2;
    }
    EXPECT_TRUE(ended) << "the chunked body ends whole";
    ASSERT_EQ(body.size(), 64u << 20);
    bool same = true;
    for (size_t i = 0; i < body.size() && same; i += 4099) {
      same = static_cast<unsigned char>(body[i]) == (i % (1u << 20)) % 251;
    }
    EXPECT_TRUE(same) << "the bytes are the port's";
  }

  // A WebSocket: the handshake's answer is the port's 101, then frames
  // both ways, small and large (a 200 KiB one crosses many pieces), then a
  // close that ends both connections.
  auto websocket = [&](HttpProbe& p, const std::string& head) {
    EXPECT_TRUE(p.send_raw(head + "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                                  "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                                  "Sec-WebSocket-Version: 13\r\n\r\n"));
    std::string pending;
    while (pending.find("\r\n\r\n") == std::string::npos && p.read_some(30s)) {
      pending += p.take_buffered();
    }
    const size_t end = pending.find("\r\n\r\n");
    if (end == std::string::npos) return std::string("no head: ") + pending;
    std::string head_text = pending.substr(0, end);
    pending.erase(0, end + 4);
    if (head_text.rfind("HTTP/1.1 101", 0) != 0) return head_text;
    // s3pPLMBiTxaQ9kYGzzhZRbK+xOo= is RFC 6455's answer to this key.
    EXPECT_NE(head_text.find("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="),
              std::string::npos)
        << head_text;
    auto [op0, path] = ws_read(p, pending);
    EXPECT_EQ(op0, 1);
    EXPECT_TRUE(p.send_raw(ws_frame("hello")));
    auto [op1, echoed] = ws_read(p, pending);
    EXPECT_EQ(op1, 1);
    EXPECT_EQ(echoed, "hello");
    std::string big(200 * 1024, 'x');
    for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i % 26);
    EXPECT_TRUE(p.send_raw(ws_frame(big, 2)));
    auto [op2, back] = ws_read(p, pending);
    EXPECT_EQ(op2, 2);
    EXPECT_TRUE(back == big) << back.size();
    EXPECT_TRUE(p.send_raw(ws_frame("", 8)));
    auto [op3, bye] = ws_read(p, pending);
    EXPECT_EQ(op3, 8);
    EXPECT_TRUE(p.closed_within(10s)) << "the port closed, and so does the client's connection";
    return std::string("101 ") + path;
  };
  {
    HttpProbe p(port_);
    EXPECT_EQ(websocket(p, "GET " + base + "/ports/8001/chat?room=1 HTTP/1.1\r\nHost: x\r\n" +
                               "Authorization: Bearer " + tok + "\r\n"),
              "101 path /chat?room=1");
  }
  // A port token opens its WebSocket too (a browser sends no Authorization).
  auto shared = call("POST", base + "/ports/8001:share", tok, "{}");
  ASSERT_EQ(shared.status, 201) << shared.body;
  {
    HttpProbe p(port_);
    const std::string url = json::parse(shared.body)["url"];
    EXPECT_EQ(websocket(p, "GET " + url + " HTTP/1.1\r\nHost: x\r\n"), "101 path /");
  }
  {
    HttpProbe p(port_);
    EXPECT_EQ(websocket(p, "GET " + base + "/ports/8001/ HTTP/1.1\r\nHost: x\r\n" +
                               "Authorization: Bearer " + other + "\r\n")
                  .substr(0, 12),
              "HTTP/1.1 404")
        << "another project's token: an unknown sandbox, no handshake";
  }

  // Listed on the sandbox: what listens inside now, with where to reach it.
  auto listed = call("GET", base + "/ports", tok);
  ASSERT_EQ(listed.status, 200) << listed.body;
  const json ports = json::parse(listed.body)["ports"];
  ASSERT_EQ(ports.size(), 2u) << listed.body;
  EXPECT_EQ(ports[0]["port"], 8000);
  EXPECT_EQ(ports[0]["address"], "127.0.0.1");
  EXPECT_EQ(ports[0]["url"], base + "/ports/8000/");
  EXPECT_EQ(ports[1]["port"], 8001);
  EXPECT_EQ(ports[1]["host"], "8001-" + id + ".ports.test");
  EXPECT_EQ(call("GET", base + "/ports", other).status, 404) << "another project's: unknown";
  {
    Cli cli({"sandbox", "ports", "--api", "http://127.0.0.1:" + std::to_string(port_), id},
            std::nullopt, {"RINGFENCE_TOKEN=" + tok});
    ASSERT_EQ(cli.wait(30s), 0) << cli.err();
    EXPECT_NE(cli.out().find("8001   127.0.0.1        8001-" + id + ".ports.test"),
              std::string::npos)
        << cli.out();
  }

  // By host name: the whole target is the port's.
  auto by_host = [&](const std::string& host, const std::string& target, const std::string& t) {
    HttpProbe p(port_);
    p.send_raw("GET " + target + " HTTP/1.1\r\nHost: " + host + "\r\n" +
               (t.empty() ? "" : "Authorization: Bearer " + t + "\r\n") + "\r\n");
    return p.read_reply();
  };
  const std::string host = "8001-" + id + ".ports.test";
  auto plain = by_host(host + ":" + std::to_string(port_), "/", tok);
  EXPECT_EQ(plain.status, 426) << "the echo server answers no plain GET: " << plain.body;
  {
    HttpProbe p(port_);
    EXPECT_EQ(websocket(p, "GET /deep/path HTTP/1.1\r\nHost: " + host + "\r\n" +
                               "Authorization: Bearer " + tok + "\r\n"),
              "101 path /deep/path");
  }
  auto theirs = by_host(host, "/", other);
  EXPECT_EQ(theirs.status, 404) << theirs.body;
  EXPECT_EQ(by_host(host, "/", "").status, 401);
  auto forged = by_host(host + ".evil", "/v1/sandboxes", tok);
  EXPECT_EQ(forged.status, 200) << "not under the domain: an ordinary API request";
  auto upper = by_host("8001-" + id + ".PORTS.test", "/", tok);
  EXPECT_EQ(upper.status, 426) << "a domain is case-blind: " << upper.body;

  // Each request and each WebSocket is in the project's audit log, by its token.
  auto audit = call("GET", "/v1/audit?limit=1000", tok);
  ASSERT_EQ(audit.status, 200);
  bool big_seen = false, ws_seen = false;
  const json events = json::parse(audit.body)["events"];
  for (const auto& e : events) {
    if (e["kind"] == "port.request" && e["detail"]["path"] == "/big") {
      big_seen = e["detail"]["status"] == 200 && e["detail"]["bytes"] == (64u << 20) &&
                 e["sandbox"] == id && e["detail"]["port"] == 8000;
    }
    if (e["kind"] == "port.websocket" && e["detail"]["path"] == "/chat?room=1") ws_seen = true;
  }
  EXPECT_TRUE(big_seen) << audit.body;
  EXPECT_TRUE(ws_seen) << audit.body;
}

// Issue 42 item 1, pause and resume through serve: a paused sandbox's
// processes make no progress (a counter printed every 10 ms stops) and lose
// nothing (after resume the counter goes on from where it was, every number
// once); its state says so; a request that needs the inside resumes it;
// each is audited; another project's token finds nothing to pause.
TEST_F(ServeSessions, APausedSandboxStopsAndGoesOnLosingNothing) {
  const std::string tok = token("acme");
  const std::string other = token("beta");
  serve();
  const std::string id = create(tok);
  const std::string base = "/v1/sandboxes/" + id;
  const json p =
      start(tok, id, {{"cmd", "i=0; while :; do echo $i; i=$((i+1)); sleep 0.01; done"}});
  const std::string out = base + "/processes/" + std::to_string(p.value("pid", 0)) + "/output";
  auto read_from = [&](uint64_t from, int wait_ms, uint64_t* next) {
    auto r = call(
        "GET", out + "?from=" + std::to_string(from) + "&wait_ms=" + std::to_string(wait_ms), tok);
    EXPECT_EQ(r.status, 200) << r.body;
    const json j = json::parse(r.body);
    *next = j["next"].get<uint64_t>();
    return j["stdout"].is_string() ? j["stdout"].get<std::string>() : std::string();
  };
  std::string all;
  uint64_t next = 0;
  while (all.find("\n5\n") == std::string::npos) all += read_from(next, 1000, &next);

  auto paused = call("POST", base + ":pause", tok);
  ASSERT_EQ(paused.status, 200) << paused.body;
  EXPECT_EQ(json::parse(paused.body)["state"], "paused");
  EXPECT_EQ(json::parse(call("GET", base, tok).body)["state"], "paused");
  // What it printed before it froze is still read (from here, not inside)...
  all += read_from(next, 0, &next);
  const uint64_t frozen_at = next;
  // ...and nothing more comes while it is paused, however long one waits.
  EXPECT_EQ(read_from(next, 300, &next), "");
  EXPECT_EQ(next, frozen_at);
  EXPECT_EQ(json::parse(call("GET", base, tok).body)["state"], "paused")
      << "reading its output left it paused";

  auto resumed = call("POST", base + ":resume", tok);
  ASSERT_EQ(resumed.status, 200) << resumed.body;
  EXPECT_EQ(json::parse(resumed.body)["state"], "running");
  const size_t before = std::count(all.begin(), all.end(), '\n');
  while (std::count(all.begin(), all.end(), '\n') < static_cast<long>(before + 20)) {
    all += read_from(next, 1000, &next);
  }
  // Every number once, in order: nothing lost across the pause.
  std::istringstream lines(all);
  std::string line;
  int expect = 0;
  while (std::getline(lines, line)) {
    ASSERT_EQ(line, std::to_string(expect)) << all;
    ++expect;
  }

  // A request that needs the inside resumes a paused sandbox.
  ASSERT_EQ(call("POST", base + ":pause", tok).status, 200);
  auto ran = call("POST", base + "/exec", tok, R"({"cmd": "echo still here"})");
  ASSERT_EQ(ran.status, 200) << ran.body;
  EXPECT_EQ(json::parse(ran.body)["stdout"], "still here\n");
  EXPECT_EQ(json::parse(call("GET", base, tok).body)["state"], "running");

  EXPECT_EQ(call("POST", base + ":pause", other).status, 404) << "another project's: unknown";
  EXPECT_EQ(call("POST", "/v1/sandboxes/rf-000000000000:resume", tok).status, 404);
  {
    Cli cli({"sandbox", "pause", "--api", "http://127.0.0.1:" + std::to_string(port_), id},
            std::nullopt, {"RINGFENCE_TOKEN=" + tok});
    ASSERT_EQ(cli.wait(30s), 0) << cli.err();
    EXPECT_EQ(cli.out(), id + " paused\n");
  }
  // Destroyed while paused: gone at once.
  EXPECT_EQ(call("DELETE", base, tok).status, 204);
  EXPECT_EQ(call("GET", base, tok).status, 404);

  auto audit = call("GET", "/v1/audit?limit=1000", tok);
  ASSERT_EQ(audit.status, 200);
  int pauses = 0, asked = 0, autos = 0;
  const json events = json::parse(audit.body)["events"];
  for (const auto& e : events) {
    if (e["sandbox"] != id) continue;
    if (e["kind"] == "sandbox.pause") ++pauses;
    if (e["kind"] == "sandbox.resume" && e["detail"]["why"] == "asked") ++asked;
    if (e["kind"] == "sandbox.resume" && e["detail"]["why"] == "auto") ++autos;
  }
  EXPECT_EQ(pauses, 3);
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(autos, 1);
}

// From the CLI: `sandbox process start | list | logs | kill --api`, and a
// terminal on a sandbox that exists (`sandbox shell --attach ID`), with the
// project's token in the environment only.
TEST_F(ServeSessions, TheCliStartsFollowsAndKillsProcessesAndAttachesAShell) {
  const std::string tok = token("acme");
  serve();
  const std::string id = create(tok);
  const std::string api = "http://127.0.0.1:" + std::to_string(port_);
  const std::vector<std::string> env = {"RINGFENCE_TOKEN=" + tok};
  // `sandbox WORDS... --api URL REST...`: the flag right after the (sub)command's words.
  auto cli = [&](std::vector<std::string> args, std::optional<std::string> in = std::nullopt) {
    // `process start`; `shell`, `watch`, `create`, `port`
    const size_t words = args[0] == "process" ? 2 : 1;
    args.insert(args.begin() + static_cast<long>(words), {"--api", api});
    args.insert(args.begin(), "sandbox");
    return std::make_unique<Cli>(args, in, env);
  };
  auto started =
      cli({"process", "start", "--tag", "srv", id, "--", "sh", "-c", "echo serving; sleep 1000"});
  ASSERT_EQ(started->wait(60s), 0) << started->err();
  const std::string pid = started->out().substr(0, started->out().find('\n'));
  ASSERT_FALSE(pid.empty());
  auto list = cli({"process", "list", id});
  ASSERT_EQ(list->wait(30s), 0) << list->err();
  EXPECT_NE(list->out().find(pid + " "), std::string::npos) << list->out();
  EXPECT_NE(list->out().find("srv"), std::string::npos) << list->out();
  auto follow = cli({"process", "logs", "--follow", id, pid});
  EXPECT_TRUE(follow->stdout_shows("serving", 30s)) << follow->out() << follow->err();
  auto kill = cli({"process", "kill", "--signal", "TERM", id, pid});
  ASSERT_EQ(kill->wait(30s), 0) << kill->err();
  EXPECT_EQ(follow->wait(30s), 143) << follow->err();
  // A followed stream answered with an error (a JSON body of known length).
  auto no_such = cli({"process", "logs", "--follow", id, "999999"});
  EXPECT_EQ(no_such->wait(30s), 125);
  EXPECT_NE(no_such->err().find("HTTP 404: no process 999999"), std::string::npos)
      << no_such->err();
  auto unknown = cli({"process", "kill", id, "999999"});
  EXPECT_EQ(unknown->wait(30s), 2);
  EXPECT_NE(unknown->err().find("HTTP 404"), std::string::npos) << unknown->err();

  // `sandbox watch`: a line per change, until its directory goes.
  ASSERT_EQ(call("POST", "/v1/sandboxes/" + id + "/files:mkdir?path=/workspace/seen", tok).status,
            201);
  auto watch = cli({"watch", id, "/workspace/seen"});
  auto started_watch = [&] {
    // Its first event comes once the watch runs: poke until one does.
    for (int i = 0; i < 100 && watch->out().empty(); ++i) {
      call("PUT", "/v1/sandboxes/" + id + "/files?path=/workspace/seen/f", tok, "x");
      watch->stdout_shows("/workspace/seen/f", 100ms);
    }
    return !watch->out().empty();
  };
  ASSERT_TRUE(started_watch()) << watch->err();
  call("DELETE", "/v1/sandboxes/" + id + "/files?path=/workspace/seen&recursive=true", tok);
  EXPECT_EQ(watch->wait(30s), 0) << watch->err();
  EXPECT_NE(watch->out().find("remove /workspace/seen/f\n"), std::string::npos) << watch->out();
  EXPECT_NE(watch->err().find("the watch ended: the watched directory"), std::string::npos)
      << watch->err();
  // `volume create | list | delete`, and `sandbox create --volume NAME:PATH[:ro]`.
  auto vol = std::make_unique<Cli>(
      std::vector<std::string>{"volume", "create", "--api", api, "notes", "--size", "32m"},
      std::nullopt, env);
  ASSERT_EQ(vol->wait(30s), 0) << vol->err();
  EXPECT_EQ(vol->out(), "notes 32m\n");
  auto vols = std::make_unique<Cli>(std::vector<std::string>{"volume", "list", "--api", api},
                                    std::nullopt, env);
  ASSERT_EQ(vols->wait(30s), 0) << vols->err();
  EXPECT_NE(vols->out().find("notes "), std::string::npos) << vols->out();
  auto mounted = cli({"create", "--volume", "notes:/data:ro", "--json"});
  ASSERT_EQ(mounted->wait(60s), 0) << mounted->err();
  EXPECT_NE(mounted->out().find(R"("volumes":[{"name":"notes","path":"/data","readonly":true}])"),
            std::string::npos)
      << mounted->out();
  auto bad_volume = cli({"create", "--volume", "notes"});
  EXPECT_EQ(bad_volume->wait(30s), 2);
  EXPECT_NE(bad_volume->err().find("--volume notes: expected NAME:PATH"), std::string::npos)
      << bad_volume->err();
  const std::string holder = json::parse(mounted->out())["id"];
  ASSERT_EQ(call("DELETE", "/v1/sandboxes/" + holder, tok).status, 204);
  auto drop = std::make_unique<Cli>(
      std::vector<std::string>{"volume", "delete", "--api", api, "notes"}, std::nullopt, env);
  EXPECT_EQ(drop->wait(30s), 0) << drop->err();
  // `sandbox port`: a server inside, asked; and a URL for a browser.
  ASSERT_EQ(
      call("PUT", "/v1/sandboxes/" + id + "/files?path=/tmp/www/x.txt", tok, "served\n").status,
      201);
  auto web = cli({"process", "start", id, "--", "python3", "-m", "http.server", "8000", "--bind",
                  "127.0.0.1", "--directory", "/tmp/www"});
  ASSERT_EQ(web->wait(30s), 0) << web->err();
  std::unique_ptr<Cli> fetched;
  for (int i = 0; i < 100; ++i) {
    fetched = cli({"port", id, "8000", "/x.txt"});
    if (fetched->wait(30s) == 0) break;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(fetched->out(), "served\n") << fetched->err();
  auto missing_page = cli({"port", id, "8000", "/nope"});
  EXPECT_EQ(missing_page->wait(30s), 1);
  EXPECT_NE(missing_page->err().find("HTTP 404"), std::string::npos) << missing_page->err();
  auto shared = cli({"port", id, "8000", "--share", "--ttl", "5m"});
  ASSERT_EQ(shared->wait(30s), 0) << shared->err();
  EXPECT_EQ(
      shared->out().rfind(api + "/v1/sandboxes/" + id + "/ports/8000/?rf_port_token=rfp1.", 0), 0u)
      << shared->out();
  // A shell on the sandbox that exists, its input from a pipe.
  auto shell = cli({"shell", "--attach", id}, std::string("echo attached-$((1+2))\nexit 4\n"));
  EXPECT_EQ(shell->wait(60s), 4) << shell->out() << shell->err();
  EXPECT_NE(shell->out().find("attached-3"), std::string::npos) << shell->out();
  Cli no_api({"sandbox", "shell", "--attach", id}, std::nullopt, {"RINGFENCE_TOKEN=" + tok});
  EXPECT_EQ(no_api.wait(30s), 2);
  EXPECT_NE(no_api.err().find("--api"), std::string::npos) << no_api.err();
}

}  // namespace
}  // namespace rf::testing
