// The test dockerd that scripts/docker-test-daemon.sh starts for the docker
// tests (a ctest fixture): its own socket and data dir, no bridge, no iptables.
// The script writes RF_DOCKER_TEST_DIR/env as KEY=VALUE lines:
//   DOCKER_HOST        unix:///.../docker.sock
//   DOCKER_TCP_HOST    tcp://127.0.0.1:PORT (the same daemon)
//   DOCKER_SSH_HOST    ssh://root@127.0.0.1:PORT (an sshd of the script's own)
//   RINGFENCE_SSH_OPTIONS  extra ssh arguments for that sshd (-F config)
//   IMAGE              a locally built image that meets the contract (docs/images.md)
//   BROKEN_IMAGE       the same without /workspace
//   OLD_RUNNER_IMAGE   ships a ringfence-tool-runner outside the host's range
//   SKIP_REASON        set only when the daemon truly could not start
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>

#include "support/ci_skip.h"

namespace rf::testing {

struct TestDaemon {
  std::map<std::string, std::string> vars;
  std::string get(const std::string& key) const {
    auto it = vars.find(key);
    return it == vars.end() ? std::string() : it->second;
  }
  std::string unix_host() const { return get("DOCKER_HOST"); }
  std::string tcp_host() const { return get("DOCKER_TCP_HOST"); }
  std::string ssh_host() const { return get("DOCKER_SSH_HOST"); }
  std::string ssh_options() const { return get("RINGFENCE_SSH_OPTIONS"); }
  std::string image() const { return get("IMAGE"); }
  std::string broken_image() const { return get("BROKEN_IMAGE"); }
  std::string old_runner_image() const { return get("OLD_RUNNER_IMAGE"); }
  // Why docker tests cannot run; empty when they can.
  std::string skip_reason() const {
    if (!get("SKIP_REASON").empty()) return "test dockerd could not start: " + get("SKIP_REASON");
    if (unix_host().empty())
      return std::string("no test dockerd: ") + RF_DOCKER_TEST_DIR +
             "/env is missing (run through ctest, whose fixture docker_daemon_up starts it)";
    return {};
  }
};

inline const TestDaemon& test_daemon() {
  static const TestDaemon daemon = [] {
    TestDaemon d;
    std::ifstream in(std::string(RF_DOCKER_TEST_DIR) + "/env");
    std::string line;
    while (std::getline(in, line)) {
      const auto eq = line.find('=');
      if (eq == std::string::npos || line.empty() || line[0] == '#') continue;
      d.vars[line.substr(0, eq)] = line.substr(eq + 1);
    }
    return d;
  }();
  return daemon;
}

}  // namespace rf::testing

// Skips the test, visibly, when the test dockerd could not start (fails in CI).
#define RF_REQUIRE_DOCKER()                                                                    \
  do {                                                                                         \
    if (auto why = ::rf::testing::test_daemon().skip_reason(); !why.empty()) RF_SKIP() << why; \
  } while (0)
