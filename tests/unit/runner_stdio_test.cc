// The tool runner as docker starts it: `--stdio` (frames in on fd 0, out on
// fd 1, two pipes as containerd gives them) and `--seccomp FILE` (the host's
// filters, installed on itself before it serves); and the seccomp file format.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "core/io.h"
#include "host/runner_client.h"
#include "host/seccomp_profile.h"
#include "proto/seccomp_blob.h"
#include "support/capture.h"

namespace rf {
namespace {

using namespace std::chrono_literals;

// The runner with --stdio on two pipes, and a socketpair relay to a RunnerClient.
struct StdioRunner {
  pid_t pid = -1;
  int to_runner = -1, from_runner = -1, err_read = -1;
  int client_fd = -1, relay_fd = -1;
  ino_t to_runner_ino = 0, from_runner_ino = 0;  // read before the relay may close them
  std::thread up, down;

  explicit StdioRunner(std::vector<std::string> extra) {
    int in[2], out[2], err[2], sv[2];
    EXPECT_EQ(::pipe2(in, O_CLOEXEC), 0);
    EXPECT_EQ(::pipe2(out, O_CLOEXEC), 0);
    EXPECT_EQ(::pipe2(err, O_CLOEXEC), 0);
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    std::vector<std::string> args = {RF_RUNNER_PATH, "--stdio"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid = ::fork();
    if (pid == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      ::dup2(err[1], 2);
      ::chdir("/");
      ::execv(argv[0], argv.data());
      ::_exit(99);
    }
    ::close(in[0]);
    ::close(out[1]);
    ::close(err[1]);
    to_runner = in[1];
    from_runner = out[0];
    err_read = err[0];
    client_fd = sv[0];
    relay_fd = sv[1];
    struct stat st {};
    if (::fstat(to_runner, &st) == 0) to_runner_ino = st.st_ino;
    if (::fstat(from_runner, &st) == 0) from_runner_ino = st.st_ino;
    up = std::thread([this] {
      char buf[65536];
      for (;;) {
        const ssize_t n = ::read(relay_fd, buf, sizeof buf);
        if (n <= 0 || !write_all(to_runner, std::string_view(buf, static_cast<size_t>(n)))) break;
      }
      ::close(to_runner);  // EOF on the runner's stdin
    });
    down = std::thread([this] {
      char buf[65536];
      for (;;) {
        const ssize_t n = ::read(from_runner, buf, sizeof buf);
        if (n <= 0 || !write_all(relay_fd, std::string_view(buf, static_cast<size_t>(n)))) break;
      }
      ::shutdown(relay_fd, SHUT_WR);
    });
  }
  ~StdioRunner() {
    ::shutdown(relay_fd, SHUT_RDWR);
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    up.join();
    down.join();
    for (int fd : {from_runner, err_read, relay_fd}) ::close(fd);
  }
  int wait_status() {
    int status = 0;
    ::waitpid(pid, &status, 0);
    pid = -1;
    return status;
  }
  std::string stderr_text() {
    std::string text;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(err_read, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
    return text;
  }
};

proto::ExecRequest sh(const std::string& script) {
  proto::ExecRequest req;
  req.argv = {"/bin/sh", "-c", script};
  req.env = {{"PATH", "/usr/local/bin:/usr/bin:/bin"}};
  req.cwd = "/";
  return req;
}

TEST(RunnerStdio, ServesOverPipesAndKeepsTheChannelFromCommands) {
  StdioRunner r({});
  host::RunnerClient client{UniqueFd(r.client_fd)};
  ASSERT_TRUE(client.handshake(5000ms).ok());
  testing::Captured c;
  auto st = client.exec(sh("echo hi; echo err >&2; exit 3"), "", true, c);
  ASSERT_TRUE(st.ok()) << st.error().to_string();
  EXPECT_EQ(st->exit_code, 3);
  EXPECT_EQ(c.out, "hi\n");
  EXPECT_EQ(c.err, "err\n");
  // The runner's own 0 and 1 are /dev/null now: the protocol pipes sit on
  // close-on-exec descriptors no command inherits.
  char link[256] = {};
  ASSERT_GT(::readlink(("/proc/" + std::to_string(r.pid) + "/fd/0").c_str(), link, sizeof link), 0);
  EXPECT_STREQ(link, "/dev/null");
  std::memset(link, 0, sizeof link);
  ASSERT_GT(::readlink(("/proc/" + std::to_string(r.pid) + "/fd/1").c_str(), link, sizeof link), 0);
  EXPECT_STREQ(link, "/dev/null");
  testing::Captured fds;
  auto listed = client.exec(sh("ls -l /proc/self/fd/"), "", true, fds);
  ASSERT_TRUE(listed.ok());
  // Not fstat on them here: the relay threads own them now, and close them.
  ASSERT_NE(r.to_runner_ino, 0u);
  ASSERT_NE(r.from_runner_ino, 0u);
  for (ino_t ino : {r.to_runner_ino, r.from_runner_ino}) {
    EXPECT_EQ(fds.out.find("pipe:[" + std::to_string(ino) + "]"), std::string::npos) << fds.out;
  }
  EXPECT_NE(fds.out.find("pipe:["), std::string::npos) << fds.out;  // its own pipes, seen
}

TEST(RunnerStdio, EndOfInputEndsTheRunner) {
  StdioRunner r({});
  host::RunnerClient client{UniqueFd(r.client_fd)};
  ASSERT_TRUE(client.handshake(5000ms).ok());
  ::shutdown(r.relay_fd, SHUT_RD);  // the relay stops: the runner's stdin closes
  ::shutdown(r.client_fd, SHUT_WR);
  const int status = r.wait_status();
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

std::string write_temp(const std::string& content) {
  char tmpl[] = "/tmp/rf-seccomp-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  EXPECT_TRUE(write_all(fd, content).ok());
  ::close(fd);
  return tmpl;
}

TEST(RunnerStdio, SeccompFileFiltersTheRunnerAndEveryCall) {
  auto filters = host::build_seccomp_profile("default");
  ASSERT_TRUE(filters.ok());
  const std::string path = write_temp(host::encode_seccomp_filters(*filters));
  StdioRunner r({"--seccomp", path});
  host::RunnerClient client{UniqueFd(r.client_fd)};
  ASSERT_TRUE(client.handshake(5000ms).ok());
  auto probe = client.probe();
  ASSERT_TRUE(probe.ok());
  EXPECT_EQ(probe->seccomp_mode, 2);
  EXPECT_TRUE(probe->no_new_privs);
  testing::Captured c;
  // unshare(CLONE_NEWUSER) is refused by our filter with EPERM.
  auto st = client.exec(sh("unshare -U true; echo rc=$?"), "", true, c);
  ASSERT_TRUE(st.ok());
  EXPECT_NE(c.err.find("Operation not permitted"), std::string::npos) << c.err;
  EXPECT_EQ(c.out, "rc=1\n");
  ::unlink(path.c_str());
}

TEST(RunnerStdio, ACorruptSeccompFileStopsTheRunnerBeforeItServes) {
  const std::string path = write_temp(std::string("RFBPF1\n\x01\x00\x00\x00\xff\xff\x00\x00", 15));
  StdioRunner r({"--seccomp", path});
  const int status = r.wait_status();
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1);
  const std::string err = r.stderr_text();
  EXPECT_NE(err.find("--seccomp " + path + ": seccomp file: program 0 has 65535 instructions"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("at byte 11"), std::string::npos) << err;
  ::unlink(path.c_str());
}

TEST(SeccompBlob, RoundTripsAndRejectsEveryTruncation) {
  auto filters = host::build_seccomp_profile("default");
  ASSERT_TRUE(filters.ok());
  const std::string bytes = host::encode_seccomp_filters(*filters);
  auto back = proto::decode_bpf_programs(bytes);
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[0].size(), filters->allowlist.size());
  EXPECT_EQ(proto::encode_bpf_programs(*back), bytes);
  for (size_t cut = 0; cut < bytes.size(); cut += 7) {
    EXPECT_FALSE(proto::decode_bpf_programs(std::string_view(bytes).substr(0, cut)).ok()) << cut;
  }
  EXPECT_FALSE(proto::decode_bpf_programs(bytes + "x").ok());
  auto magic = proto::decode_bpf_programs("RFBPF2\n" + bytes.substr(7));
  ASSERT_FALSE(magic.ok());
  EXPECT_EQ(magic.error().message, "bad magic (expected RFBPF1) at byte 0");
  auto none = proto::decode_bpf_programs(std::string("RFBPF1\n\0\0\0\0", 11));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().message, "program count 0 is not 1 to 4 at byte 7");
}

}  // namespace
}  // namespace rf
