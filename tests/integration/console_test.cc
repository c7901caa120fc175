// The web console (issue 14) in a real browser: Debian's chromium, headless,
// driven by puppeteer-core (tests/js/console_test.mjs). The page is opened
// with a token, a sandbox made over the API appears in it, a pending
// credential request is approved by clicking, and a screenshot is saved.
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

  // A credential request waiting for a human, as a JIT `ask` rule makes one.
  auto st = store::Store::open(worker::store_path(dir));
  ASSERT_TRUE(st.ok()) << st.error().to_string();
  store::ApprovalRow row;
  row.project_id = "acme";
  row.kind = "credential";
  // Its reason, written by whoever asked, carries a right-to-left override
  // and an escape: the cell shows them as text, never reorders its row.
  row.request_json =
      json{{"key", "GITHUB_TOKEN"}, {"message", "push the site\u202e\x1b[2J to acme/site"}}.dump();
  auto approval = store::WorkflowStore(**st).request_approval(row);
  ASSERT_TRUE(approval.ok()) << approval.error().to_string();

  const std::string shot = dir + "/console.png";
  const std::string cmd = "timeout 120 node " + std::string(RF_JS_DIR) +
                          "/console_test.mjs --url " + url + " --token " + tok + " --sandbox " +
                          id + " --approval " + std::to_string(*approval) + " --screenshot " +
                          shot + " 2>" + dir + "/browser.err";
  const auto [out, code] = run_capture(cmd);
  EXPECT_EQ(code, 0) << out;
  auto steps = script_steps(out);
  ASSERT_FALSE(steps.count("error")) << steps["error"].dump();
  ASSERT_TRUE(steps.count("done")) << out;
  EXPECT_EQ(steps["live"]["url"], url + "/") << "the token left the address bar";
  const json cells = steps["sandbox"]["row"];
  ASSERT_EQ(cells.size(), 11u) << cells.dump();
  EXPECT_EQ(cells[0], id);
  EXPECT_EQ(cells[1], "web");
  EXPECT_EQ(cells[2], "native");
  EXPECT_EQ(cells[3], "acme");
  EXPECT_NE(cells[6], "-") << "its creation time: " << cells.dump();
  EXPECT_NE(cells[7], "-") << "its expiry: " << cells.dump();
  EXPECT_EQ(cells[8], "300m");
  EXPECT_EQ(cells[10], "Kill");
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
  // Kept for people to look at: build/tests/console.png.
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
