// What the workflow tests share (issue 12): a state dir, the real
// `ringfence` binary (workers, `workflow run`, `run show`, `approvals`), and
// the fixtures a test starts for itself on 127.0.0.1: the scripted fake model
// (tests/agents/fake_model.py) and the git server (tests/artifacts/git_server.py).
#pragma once

#include <gtest/gtest.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "store/store.h"
#include "store/workflow_store.h"
#include "support/ci_skip.h"
#include "support/cli_process.h"
#include "support/fixture_process.h"
#include "support/vault_server.h"
#include "worker/worker.h"

namespace rf::testing {

using namespace std::chrono_literals;
using nlohmann::json;

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::string random_token(const char* prefix) {
  unsigned char raw[18];
  randombytes_buf(raw, sizeof raw);
  char b64[64];
  sodium_bin2base64(b64, sizeof b64, raw, sizeof raw, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
  return std::string(prefix) + b64;
}

// Every request the fake model got, one JSON object each.
inline std::vector<json> model_requests(const std::string& record) {
  std::vector<json> out;
  std::istringstream in(slurp(record));
  for (std::string line; std::getline(in, line);) {
    json j = json::parse(line, nullptr, false);
    if (!j.is_discarded()) out.push_back(std::move(j));
  }
  return out;
}

class WorkflowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) RF_SKIP() << "workflow steps run in native sandboxes, which need root";
    ASSERT_GE(sodium_init(), 0);
    char tmpl[] = "/tmp/rf-workflow-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    state_ = dir_ + "/state";
  }
  void TearDown() override {
    stop_workers();
    model_.stop();
    git_.stop();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  // SIGTERM, and each worker drains and exits 0 (under TSAN a report would
  // make it exit 66).
  void stop_workers() {
    for (auto& w : workers_) {
      w->signal(SIGTERM);
      EXPECT_EQ(w->wait(60s), 0) << w->err();
    }
    workers_.clear();
  }

  std::string file(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }

  // Runs a command to its end; returns its exit code.
  int run(std::vector<std::string> args, std::string* out = nullptr, std::string* err = nullptr,
          std::optional<std::string> in = std::nullopt, std::chrono::milliseconds within = 120s,
          const std::vector<std::string>& env = {}) {
    // `workflow validate` reads a file only: no state dir.
    if (!(args.size() > 1 && args[0] == "workflow" && args[1] == "validate")) {
      args.push_back("--state-dir");
      args.push_back(state_);
    }
    Cli c(args, std::move(in), env);
    const int code = c.wait(within);
    if (out) *out = c.out();
    if (err) *err = c.err();
    return code;
  }

  // `policy set --project acme ARGS...`: what the operator lets acme's steps
  // reach and read (issue 39: loopback and the worker's environment are
  // nobody's unless listed).
  void policy(std::vector<std::string> args, const std::string& project = "acme") {
    std::vector<std::string> a{"policy", "set", "--project", project};
    a.insert(a.end(), args.begin(), args.end());
    std::string out, err;
    ASSERT_EQ(run(a, &out, &err), 0) << err;
  }

  Cli& start_worker(std::vector<std::string> flags = {}, const std::vector<std::string>& env = {}) {
    std::vector<std::string> a{"worker", "start", "--state-dir", state_, "--grace", "2s"};
    if (std::find(flags.begin(), flags.end(), "--sandbox-mode") == flags.end()) {
      a.insert(a.end(), {"--sandbox-mode", "per_run"});
    }
    a.insert(a.end(), flags.begin(), flags.end());
    workers_.push_back(std::make_unique<Cli>(a, std::nullopt, env));
    wait_for_worker();
    return *workers_.back();
  }

  void wait_for_worker() {
    auto s = store::Store::open(worker::store_path(state_));
    ASSERT_TRUE(s.ok());
    const auto end = std::chrono::steady_clock::now() + 30s;
    while (std::chrono::steady_clock::now() < end) {
      auto w = (*s)->workers_serving("acme", store::now_ms() - 10'000);
      if (w && !w->empty()) return;
      std::this_thread::sleep_for(20ms);
    }
    FAIL() << "no worker came up: " << (workers_.empty() ? "" : workers_.back()->err());
  }

  // The run's JSON (`run show --json`); an empty object while it does not exist.
  json show(const std::string& run_id) {
    std::string out, err;
    if (run({"run", "show", run_id, "--json"}, &out, &err) != 0) return json::object();
    json j = json::parse(out, nullptr, false);
    return j.is_object() && j.contains("workflow_run") ? j["workflow_run"] : json::object();
  }
  // The step's attempt in a run's JSON (the newest; `n`: the n-th, from 1);
  // an empty object when it has none.
  static json step(const json& run, const std::string& id, int n = 0) {
    if (!run.contains("steps")) return json::object();
    for (const auto& s : run["steps"]) {
      if (s["id"] != id) continue;
      const auto& a = s["attempts"];
      if (n == 0) return a.back();
      if (n <= static_cast<int>(a.size())) return a[n - 1];
    }
    return json::object();
  }
  static int attempts(const json& run, const std::string& id) {
    if (!run.contains("steps")) return 0;
    for (const auto& s : run["steps"]) {
      if (s["id"] == id) return static_cast<int>(s["attempts"].size());
    }
    return 0;
  }
  // Waits until the run has ended; returns its JSON.
  json wait_ended(const std::string& run_id, std::chrono::milliseconds within = 60s) {
    const auto end = std::chrono::steady_clock::now() + within;
    json r;
    while (std::chrono::steady_clock::now() < end) {
      r = show(run_id);
      const std::string state = r.value("state", "");
      if (!state.empty() && state != "queued" && state != "running") return r;
      std::this_thread::sleep_for(50ms);
    }
    ADD_FAILURE() << "run " << run_id << " did not end: " << r.dump(1);
    return r;
  }

  // The pending approval that step `step` asked for, `kind` step (an
  // approval step's) or replay (a replay's before a side-effecting step: its
  // request names replay_of), as `approvals list --json` shows it, once it is
  // there (up to `within`); an empty object when none came.
  json pending_approval(const std::string& step, const std::string& kind,
                        std::chrono::milliseconds within = 60s) {
    const auto end = std::chrono::steady_clock::now() + within;
    while (std::chrono::steady_clock::now() < end) {
      std::string out, err;
      if (run({"approvals", "list", "--json"}, &out, &err) == 0) {
        const json list = json::parse(out, nullptr, false);
        for (const auto& a : list.is_array() ? list : json::array()) {
          const bool replay = a.contains("request") && a["request"].contains("replay_of");
          if (a.value("step", "") == step && replay == (kind == "replay")) return a;
        }
      }
      std::this_thread::sleep_for(50ms);
    }
    return json::object();
  }
  // `approvals approve|deny ID` as `who`; returns the exit code.
  int decide(const json& approval, bool approve, const std::string& who,
             const std::string& reason = "") {
    std::vector<std::string> a{"approvals", approve ? "approve" : "deny",
                               std::to_string(approval.value("id", int64_t{0})), "--as", who};
    if (!reason.empty()) a.insert(a.end(), {"--reason", reason});
    std::string out, err;
    const int code = run(a, &out, &err);
    EXPECT_EQ(code, 0) << out << err;
    return code;
  }
  // What a replay's JSON says it did with a step: {step, action, why}.
  static json replay_line(const json& run, const std::string& id) {
    if (!run.contains("replay")) return json::object();
    for (const auto& l : run["replay"]["steps"]) {
      if (l["step"] == id) return l;
    }
    return json::object();
  }
  // The JSON a `run replay --json` (or `workflow run --json`) printed last.
  static json last_json(const std::string& out) {
    const size_t at = out.rfind("\n{");
    return json::parse(at == std::string::npos ? out.substr(out.find('{')) : out.substr(at + 1),
                       nullptr, false);
  }

  // A secret and a project profile for acme that maps `key` to it.
  void project_secret(const std::string& secret, const std::string& value, const std::string& key) {
    std::string out, err;
    ASSERT_EQ(run({"secret", "set", secret}, &out, &err, value), 0) << err;
    ASSERT_EQ(run({"identity", "profile", "set", "acme", "--level", "project", "--project", "acme",
                   key + "=secret:" + secret},
                  &out, &err),
              0)
        << err;
  }

  // The fake model, following `script` (a JSON string).
  void start_model(const std::string& script, const std::vector<std::string>& extra = {}) {
    const std::string s = file("model-script.json", script);
    std::vector<std::string> argv = {"/usr/bin/python3", RF_FAKE_MODEL_PY,
                                     "--script",         s,
                                     "--port",           "0",
                                     "--record",         dir_ + "/model-requests.jsonl",
                                     "--port-file",      dir_ + "/model-port"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    model_.start(argv, dir_ + "/model-port", dir_ + "/model.log");
  }
  std::vector<json> model_requests() const {
    return rf::testing::model_requests(dir_ + "/model-requests.jsonl");
  }

  // The git server with one repository, site.git, behind `token`.
  void start_git(const std::string& token, const std::vector<std::string>& extra = {}) {
    std::filesystem::create_directories(dir_ + "/git");
    std::vector<std::string> argv = {"/usr/bin/python3",
                                     RF_GIT_SERVER_PY,
                                     "--root",
                                     dir_ + "/git",
                                     "--port",
                                     "0",
                                     "--port-file",
                                     dir_ + "/git-port",
                                     "--token",
                                     token,
                                     "--log",
                                     dir_ + "/git.log",
                                     "--init",
                                     "site"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    git_.start(argv, dir_ + "/git-port", dir_ + "/git-server.log");
  }

  std::string dir_, state_;
  std::vector<std::unique_ptr<Cli>> workers_;
  FixtureProcess model_, git_;
};

}  // namespace rf::testing
