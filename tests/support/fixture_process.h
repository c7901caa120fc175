// A test's own server process (the fake model, the git server, s3rver): run
// with a port file, waited for until it listens on 127.0.0.1, and ended by
// its pid when the test ends (never by name).
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
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace rf::testing {

class FixtureProcess {
 public:
  FixtureProcess() = default;
  FixtureProcess(const FixtureProcess&) = delete;
  FixtureProcess& operator=(const FixtureProcess&) = delete;
  ~FixtureProcess() { stop(); }

  // Runs argv (its stdout and stderr to `log`); waits until `port_file` holds a port.
  void start(const std::vector<std::string>& argv, const std::string& port_file,
             const std::string& log) {
    std::filesystem::remove(port_file);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ASSERT_EQ(posix_spawn(&pid_, args[0], &fa, nullptr, args.data(), environ), 0) << argv[0];
    posix_spawn_file_actions_destroy(&fa);
    for (int i = 0; i < 1500; ++i) {
      std::ifstream in(port_file);
      if (in >> port_ && port_ > 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_GT(port_, 0) << argv[1] << " did not start; its log " << log;
  }
  void stop() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      for (int i = 0; i < 200; ++i) {
        if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
          pid_ = -1;
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace rf::testing
