// The native sandbox doing its job: commands run, output streams, exit codes
// and results are exact, set-up failures name their step.
#include <poll.h>
#include <pty.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "integration/harness.h"
#include "support/fd_read.h"

namespace rf::testing {
namespace {

using SandboxExec = SandboxTest;

TEST_F(SandboxExec, RunsPython) {
  auto sb = make();
  ASSERT_TRUE(sb);
  Out r = run(*sb, {"python3", "-c", "print(1)"});
  EXPECT_EQ(r.out, "1\n");
  EXPECT_EQ(r.result.exit_code, 0);
}

// Issue 40: an argv (or environment) over the protocol's 1 MiB frame is
// refused before the command starts, naming the limit; the runner and the
// sandbox go on (it ended the runner: "tool runner exited with status 2").
TEST_F(SandboxExec, AnArgvOverTheProtocolsLimitIsRefusedNamingItAndTheSandboxGoesOn) {
  auto sb = make();
  ASSERT_NE(sb, nullptr);
  ExecCall big;
  big.argv = {"true", std::string(2u << 20, 'a')};
  Captured c;
  auto r = sb->exec(big, c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().to_string().find("over its limit of"), std::string::npos)
      << r.error().to_string();
  EXPECT_NE(r.error().to_string().find("(1048576 bytes)"), std::string::npos)
      << r.error().to_string();
  ExecCall env;
  env.argv = {"true"};
  env.env = {{"BIG", std::string(2u << 20, 'b')}};
  auto e = sb->exec(env, c);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().to_string().find("over its limit of"), std::string::npos);
  EXPECT_EQ(run(*sb, {"echo", "still here"}).out, "still here\n");
}

TEST_F(SandboxExec, SeparatesStdoutAndStderrAndKeepsExitCode) {
  auto sb = make();
  ASSERT_TRUE(sb);
  Out r = sh(*sb, "echo out; echo err >&2; exit 7");
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_EQ(r.result.exit_code, 7);
}

TEST_F(SandboxExec, KilledBySignalIs128PlusN) {
  auto sb = make();
  ASSERT_TRUE(sb);
  Out r = sh(*sb, "kill -TERM $$");
  EXPECT_EQ(r.result.exit_code, 128 + 15);
  EXPECT_EQ(r.result.signal, 15);
}

TEST_F(SandboxExec, NotFoundIs127AndNotExecutableIs126) {
  auto sb = make();
  ASSERT_TRUE(sb);
  Out r = run(*sb, {"no-such-command"});
  EXPECT_EQ(r.result.exit_code, 127);
  EXPECT_EQ(r.result.exec_errno, ENOENT);
  ASSERT_TRUE(sb->write_file("/workspace/script", "echo hi\n", 0644).ok());
  r = run(*sb, {"/workspace/script"});
  EXPECT_EQ(r.result.exit_code, 126);
  EXPECT_EQ(r.result.exec_errno, EACCES);
}

TEST_F(SandboxExec, EnvironmentIsExactlyTheNamedVariables) {
  ::setenv("HOST_SECRET", "hunter2", 1);
  SandboxSpec spec;
  spec.env["FROM_SPEC"] = "1";
  auto sb = make(spec);
  ASSERT_TRUE(sb);
  ExecCall call;
  call.env["FROM_CALL"] = "2";
  Out r = run(*sb, {"/usr/bin/env"}, call);
  EXPECT_EQ(r.out,
            "FROM_CALL=2\nFROM_SPEC=1\nHOME=/workspace\nLANG=C.UTF-8\n"
            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n");
  ::unsetenv("HOST_SECRET");
}

TEST_F(SandboxExec, HostnameIsTheSandboxIdAndCwdIsWorkspace) {
  auto sb = make();
  ASSERT_TRUE(sb);
  EXPECT_EQ(sh(*sb, "hostname; pwd; id -u; id -un").out,
            sb->id() + "\n/workspace\n1000\nsandbox\n");
}

TEST_F(SandboxExec, StdinIsDelivered) {
  auto sb = make();
  ASSERT_TRUE(sb);
  ExecCall call;
  call.stdin_data = "line one\nline two\n";
  EXPECT_EQ(run(*sb, {"cat"}, call).out, "line one\nline two\n");
}

TEST_F(SandboxExec, StreamedStdin) {
  auto sb = make();
  ASSERT_TRUE(sb);
  ExecCall call;
  call.argv = {"wc", "-c"};
  call.stdin_stream = true;
  // The feeding thread is joined before the sandbox goes: it may still be
  // returning from close_stdin when exec() has returned.
  struct Feeder : Captured {
    Sandbox* sb;
    std::thread thread;
    void on_started(uint32_t id, int) override {
      call_id = id;
      thread = std::thread([sb = sb, id] {
        for (int i = 0; i < 10; ++i) (void)sb->write_stdin(id, std::string(1000, 'a'));
        (void)sb->close_stdin(id);
      });
    }
  } feeder;
  feeder.sb = sb.get();
  auto r = sb->exec(call, feeder);
  if (feeder.thread.joinable()) feeder.thread.join();
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(feeder.out, "10000\n");
}

TEST_F(SandboxExec, FilesMoveInAndOut) {
  auto sb = make();
  ASSERT_TRUE(sb);
  ASSERT_TRUE(sb->write_file("/workspace/in.txt", "hello", 0644).ok());
  EXPECT_EQ(sh(*sb, "cat in.txt; echo -n ' world' >> in.txt").out, "hello");
  auto back = sb->read_file("/workspace/in.txt");
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(*back, "hello world");
  auto listing = sb->list_dir("/workspace");
  ASSERT_TRUE(listing.ok());
  ASSERT_EQ(listing->size(), 1u);
  EXPECT_EQ((*listing)[0].name, "in.txt");
  auto st = sb->stat("/workspace/in.txt");
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->size, 11);
  auto missing = sb->read_file("/workspace/nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().sys_errno, ENOENT);
}

TEST_F(SandboxExec, SetEnvAppliesToLaterCalls) {
  auto sb = make();
  ASSERT_TRUE(sb);
  ASSERT_TRUE(sb->set_env({{"TOKEN", "abc"}}).ok());
  EXPECT_EQ(sh(*sb, "echo $TOKEN").out, "abc\n");
}

TEST_F(SandboxExec, ConcurrentCallsInOneSandbox) {
  auto sb = make();
  ASSERT_TRUE(sb);
  std::vector<std::thread> threads;
  std::vector<std::string> outs(4);
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] { outs[i] = sh(*sb, "sleep 0.2; echo " + std::to_string(i)).out; });
  }
  for (auto& th : threads) th.join();
  for (int i = 0; i < 4; ++i) EXPECT_EQ(outs[i], std::to_string(i) + "\n");
}

// A result's peak_memory_bytes is the sandbox's peak while that call ran:
// `true` after a call that touched 200 MiB reports what `true` took, not the
// sandbox's peak over its life.
TEST_F(SandboxExec, PeakMemoryIsTheCallsNotTheSandboxLife) {
  auto sb = make();
  ASSERT_TRUE(sb);
  install_testprog(*sb);
  Out big;
  ASSERT_EQ(t(*sb, {"alloc", "200"}, &big), "ok 200 MiB") << big.err;
  EXPECT_GE(big.result.peak_memory_bytes, 200ull << 20);
  Out small = run(*sb, {"true"});
  EXPECT_EQ(small.result.exit_code, 0);
  EXPECT_GT(small.result.peak_memory_bytes, 0u);
  EXPECT_LT(small.result.peak_memory_bytes, 64ull << 20);
}

TEST_F(SandboxExec, PtyBelongsToTheSandbox) {
  auto sb = make();
  ASSERT_TRUE(sb);
  ExecCall call;
  call.pty = true;
  Out r = sh(*sb, "tty; test -t 0 && echo isatty; echo $TERM", call);
  EXPECT_NE(r.out.find("/dev/pts/0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("isatty"), std::string::npos) << r.out;
}

// A worker creates sandboxes from many threads. glibc's setresuid in a process
// that has threads waits for the others to follow, which the cloned child never
// sees: set-up hung until its timeout. The child uses raw syscalls since.
TEST_F(SandboxExec, CreatesFromManyThreadsAtOnce) {
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      for (int j = 0; j < 3; ++j) {
        auto sb = backend_->create(SandboxSpec{});
        if (!sb) {
          ADD_FAILURE() << sb.error().to_string();
          continue;
        }
        if (sh(**sb, "echo ok").out == "ok\n") ++ok;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 24);
}

// A worker's threads end while their sandboxes live on. The parent-death
// signal is per thread, so it must not outlast set-up.
TEST_F(SandboxExec, OutlivesTheThreadThatCreatedIt) {
  std::unique_ptr<Sandbox> sb;
  std::thread([&] { sb = make(); }).join();
  ASSERT_TRUE(sb);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(sh(*sb, "echo alive").out, "alive\n");
}

TEST_F(SandboxExec, ReportsSetupTimingsByStep) {
  auto sb = make();
  ASSERT_TRUE(sb);
  std::vector<std::string> steps;
  for (const auto& t : sb->setup_timings()) steps.push_back(t.step);
  for (const char* want :
       {"allocate uid range", "create cgroup", "clone", "write id maps", "pivot_root",
        "mount /proc", "load seccomp filter", "exec tool runner", "handshake"}) {
    EXPECT_NE(std::find(steps.begin(), steps.end(), want), steps.end()) << want;
  }
}

TEST_F(SandboxExec, DestroyLeavesNothingOnTheHost) {
  auto sb = make();
  ASSERT_TRUE(sb);
  const int pid = sb->init_pid();
  const std::string id = sb->id();
  ASSERT_TRUE(sb->destroy().ok());
  EXPECT_NE(::kill(pid, 0), 0);
  struct stat st {};
  EXPECT_NE(::stat(("/sys/fs/cgroup/memory/ringfence-test/" + id).c_str(), &st), 0);
  EXPECT_NE(::stat(("/sys/fs/cgroup/pids/ringfence-test/" + id).c_str(), &st), 0);
  EXPECT_TRUE(sb->destroy().ok());  // idempotent
}

TEST_F(SandboxExec, SetupFailureNamesTheStepAndErrno) {
  // A "runner" that is not executable fails at its exec, after every bound is on.
  char path[] = "/tmp/rf-not-a-runner-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  ASSERT_EQ(::chmod(path, 0644), 0);
  auto b = native::make_native_backend(native::NativeOptions{path, "ringfence-test"});
  ASSERT_TRUE(b.ok());
  auto sb = (*b)->create(SandboxSpec{});
  ::unlink(path);
  ASSERT_FALSE(sb.ok());
  EXPECT_EQ(sb.error().to_string(),
            "sandbox setup failed at step \"exec tool runner\": Permission denied");
}

// Files in a bound directory keep their host owner; the owner acts as the
// sandbox user inside (an idmapped mount), anyone else as nobody.
TEST_F(SandboxExec, WorkspaceDirOwnerBecomesTheSandboxUser) {
  char tmpl[] = "/tmp/rf-ws-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  ASSERT_EQ(::chmod(tmpl, 0755), 0);  // root's, not world-writable
  { std::ofstream(dir + "/from-host") << "hi"; }
  { std::ofstream(dir + "/strangers") << "x"; }
  ASSERT_EQ(::chown((dir + "/strangers").c_str(), 4343, 4343), 0);
  SandboxSpec spec;
  spec.workspace_dir = dir;
  auto sb = make(spec);
  ASSERT_TRUE(sb);
  Out r = sh(*sb,
             "cat from-host; echo made > from-sandbox; stat -c '%u %U' . from-host strangers; "
             "grep -c ' /workspace .*nosuid,nodev' /proc/self/mountinfo");
  EXPECT_EQ(r.out, "hi1000 sandbox\n1000 sandbox\n65534 nobody\n1\n") << r.err;
  EXPECT_EQ(slurp(dir + "/from-sandbox"), "made\n");
  struct stat st {};
  ASSERT_EQ(::stat((dir + "/from-sandbox").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);  // the directory owner's, not a sandbox uid
  EXPECT_EQ(st.st_gid, 0u);
  EXPECT_EQ(sh(*sb, "echo no >> strangers").result.exit_code, 2);  // mode 0644, not ours
  std::system(("rm -rf " + dir).c_str());
}

TEST_F(SandboxExec, WorkspaceDirOfAnotherUserMapsThatUser) {
  char tmpl[] = "/tmp/rf-ws-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  ASSERT_EQ(::chown(tmpl, 4242, 4242), 0);
  ASSERT_EQ(::chmod(tmpl, 0700), 0);
  SandboxSpec spec;
  spec.workspace_dir = dir;
  auto sb = make(spec);
  ASSERT_TRUE(sb);
  EXPECT_EQ(sh(*sb, "echo ok > f && cat f").out, "ok\n");
  struct stat st {};
  ASSERT_EQ(::stat((dir + "/f").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 4242u);
  std::system(("rm -rf " + dir).c_str());
}

// ---- the CLI, as a user runs it ----

TEST_F(SandboxExec, CliPrintsOne) {
  CliRun r = run_cli({"sandbox", "exec", "--", "python3", "-c", "print(1)"});
  EXPECT_EQ(r.out, "1\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(SandboxExec, CliPassesExitCodeAndStdin) {
  CliRun r = run_cli({"sandbox", "exec", "--", "sh", "-c", "cat; exit 3"}, "piped\n");
  EXPECT_EQ(r.out, "piped\n");
  EXPECT_EQ(r.exit_code, 3);
}

TEST_F(SandboxExec, CliJsonResult) {
  CliRun r = run_cli({"sandbox", "exec", "--json", "--timeout", "1s", "--", "sleep", "10"});
  EXPECT_EQ(r.exit_code, 137);
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["timed_out"], true);
  EXPECT_EQ(j["limit"], "timeout");
  EXPECT_EQ(j["signal"], 9);
  EXPECT_TRUE(j["setup"].is_array());
  EXPECT_GT(j["setup"].size(), 10u);
  EXPECT_NE(r.err.find("timed out after 1s (limit: timeout)"), std::string::npos) << r.err;
}

TEST_F(SandboxExec, CliUsageErrorsExit2AndNameTheFlag) {
  CliRun r = run_cli({"sandbox", "exec", "--mem", "lots", "--", "true"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "ringfence: --mem: expected a size such as 512m, got \"lots\"\n");
  // Every limit of the table is a flag, with the table's bounds.
  r = run_cli({"sandbox", "exec", "--nofile", "4", "--", "true"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "ringfence: --nofile: must be between 16 and 1048576, got 4\n");
  r = run_cli({"sandbox", "exec", "--network", "wide", "--", "true"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "ringfence: --network: unknown network policy \"wide\" (allowed: none, proxy, host)\n");
  r = run_cli({"sandbox", "exec", "--pids", "2", "--", "true"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "ringfence: --pids: must be between 8 and 1000000, got 2\n");
  r = run_cli({"sandbox", "exec", "--bogus", "--", "true"});
  EXPECT_EQ(r.exit_code, 2);
  r = run_cli({"sandbox", "frobnicate"});
  EXPECT_EQ(r.exit_code, 2);
  r = run_cli({"--version"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, std::string("ringfence ") + RF_VERSION + "\n");
}

TEST_F(SandboxExec, CliNotFoundExits127) {
  CliRun r = run_cli({"sandbox", "exec", "--", "definitely-not-a-command"});
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_NE(r.err.find("command not found"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace rf::testing

namespace rf::testing {
namespace {

TEST_F(SandboxExec, CliShellRunsOnAPtyOfItsOwn) {
  int master = -1;
  winsize ws{30, 100, 0, 0};
  const pid_t pid = ::forkpty(&master, nullptr, nullptr, &ws);
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::execl(RF_CLI_PATH, RF_CLI_PATH, "sandbox", "shell", nullptr);
    _exit(99);
  }
  const std::string cmd = "tty; stty size; echo DONE$((40+2))\n";
  ASSERT_EQ(::write(master, cmd.data(), cmd.size()), static_cast<ssize_t>(cmd.size()));
  const std::string out = read_until(master, "DONE42");
  EXPECT_NE(out.find("/dev/pts/0"), std::string::npos) << out;  // the sandbox's devpts, not ours
  EXPECT_NE(out.find("30 100"), std::string::npos) << out;      // our size reached its pty
  ASSERT_EQ(::write(master, "exit 5\n", 7), 7);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::close(master);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 5);
}

}  // namespace
}  // namespace rf::testing
