// The web console (issues 14 and 41) in a real browser: Debian's chromium,
// headless, driven by puppeteer-core (tests/js/console_test.mjs). The page is
// opened with a token; a sandbox made over the API appears in it with the
// memory and CPU it uses now beside its limits; a background process's and a
// call's output are shown; a search leaves out the other sandbox; the audit
// events are listed; a pending credential request (with its project, step,
// key, scope and reason) is approved by clicking; the sandbox is killed from
// its row; and a screenshot is saved.
// The store then holds the decision, made by the token (never a name the
// page could claim); the page loaded nothing from outside the server.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "store/store.h"
#include "store/workflow_store.h"
#include "support/ci_skip.h"
#include "support/cli_process.h"
#include "support/http_probe.h"
#include "support/serve_process.h"
#include "worker/worker.h"

namespace rf::testing {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

TEST(ConsoleBrowser, ASandboxAppearsAndAClickApprovesARequest) {
  if (::geteuid() != 0) RF_SKIP() << "the API's sandboxes are native, which need root";
  if (!std::filesystem::exists("/usr/bin/chromium")) {
    RF_SKIP() << "no /usr/bin/chromium (scripts/install-deps.sh installs it)";
  }
  ASSERT_EQ(std::system((std::string(RF_JS_DIR) + "/install.sh >/dev/null").c_str()), 0);
  char tmpl[] = "/tmp/rf-console-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;

  const std::string tok = make_token(dir, "acme", {"--name", "alice"});
  int port = 0;
  // The API's sandboxes live on a worker (issue 39).
  auto worker_process = start_door_worker(dir);
  auto server_process = start_serve(dir, &port);
  ASSERT_NE(port, 0);
  Cli& server = *server_process;
  const std::string url = "http://127.0.0.1:" + std::to_string(port);

  HttpProbe api(port);
  auto sb = api.request("POST", "/v1/sandboxes", tok,
                        R"({"limits": {"memory": "300m"}, "name": "web", "timeout": "2h"})");
  ASSERT_EQ(sb.status, 201) << sb.body;
  const std::string id = json::parse(sb.body)["id"];
  // Another sandbox, for the search to leave out.
  auto db = api.request("POST", "/v1/sandboxes", tok, R"({"name": "db"})");
  ASSERT_EQ(db.status, 201) << db.body;
  const std::string db_id = json::parse(db.body)["id"];
  // A background process and a call, whose output the page shows.
  auto proc = api.request("POST", "/v1/sandboxes/" + id + "/processes", tok,
                          R"({"cmd": "echo hello from a process; sleep 600", "tag": "greeter"})");
  ASSERT_EQ(proc.status, 201) << proc.body;
  auto exec = api.request("POST", "/v1/sandboxes/" + id + "/exec", tok,
                          R"({"cmd": "echo call says hi; head -c 3000000 /dev/zero > /dev/null"})");
  ASSERT_EQ(exec.status, 200) << exec.body;

  // A credential request waiting for a human, as a JIT `ask` rule makes one.
  auto st = store::Store::open(worker::store_path(dir));
  ASSERT_TRUE(st.ok()) << st.error().to_string();
  store::ApprovalRow row;
  row.project_id = "acme";
  row.kind = "credential";
  // Its reason, written by whoever asked, carries a right-to-left override
  // and an escape: the cell shows them as text, never reorders its row.
  row.request_json = json{{"key", "GITHUB_TOKEN"},
                          {"scope", "repo:acme/site"},
                          {"reason", "publish"},
                          {"step", "deploy"},
                          {"message", "push the site\u202e\x1b[2J to acme/site"}}
                         .dump();
  auto approval = store::WorkflowStore(**st).request_approval(row);
  ASSERT_TRUE(approval.ok()) << approval.error().to_string();

  const std::string shot = dir + "/console.png";
  const std::string cmd = "timeout 120 node " + std::string(RF_JS_DIR) +
                          "/console_test.mjs --url " + url + " --token " + tok + " --sandbox " +
                          id + " --approval " + std::to_string(*approval) + " --search web" +
                          " --screenshot " + shot + " 2>" + dir + "/browser.err";
  const auto [out, code] = run_capture(cmd);
  EXPECT_EQ(code, 0) << out;
  auto steps = script_steps(out);
  ASSERT_FALSE(steps.count("error")) << steps["error"].dump();
  ASSERT_TRUE(steps.count("done")) << out;
  EXPECT_EQ(steps["live"]["url"], url + "/") << "the token left the address bar";
  const json cells = steps["sandbox"]["row"];
  ASSERT_EQ(cells.size(), 12u) << cells.dump();
  EXPECT_EQ(cells[0], id);
  EXPECT_EQ(cells[1], "web");
  EXPECT_EQ(cells[2], "native");
  EXPECT_EQ(cells[4], "api");
  EXPECT_NE(cells[5], "-") << "its creation time: " << cells.dump();
  EXPECT_NE(cells[6], "-") << "its age: " << cells.dump();
  EXPECT_NE(cells[7], "-") << "its expiry: " << cells.dump();
  // Memory in use beside its limit ("1.2 MiB / 300m"), CPU beside none.
  const std::string memory = cells[8];
  EXPECT_NE(memory.find(" / 300m"), std::string::npos) << memory;
  EXPECT_TRUE(memory.find("MiB") != std::string::npos || memory.find("KiB") != std::string::npos)
      << memory;
  EXPECT_NE(cells[9].get<std::string>().find("% / none"), std::string::npos) << cells.dump();
  EXPECT_EQ(cells[11], "Processes Kill");
  EXPECT_NE(steps["process_output"]["text"].get<std::string>().find("hello from a process\n"),
            std::string::npos);
  const json call = steps["call"]["row"];
  ASSERT_EQ(call.size(), 11u) << call.dump();
  EXPECT_NE(call[1].get<std::string>().find("echo call says hi"), std::string::npos) << call.dump();
  EXPECT_EQ(call[2], "done");
  EXPECT_EQ(call[3], "0");
  EXPECT_EQ(call[4], id);
  EXPECT_NE(call[7], "-") << "its duration";
  EXPECT_NE(steps["call_output"]["text"].get<std::string>().find("call says hi"),
            std::string::npos);
  bool web_shown = false, db_hidden = false;
  for (const auto& r : steps["search"]["rows"]) {
    if (r[0] == id) web_shown = r[1] == false;
    if (r[0] == db_id) db_hidden = r[1] == true;
  }
  EXPECT_TRUE(web_shown && db_hidden) << steps["search"].dump();
  const std::string kinds = steps["events"]["kinds"].dump();
  EXPECT_NE(kinds.find("sandbox.create"), std::string::npos) << kinds;
  const json approval_row = steps["request"]["row"];
  ASSERT_EQ(approval_row.size(), 11u) << approval_row.dump();
  EXPECT_EQ(approval_row[3], "acme");
  EXPECT_EQ(approval_row[5], "deploy");
  EXPECT_EQ(approval_row[6], "GITHUB_TOKEN");
  EXPECT_EQ(approval_row[7], "repo:acme/site");
  EXPECT_EQ(approval_row[8], "publish");
  ASSERT_TRUE(steps.count("killed")) << out;
  HttpProbe after(port);
  EXPECT_EQ(after.request("GET", "/v1/sandboxes/" + id, tok).status, 404)
      << "killed from the console";
  EXPECT_EQ(steps["request"]["text"], "push the site\\u202e\\u001b[2J to acme/site");
  EXPECT_NE(steps["audit"]["text"].get<std::string>().find("intact"), std::string::npos);
  EXPECT_EQ(steps["done"]["errors"], json::array()) << "no script errors on the page";
  EXPECT_EQ(steps["done"]["external"], json::array()) << "nothing loaded from elsewhere";

  auto decided = store::WorkflowStore(**st).approval(*approval);
  ASSERT_TRUE(decided.ok());
  EXPECT_EQ(decided->state, store::ApprovalState::approved);
  ASSERT_TRUE(decided->decided_by.has_value());
  EXPECT_EQ(decided->decided_by->rfind("token alice (tok_", 0), 0u) << *decided->decided_by;

  // The decision is in the audit chain, by the token.
  Cli audit({"audit", "show", "--json", "--state-dir", dir});
  ASSERT_EQ(audit.wait(30s), 0) << audit.err();
  EXPECT_NE(audit.out().find("\"kind\":\"approval.approve\""), std::string::npos) << audit.out();
  // A real PNG, of a real size.
  ASSERT_TRUE(std::filesystem::exists(shot));
  EXPECT_GT(std::filesystem::file_size(shot), 10'000u);
  FILE* png = std::fopen(shot.c_str(), "rb");
  unsigned char magic[8] = {};
  ASSERT_EQ(std::fread(magic, 1, 8, png), 8u);
  std::fclose(png);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(magic) + 1, 3), "PNG");
  // Kept for people to look at: build/tests/console.png (docs/images/console.png
  // is one of these).
  std::filesystem::copy_file(shot, "console.png",
                             std::filesystem::copy_options::overwrite_existing);

  server.signal(SIGTERM);
  EXPECT_EQ(server.wait(30s), 0) << server.err();
  worker_process->signal(SIGTERM);
  EXPECT_EQ(worker_process->wait(60s), 0) << worker_process->err();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace rf::testing
