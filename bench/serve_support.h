// For benches of `ringfence serve` (the real binary, on loopback): serve and
// the worker whose door holds the API's sandboxes (issue 39), each a child
// ended by the destructor, and a sandbox made once the door is up.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "http_probe.h"

namespace rf::bench {

struct Server {
  pid_t pid = -1;
  int port = 0;
  ~Server() {
    if (pid > 0) {
      ::kill(pid, SIGTERM);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

inline pid_t spawn_shell(const std::string& cmd) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), nullptr);
    ::_exit(127);
  }
  return pid;
}

// Starts `ringfence serve` (`extra`: more flags), its stdout in a file the
// port is read from.
inline bool start_server(const std::string& cli, const std::string& dir, Server* s,
                         const std::string& extra = "") {
  const std::string out = dir + "/serve.out";
  s->pid = spawn_shell(cli + " serve --listen 127.0.0.1:0 --state-dir " + dir +
                       " --max-requests-per-token 4096 --max-sandboxes-per-project 64 " + extra +
                       " > " + out + " 2> " + dir + "/serve.err");
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < end) {
    std::ifstream f(out);
    std::string line;
    if (std::getline(f, line) && line.find("listening on http://127.0.0.1:") == 0) {
      s->port = std::stoi(line.substr(line.rfind(':') + 1));
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// Starts the worker whose door holds the API's sandboxes (issue 39: they
// live on workers; serve forwards to them).
inline bool start_worker(const std::string& cli, const std::string& dir, Server* w) {
  w->pid = spawn_shell(cli + " worker start --state-dir " + dir + " --sandbox-mode per_run > " +
                       dir + "/worker.out 2> " + dir + "/worker.err");
  return w->pid > 0;
}

// A sandbox, once the worker's door is up (a 503 until then).
inline std::string create_sandbox(int port, const std::string& tok,
                                  const std::string& spec = R"({"limits": {"pids": 1024}})") {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (true) {
    rf::testing::HttpProbe p(port);
    auto r = p.request("POST", "/v1/sandboxes", tok, spec);
    if (r.status == 201) return nlohmann::json::parse(r.body)["id"];
    if (r.status != 503 || std::chrono::steady_clock::now() > end) {
      std::fprintf(stderr, "create: %d %s\n", r.status, r.body.c_str());
      return "";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace rf::bench
