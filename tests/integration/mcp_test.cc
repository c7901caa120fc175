// The MCP server (issue 14) driven by the official MCP TypeScript clients
// from the npm registry (tests/js/npm, pinned): the v1 SDK speaking
// 2025-11-25 and the v2 client pinned to 2026-07-28, each over stdio
// (`ringfence mcp`) and Streamable HTTP (`ringfence serve`'s /mcp). The
// client script (tests/js/mcp_client.mjs) creates a sandbox, runs a command,
// writes, reads and lists a file, runs code once and destroys the sandbox;
// the test checks every step. Raw JSON-RPC checks what no polite client
// sends: another project's sandbox, foreign origins, batches, versions.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "support/ci_skip.h"
#include "support/cli_process.h"
#include "support/http_probe.h"
#include "support/serve_process.h"

namespace rf::testing {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

class McpClients : public ::testing::TestWithParam<std::pair<std::string, std::string>> {
 protected:
  static void SetUpTestSuite() {
    const auto [out, code] = run_capture(std::string(RF_JS_DIR) + "/install.sh 2>&1");
    installed_ = code == 0;
    install_log_ = out;
  }
  void SetUp() override {
    if (::geteuid() != 0) RF_SKIP() << "the MCP tools make native sandboxes, which need root";
    ASSERT_TRUE(installed_) << "npm ci of the MCP clients failed: " << install_log_;
    char tmpl[] = "/tmp/rf-mcp-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    if (server_) {
      server_->signal(SIGTERM);
      EXPECT_EQ(server_->wait(30s), 0) << server_->err();
    }
    if (worker_) {
      worker_->signal(SIGTERM);
      EXPECT_EQ(worker_->wait(60s), 0) << worker_->err();
    }
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::string token(const std::string& project) { return make_token(dir_, project); }
  // serve, and a worker whose door holds the API's sandboxes (issue 39).
  void serve() {
    worker_ = start_door_worker(dir_);
    server_ = start_serve(dir_, &port_);
    ASSERT_NE(port_, 0);
  }
  // The client script's steps, by name.
  std::map<std::string, json> drive(const std::string& sdk, const std::string& transport,
                                    const std::string& token = "") {
    std::string cmd = "node " + std::string(RF_JS_DIR) + "/mcp_client.mjs --sdk " + sdk +
                      " --transport " + transport;
    if (transport == "stdio") {
      cmd += " --command " + std::string(RF_CLI_PATH) + " mcp --project acme";
    } else {
      cmd += " --url http://127.0.0.1:" + std::to_string(port_) + "/mcp --token " + token;
    }
    const auto [out, code] = run_capture("timeout 120 " + cmd + " 2>" + dir_ + "/client.err");
    EXPECT_EQ(code, 0) << out;
    return script_steps(out);
  }

  static inline bool installed_ = false;
  static inline std::string install_log_;
  std::string dir_;
  std::unique_ptr<Cli> server_;
  std::unique_ptr<Cli> worker_;
  int port_ = 0;
};

TEST_P(McpClients, AnOfficialClientUsesEveryTool) {
  const auto& [sdk, transport] = GetParam();
  std::string tok;
  if (transport == "http") {
    tok = token("acme");
    serve();
  }
  auto steps = drive(sdk, transport, tok);
  ASSERT_FALSE(steps.count("error")) << steps["error"].dump();
  ASSERT_TRUE(steps.count("done")) << "the script did not finish";
  EXPECT_EQ(steps["connected"]["server"]["name"], "ringfence");
  if (sdk == "v2") {
    EXPECT_EQ(steps["connected"]["version"], "2026-07-28");
  } else if (transport == "http") {
    EXPECT_EQ(steps["connected"]["version"], "2025-11-25");
  }
  json names = {"run_code",
                "sandbox_create",
                "sandbox_destroy",
                "sandbox_exec",
                "sandbox_file_list",
                "sandbox_file_mkdir",
                "sandbox_file_move",
                "sandbox_file_read",
                "sandbox_file_remove",
                "sandbox_file_stat",
                "sandbox_file_watch",
                "sandbox_file_write",
                "sandbox_pause",
                "sandbox_port_fetch",
                "sandbox_ports",
                "sandbox_process_input",
                "sandbox_process_list",
                "sandbox_process_output",
                "sandbox_process_signal",
                "sandbox_process_start",
                "sandbox_resume"};
  if (transport == "http") {  // serve's lifetimes and volumes
    for (const char* n : {"sandbox_set_timeout", "volume_create", "volume_delete", "volume_list"})
      names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(steps["tools"]["names"], names);
  EXPECT_EQ(steps["tools"]["schemas_ok"], true);
  EXPECT_EQ(steps["create"]["isError"], false);
  EXPECT_EQ(steps["create"]["memory"], "256m");
  const json exec = steps["exec"];
  EXPECT_EQ(exec["isError"], false);
  EXPECT_EQ(exec["structured"]["exit_code"], 4);
  EXPECT_EQ(exec["structured"]["stderr"], "oops\n");
  const std::string out = exec["structured"]["stdout"];
  EXPECT_EQ(out.rfind("hello from ", 0), 0u) << out;
  EXPECT_NE(out, "hello from 0\n") << "tools never run as root";
  EXPECT_NE(exec["text"].get<std::string>().find("exit_code: 4"), std::string::npos);
  EXPECT_EQ(steps["write"]["isError"], false);
  EXPECT_EQ(steps["read"]["text"], "written by MCP\n");
  EXPECT_EQ(steps["list"]["names"], json({"note.txt"}));
  // A background process on either door (issue 41), every answer checked
  // by the client against its tool's outputSchema.
  EXPECT_EQ(steps["process_start"]["isError"], false) << steps["process_start"].dump();
  EXPECT_EQ(steps["process_start"]["state"], "running");
  EXPECT_EQ(steps["process"]["seen"], "up\ngot-x\n") << steps["process"].dump();
  EXPECT_EQ(steps["process"]["tags"], json({"srv"}));
  EXPECT_EQ(steps["process"]["state"], "exited");
  EXPECT_EQ(steps["process"]["exit_code"], 143) << "TERM ended it";
  EXPECT_EQ(steps["watch"]["isError"], false) << steps["watch"].dump();
  const json created = {{"type", "create"}, {"path", "/workspace/watched/new.txt"}, {"dir", false}};
  ASSERT_TRUE(steps["watch"]["events"].is_array()) << steps["watch"].dump();
  EXPECT_EQ(steps["watch"]["events"][0], created) << steps["watch"].dump();
  EXPECT_EQ(steps["port"]["isError"], false) << steps["port"].dump();
  EXPECT_EQ(steps["port"]["status"], 200);
  EXPECT_EQ(steps["port"]["body"], "served\n");
  EXPECT_EQ(steps["ports"]["isError"], false) << steps["ports"].dump();
  EXPECT_EQ(steps["ports"]["ports"], json::array({{{"port", 8000}, {"address", "127.0.0.1"}}}))
      << "what listens inside, read from its own /proc/net/tcp";
  EXPECT_EQ(steps["run_code"]["stdout"], "45 True\n");
  EXPECT_EQ(steps["unknown_sandbox"]["isError"], true);
  EXPECT_NE(steps["unknown_sandbox"]["text"].get<std::string>().find("no sandbox rf-000000000000"),
            std::string::npos);
  EXPECT_EQ(steps["unknown_argument"]["isError"], true);
  EXPECT_NE(steps["unknown_argument"]["text"].get<std::string>().find("\"sudo\""),
            std::string::npos);
  EXPECT_EQ(steps["unknown_tool"]["threw"], true);
  EXPECT_NE(
      steps["unknown_tool"]["message"].get<std::string>().find("approve_credential not found"),
      std::string::npos);
  EXPECT_EQ(steps["destroy"]["isError"], false);
  if (transport == "http") {
    EXPECT_EQ(steps["volumes"]["errors"], json::array()) << steps["volumes"].dump();
    EXPECT_EQ(steps["volumes"]["created"], 32 << 20);
    EXPECT_EQ(steps["volumes"]["listed"], json({"notes"}));
    EXPECT_EQ(steps["volumes"]["stdout"], "kept\n");
    EXPECT_EQ(steps["volumes"]["deleted"], true);
  }
  // The stdio server ended with its client; nothing it made is left.
  Cli inventory({"sandbox", "list", "--backend", "native", "--json"});
  inventory.wait(30s);
  EXPECT_EQ(inventory.out().find(steps["create"]["id"].get<std::string>()), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(SdkAndTransport, McpClients,
                         ::testing::Values(std::pair<std::string, std::string>{"v1", "stdio"},
                                           std::pair<std::string, std::string>{"v2", "stdio"},
                                           std::pair<std::string, std::string>{"v1", "http"},
                                           std::pair<std::string, std::string>{"v2", "http"}),
                         [](const auto& info) {
                           return info.param.first + "_" + info.param.second;
                         });

class McpHttp : public McpClients {};

TEST_F(McpHttp, HostileMessagesGetExactAnswersAndProjectsStayApart) {
  const std::string a = token("alpha");
  const std::string b = token("beta");
  serve();
  auto rpc = [&](const std::string& tok, const json& message,
                 std::map<std::string, std::string> headers = {}) {
    HttpProbe p(port_);
    headers.emplace("Content-Type", "application/json");
    headers.emplace("Accept", "application/json, text/event-stream");
    return p.request("POST", "/mcp", tok, message.dump(), headers);
  };
  const json meta = {{"io.modelcontextprotocol/protocolVersion", "2026-07-28"}};
  auto tool = [&](const std::string& tok, const std::string& name, const json& args) {
    auto r = rpc(tok, {{"jsonrpc", "2.0"},
                       {"id", 1},
                       {"method", "tools/call"},
                       {"params", {{"name", name}, {"arguments", args}, {"_meta", meta}}}});
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body);
  };
  const json made = tool(a, "sandbox_create", json::object());
  const std::string id = made["result"]["structuredContent"]["sandbox_id"];
  EXPECT_EQ(made["result"]["resultType"], "complete");

  // B cannot reach A's sandbox by any tool.
  for (const auto& [name, args] : std::vector<std::pair<std::string, json>>{
           {"sandbox_exec", {{"sandbox_id", id}, {"cmd", "true"}}},
           {"sandbox_file_read", {{"sandbox_id", id}, {"path", "/workspace"}}},
           {"sandbox_file_write", {{"sandbox_id", id}, {"path", "/workspace/x"}, {"content", "x"}}},
           {"sandbox_file_list", {{"sandbox_id", id}, {"path", "/workspace"}}},
           {"sandbox_file_stat", {{"sandbox_id", id}, {"path", "/workspace"}}},
           {"sandbox_file_mkdir", {{"sandbox_id", id}, {"path", "/workspace/d"}}},
           {"sandbox_file_remove", {{"sandbox_id", id}, {"path", "/workspace/d"}}},
           {"sandbox_file_move",
            {{"sandbox_id", id}, {"from", "/workspace/a"}, {"to", "/workspace/b"}}},
           {"sandbox_set_timeout", {{"sandbox_id", id}, {"timeout", 60}}},
           {"sandbox_process_start", {{"sandbox_id", id}, {"cmd", "sleep 100"}}},
           {"sandbox_file_watch", {{"sandbox_id", id}, {"path", "/workspace"}, {"wait_ms", 1}}},
           {"sandbox_port_fetch", {{"sandbox_id", id}, {"port", 8000}}},
           {"sandbox_ports", {{"sandbox_id", id}}},
           {"sandbox_pause", {{"sandbox_id", id}}},
           {"sandbox_resume", {{"sandbox_id", id}}},
           {"sandbox_process_list", {{"sandbox_id", id}}},
           {"sandbox_process_output", {{"sandbox_id", id}, {"pid", 1}}},
           {"sandbox_process_input", {{"sandbox_id", id}, {"pid", 1}, {"data", "x"}}},
           {"sandbox_process_signal", {{"sandbox_id", id}, {"pid", 1}, {"signal", "KILL"}}},
           {"sandbox_destroy", {{"sandbox_id", id}}}}) {
    const json r = tool(b, name, args);
    EXPECT_EQ(r["result"]["isError"], true) << name;
    EXPECT_NE(r["result"]["content"][0]["text"].get<std::string>().find("no sandbox " + id),
              std::string::npos)
        << name << " " << r.dump();
  }
  EXPECT_EQ(tool(a, "sandbox_exec", {{"sandbox_id", id}, {"cmd", "true"}})["result"]["isError"],
            false)
      << "A's sandbox is still there";
  // A's volume: B neither sees, deletes nor mounts it.
  EXPECT_EQ(tool(a, "volume_create", {{"name", "mine"}, {"size", "16m"}})["result"]["isError"],
            false);
  EXPECT_EQ(tool(b, "volume_list", json::object())["result"]["structuredContent"]["volumes"],
            json::array());
  const json del = tool(b, "volume_delete", {{"name", "mine"}});
  EXPECT_EQ(del["result"]["isError"], true);
  EXPECT_NE(del.dump().find("no volume mine"), std::string::npos) << del.dump();
  const json mount =
      tool(b, "sandbox_create", {{"volumes", json::array({{{"name", "mine"}, {"path", "/v"}}})}});
  EXPECT_EQ(mount["result"]["isError"], true);
  EXPECT_NE(mount.dump().find("volumes[0].name"), std::string::npos) << mount.dump();

  // A's own file tools (issue 41): made, listed to a depth, moved, stated, removed.
  auto ok = [&](const std::string& name, const json& args) {
    const json r = tool(a, name, args);
    EXPECT_EQ(r["result"]["isError"], false) << name << " " << r.dump();
    return r["result"]["structuredContent"];
  };
  ok("sandbox_file_mkdir", {{"sandbox_id", id}, {"path", "/workspace/d/e"}, {"parents", true}});
  ok("sandbox_file_write", {{"sandbox_id", id}, {"path", "/workspace/d/e/f"}, {"content", "x"}});
  const json tree =
      ok("sandbox_file_list", {{"sandbox_id", id}, {"path", "/workspace/d"}, {"depth", 2}});
  EXPECT_EQ(tree["entries"].size(), 2u) << tree.dump();
  ok("sandbox_file_move",
     {{"sandbox_id", id}, {"from", "/workspace/d/e/f"}, {"to", "/workspace/g"}});
  EXPECT_EQ(ok("sandbox_file_stat", {{"sandbox_id", id}, {"path", "/workspace/g"}})["type"],
            "file");
  ok("sandbox_file_remove", {{"sandbox_id", id}, {"path", "/workspace/d"}, {"recursive", true}});
  const json gone = tool(a, "sandbox_file_stat", {{"sandbox_id", id}, {"path", "/workspace/d"}});
  EXPECT_EQ(gone["result"]["isError"], true);
  const json typo = tool(a, "sandbox_file_remove",
                         {{"sandbox_id", id}, {"path", "/workspace/g"}, {"recursive", "yes"}});
  EXPECT_EQ(typo["result"]["isError"], true) << "recursive must be a boolean";
  const json later = ok("sandbox_set_timeout", {{"sandbox_id", id}, {"timeout", "2h"}});
  EXPECT_TRUE(later["expires_at"].is_number_integer()) << later.dump();

  // No token: 401, as for every API route.
  EXPECT_EQ(rpc("", {{"jsonrpc", "2.0"}, {"id", 1}, {"method", "ping"}}).status, 401);
  // A browser page on another origin: 403 (DNS rebinding).
  auto foreign = rpc(a, {{"jsonrpc", "2.0"}, {"id", 1}, {"method", "ping"}},
                     {{"Origin", "http://evil.example"}});
  EXPECT_EQ(foreign.status, 403);
  EXPECT_EQ(rpc(a, {{"jsonrpc", "2.0"}, {"id", 1}, {"method", "ping"}},
                {{"Origin", "http://localhost:3000"}})
                .status,
            200);
  // Not JSON by type: 415; GET: 405 naming POST.
  {
    HttpProbe p(port_);
    auto r = p.request("POST", "/mcp", a, "{}", {{"Content-Type", "text/plain"}});
    EXPECT_EQ(r.status, 415);
    r = p.request("GET", "/mcp", a, "", {{"Accept", "text/event-stream"}});
    EXPECT_EQ(r.status, 405);
    EXPECT_EQ(r.header("allow"), "POST");
  }
  // A notification: 202 and nothing else.
  auto note = rpc(a, {{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}});
  EXPECT_EQ(note.status, 202);
  EXPECT_TRUE(note.body.empty());
  // A batch, an unknown method, a version we do not serve, bad params.
  auto err_of = [&](const json& message) {
    auto r = rpc(a, message);
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body)["error"];
  };
  EXPECT_EQ(err_of(json::array({{{"jsonrpc", "2.0"}, {"id", 1}, {"method", "ping"}}}))["code"],
            -32600);
  EXPECT_EQ(err_of({{"jsonrpc", "2.0"}, {"id", 2}, {"method", "resources/list"}})["code"], -32601);
  const json future = err_of(
      {{"jsonrpc", "2.0"},
       {"id", 3},
       {"method", "tools/list"},
       {"params", {{"_meta", {{"io.modelcontextprotocol/protocolVersion", "2099-01-01"}}}}}});
  EXPECT_EQ(future["code"], -32022);
  EXPECT_EQ(future["data"]["requested"], "2099-01-01");
  EXPECT_EQ(err_of({{"jsonrpc", "2.0"},
                    {"id", 4},
                    {"method", "tools/call"},
                    {"params", {{"name", "sandbox_exec"}, {"arguments", "ls"}}}})["code"],
            -32602);
  auto parse_error = [&] {
    HttpProbe p(port_);
    return p.request("POST", "/mcp", a, "{\"jsonrpc\":", {{"Content-Type", "application/json"}});
  }();
  EXPECT_EQ(parse_error.status, 400);
  EXPECT_EQ(json::parse(parse_error.body)["error"]["code"], -32700);
}

}  // namespace
}  // namespace rf::testing
