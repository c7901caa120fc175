// Shared by the tests of `ringfence serve` and its clients (issue 14): a
// token made with the real CLI, the server started on a loopback port read
// from its first stdout line, a command's output, and the steps a JS client
// script (tests/js) printed as JSON lines.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "store/store.h"
#include "support/ci_skip.h"
#include "support/cli_process.h"
#include "support/http_probe.h"

namespace rf::testing {

// `token create --project P [extra]`: the token, or "" (a failure is reported).
inline std::string make_token(const std::string& state_dir, const std::string& project,
                              const std::vector<std::string>& extra = {}) {
  std::vector<std::string> a{"token", "create", "--project", project, "--state-dir", state_dir};
  a.insert(a.end(), extra.begin(), extra.end());
  Cli c(a);
  EXPECT_EQ(c.wait(std::chrono::seconds(30)), 0) << c.err();
  std::string t = c.out();
  while (!t.empty() && t.back() == '\n') t.pop_back();
  return t;
}

// `serve --listen 127.0.0.1:0 [extra]`; its port in *port (0 if it did not start).
inline std::unique_ptr<Cli> start_serve(const std::string& state_dir, int* port,
                                        const std::vector<std::string>& extra = {}) {
  std::vector<std::string> a{"serve", "--listen", "127.0.0.1:0", "--state-dir", state_dir};
  a.insert(a.end(), extra.begin(), extra.end());
  auto server = std::make_unique<Cli>(a);
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < end && server->out().find('\n') == std::string::npos) {
    server->stderr_shows("listening", std::chrono::milliseconds(100));
  }
  *port = 0;
  if (server->out().find("listening on http://127.0.0.1:") == std::string::npos &&
      server->out().find("listening on https://127.0.0.1:") == std::string::npos) {
    ADD_FAILURE() << "serve did not start: " << server->out() << server->err();
    return server;
  }
  *port = std::stoi(server->out().substr(server->out().rfind(':') + 1));
  return server;
}

// A worker on the store of `state_dir` whose door serve reaches the API's
// sandboxes through (issue 39: they live on workers): started, and waited
// for until its door is in the store. `extra`: more `worker start` flags.
inline std::unique_ptr<Cli> start_door_worker(const std::string& state_dir,
                                              const std::vector<std::string>& extra = {},
                                              const std::vector<std::string>& env = {}) {
  std::vector<std::string> a{"worker",         "start",   "--state-dir", state_dir,
                             "--sandbox-mode", "per_run", "--grace",     "2s"};
  a.insert(a.end(), extra.begin(), extra.end());
  auto worker = std::make_unique<Cli>(a, std::nullopt, env);
  auto store = store::Store::open(state_dir + "/ringfence.db");
  EXPECT_TRUE(store.ok());
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (store.ok() && std::chrono::steady_clock::now() < end) {
    auto workers = (*store)->workers();
    if (workers) {
      for (const auto& w : *workers) {
        if (w.state == store::WorkerState::running && w.door) return worker;
      }
    }
    if (!worker->running()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ADD_FAILURE() << "no worker with a door came up: " << worker->err();
  return worker;
}

// A test of `ringfence serve` with its own state dir, serve and a worker
// whose door holds the API's sandboxes: both stopped (and their exit
// checked) after the test, the dir removed. Native sandboxes need root.
class ServedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) RF_SKIP() << "the API's sandboxes are native, which need root";
    char tmpl[] = "/tmp/rf-serve-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    if (server_) {
      server_->signal(SIGTERM);
      EXPECT_EQ(server_->wait(std::chrono::seconds(30)), 0) << server_->err();
    }
    if (worker_) {
      worker_->signal(SIGTERM);
      EXPECT_EQ(worker_->wait(std::chrono::seconds(60)), 0) << worker_->err();
    }
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  // serve (`extra`: more flags), and a worker with a door.
  void serve(const std::vector<std::string>& extra = {}) {
    worker_ = start_door_worker(dir_);
    serve_only(extra);
  }
  // serve alone: the test starts the workers it wants.
  void serve_only(const std::vector<std::string>& extra = {}) {
    server_ = start_serve(dir_, &port_, extra);
    ASSERT_NE(port_, 0);
  }
  std::string token(const std::string& project, const std::vector<std::string>& extra = {}) {
    return make_token(dir_, project, extra);
  }
  // `policy set --project P ARGS...` (the operator's policy, issue 39).
  void policy(const std::string& project, std::vector<std::string> args) {
    std::vector<std::string> a{"policy", "set", "--project", project, "--state-dir", dir_};
    a.insert(a.end(), args.begin(), args.end());
    Cli c(a);
    ASSERT_EQ(c.wait(std::chrono::seconds(30)), 0) << c.err();
  }
  // One request to serve on a connection of its own.
  HttpReply call(const std::string& method, const std::string& target, const std::string& tok,
                 const std::string& body = "", const std::map<std::string, std::string>& h = {}) {
    HttpProbe p(port_);
    EXPECT_TRUE(p.connected());
    return p.request(method, target, tok, body, h);
  }
  // A sandbox of the token's project; its id ("" and a failure when refused).
  std::string create(const std::string& tok, const std::string& spec = "{}") {
    auto r = call("POST", "/v1/sandboxes", tok, spec);
    EXPECT_EQ(r.status, 201) << r.body;
    return r.status == 201 ? nlohmann::json::parse(r.body).value("id", "") : "";
  }

  std::string dir_;
  std::unique_ptr<Cli> server_;
  std::unique_ptr<Cli> worker_;
  int port_ = 0;
};

// Runs a shell command; its stdout and exit code.
inline std::pair<std::string, int> run_capture(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return {"", -1};
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = ::pclose(p);
  return {out, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

// The JSON lines {"step": NAME, ...} a client script printed, by name.
inline std::map<std::string, nlohmann::json> script_steps(const std::string& out) {
  std::map<std::string, nlohmann::json> steps;
  size_t start = 0, nl;
  while ((nl = out.find('\n', start)) != std::string::npos) {
    const auto j = nlohmann::json::parse(out.substr(start, nl - start), nullptr, false);
    start = nl + 1;
    if (j.is_object() && j.contains("step")) steps[j["step"]] = j;
  }
  return steps;
}

}  // namespace rf::testing
