// The Vault KV v2 fixture (tests/identity/vault_fixture.py) as a test's own
// process on 127.0.0.1:<free port>, ended by its pid when the test ends, and
// python3-hvac (hvac_probe.py) as the real client that reads and writes the
// same server. Debian's /usr/bin/python3 (where python3-hvac is installed).
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace rf::testing {

inline constexpr const char* kPython = "/usr/bin/python3";

// Runs argv with extra environment entries; returns its exit status and stdout.
struct Ran {
  int status = -1;
  std::string out;
};

inline Ran run_capture(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                       const std::string& stdin_text = {}) {
  int out[2], in[2];
  // CLOEXEC: only fds 0 and 1 (dup2'd) reach the child, so a daemon it starts
  // never holds our pipe open (we read to EOF).
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(in, O_CLOEXEC) != 0) return {};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  posix_spawn_file_actions_addclose(&fa, in[1]);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_copy;
  for (char** e = environ; *e != nullptr; ++e) env_copy.emplace_back(*e);
  for (const auto& e : env) env_copy.push_back(e);
  std::vector<char*> envp;
  for (auto& e : env_copy) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  ::close(out[1]);
  ::close(in[0]);
  Ran r;
  if (rc != 0) {
    ::close(out[0]);
    ::close(in[1]);
    return r;
  }
  if (!stdin_text.empty()) {
    [[maybe_unused]] auto w = ::write(in[1], stdin_text.data(), stdin_text.size());
  }
  ::close(in[1]);
  char buf[4096];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;) r.out.append(buf, n);
  ::close(out[0]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

class VaultServer {
 public:
  // `dir`: a scratch dir of the test's (the token and port files go there).
  VaultServer(const std::string& dir, const std::string& token, bool tls = false,
              const std::string& cert = {}, const std::string& key = {})
      : dir_(dir), token_(token) {
    start(tls, cert, key);
  }
  ~VaultServer() { stop(); }

  void start(bool tls = false, const std::string& cert = {}, const std::string& key = {}) {
    const std::string token_file = dir_ + "/vault-token";
    const std::string port_file = dir_ + "/vault-port";
    std::filesystem::remove(port_file);
    { std::ofstream(token_file) << token_; }
    std::vector<std::string> argv = {kPython,    RF_VAULT_FIXTURE_PY, "--token-file",
                                     token_file, "--port-file",       port_file};
    if (tls) {
      argv.insert(argv.end(), {"--tls-cert", cert, "--tls-key", key});
    }
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    ASSERT_EQ(posix_spawn(&pid_, kPython, nullptr, nullptr, args.data(), environ), 0);
    for (int i = 0; i < 1000 && !std::filesystem::exists(port_file); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::ifstream in(port_file);
    in >> port_;
    ASSERT_GT(port_, 0) << "vault_fixture.py did not start";
    addr_ = std::string(tls ? "https" : "http") + "://127.0.0.1:" + std::to_string(port_);
  }
  void stop() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }

  const std::string& addr() const { return addr_; }
  int port() const { return port_; }
  const std::string& token() const { return token_; }

  // python3-hvac against this server: hvac_probe.py's JSON answer, or
  // {"error": "<hvac exception>"}.
  nlohmann::json hvac(const std::vector<std::string>& args, const std::string& stdin_text = {},
                      const std::string& token = {}) const {
    std::vector<std::string> argv = {kPython, RF_HVAC_PROBE_PY};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = run_capture(argv,
                         {"VAULT_ADDR=" + addr_, "VAULT_TOKEN=" + (token.empty() ? token_ : token)},
                         stdin_text);
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    if (j.is_discarded()) return {{"error", "no JSON from hvac_probe.py: " + r.out}};
    return j;
  }

 private:
  std::string dir_, token_, addr_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace rf::testing
