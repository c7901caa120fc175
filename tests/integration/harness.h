// Shared by the tests that run real sandboxes: a backend built against the
// freshly built tool runner, output capture, and rf-testprog installed at
// /workspace/t inside a sandbox.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "native/native_backend.h"
#include "sandbox/sandbox.h"
#include "support/capture.h"
#include "support/ci_skip.h"
#ifdef RF_TEST_DOCKER
#include "docker/docker_backend.h"
#include "support/docker_daemon.h"
#endif

namespace rf::testing {

// The backend the sandbox tests run against: native, or docker when built
// into rf_docker_tests (RF_TEST_DOCKER), against the test dockerd.
#ifdef RF_TEST_DOCKER
inline constexpr bool kDocker = true;
#else
inline constexpr bool kDocker = false;
#endif

struct Out {
  ExecResult result;
  std::string out, err;
};

class SandboxTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (::geteuid() != 0) return;
#ifdef RF_TEST_DOCKER
    if (!test_daemon().skip_reason().empty()) return;
    docker::DockerOptions o;
    o.host_url = test_daemon().unix_host();
    o.runner_path = RF_RUNNER_PATH;
    o.allow_pull = false;
    auto b = docker::make_docker_backend(o);
#else
    auto b = native::make_native_backend(native::NativeOptions{RF_RUNNER_PATH, "ringfence-test"});
#endif
    ASSERT_TRUE(b.ok()) << b.error().to_string();
    backend_ = std::move(*b);
  }
  static void TearDownTestSuite() { backend_.reset(); }

  void SetUp() override {
    if (::geteuid() != 0) RF_SKIP() << "real sandboxes need root (the project's machines are root)";
#ifdef RF_TEST_DOCKER
    RF_REQUIRE_DOCKER();
#endif
  }

 public:
  std::unique_ptr<Sandbox> make(SandboxSpec spec = {}) {
#ifdef RF_TEST_DOCKER
    spec.backend = BackendKind::kDocker;
    if (spec.image == "host") spec.image = test_daemon().image();
#endif
    auto sb = backend_->create(spec);
    EXPECT_TRUE(sb.ok()) << sb.error().to_string();
    if (!sb.ok()) return nullptr;
    return std::move(*sb);
  }

  static Out run(Sandbox& sb, std::vector<std::string> argv, ExecCall call = {}) {
    call.argv = std::move(argv);
    Captured c;
    auto r = sb.exec(call, c);
    EXPECT_TRUE(r.ok()) << r.error().to_string();
    Out out;
    if (r.ok()) out.result = *r;
    out.out = c.out;
    out.err = c.err;
    return out;
  }

  static Out sh(Sandbox& sb, const std::string& script, ExecCall call = {}) {
    return run(sb, {"/bin/sh", "-c", script}, std::move(call));
  }

  // Copies rf-testprog into the sandbox as /workspace/t.
  static void install_testprog(Sandbox& sb) {
    auto s = sb.write_file("/workspace/t", slurp(RF_TESTPROG_PATH), 0755);
    ASSERT_TRUE(s.ok()) << s.error().to_string();
  }

  // Runs a testprog verb; returns its first line of stdout (its verdict).
  static std::string t(Sandbox& sb, std::vector<std::string> args, Out* full = nullptr) {
    args.insert(args.begin(), "/workspace/t");
    Out r = run(sb, std::move(args));
    if (full) *full = r;
    auto nl = r.out.find('\n');
    return nl == std::string::npos ? r.out : r.out.substr(0, nl);
  }

  static std::unique_ptr<Backend> backend_;
};

inline std::unique_ptr<Backend> SandboxTest::backend_;

// Runs the ringfence CLI; returns its exit status and output. `in_child` runs in
// the forked child just before exec (set the environment, enter a namespace).
struct CliRun {
  int exit_code = -1;
  std::string out, err;
};

inline CliRun run_cli(const std::vector<std::string>& args, const std::string& stdin_data = "",
                      const std::function<void()>& in_child = {}) {
  char out_tmpl[] = "/tmp/rf-cli-out-XXXXXX", err_tmpl[] = "/tmp/rf-cli-err-XXXXXX",
       in_tmpl[] = "/tmp/rf-cli-in-XXXXXX";
  const int out = mkstemp(out_tmpl), err = mkstemp(err_tmpl), in = mkstemp(in_tmpl);
  (void)!write(in, stdin_data.data(), stdin_data.size());
  lseek(in, 0, SEEK_SET);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    if (in_child) in_child();
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(RF_CLI_PATH));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(RF_CLI_PATH, argv.data());
    _exit(99);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CliRun r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(out_tmpl);
  r.err = slurp(err_tmpl);
  for (int fd : {out, err, in}) close(fd);
  unlink(out_tmpl);
  unlink(err_tmpl);
  unlink(in_tmpl);
  return r;
}

}  // namespace rf::testing
