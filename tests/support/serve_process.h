// Shared by the tests of `ringfence serve` and its clients (issue 14): a
// token made with the real CLI, the server started on a loopback port read
// from its first stdout line, a command's output, and the steps a JS client
// script (tests/js) printed as JSON lines.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "store/store.h"
#include "support/cli_process.h"

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
