// The local backend (sandbox mode none): the real tool runner as a plain child
// of the test process, in a scratch directory under a temporary scratch root.
// Needs no root.
#include "local/local_backend.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "core/proc_stat.h"
#include "local/inventory.h"
#include "local/owner_marker.h"
#include "local/sandbox_paths.h"
#include "local/scratch_dir.h"
#include "sandbox/sandbox.h"
#include "sandbox/spec.h"
#include "support/capture.h"
#include "support/ci_skip.h"

namespace rf::local {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using rf::testing::Captured;
using rf::testing::slurp;

struct Out {
  ExecResult result;
  std::string out, err;
};

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

bool gone(pid_t pid) { return ::kill(pid, 0) == -1 && errno == ESRCH; }

std::string make_temp_dir(const char* prefix) {
  std::string tmpl = std::string("/tmp/") + prefix + "-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) return "";
  char real[PATH_MAX];
  return ::realpath(tmpl.c_str(), real) != nullptr ? real : "";
}

const SandboxInfo* find_info(const std::vector<SandboxInfo>& all, const std::string& id) {
  for (const auto& i : all) {
    if (i.id == id) return &i;
  }
  return nullptr;
}

// Waits up to 2 s for `pid` to be gone (reaped by whoever is its parent).
bool wait_gone(pid_t pid) {
  for (int i = 0; i < 200 && !gone(pid); ++i) std::this_thread::sleep_for(10ms);
  return gone(pid);
}

// What a worker killed with -9 leaves behind: a forked child creates a sandbox,
// reports its id and runner pid, and is SIGKILLed.
struct Orphan {
  std::string id;
  pid_t runner = 0;
};

Orphan make_orphan(Backend& backend) {
  int p[2];
  if (::pipe(p) != 0) return {};
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(p[0]);
    SandboxSpec spec;
    spec.backend = BackendKind::kLocal;
    auto sb = backend.create(spec);
    const std::string msg =
        sb.ok() ? (*sb)->id() + " " + std::to_string((*sb)->init_pid()) : "error";
    (void)!::write(p[1], msg.data(), msg.size());
    ::pause();
    ::_exit(0);
  }
  ::close(p[1]);
  char buf[256];
  const ssize_t n = ::read(p[0], buf, sizeof buf);
  ::close(p[0]);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  std::istringstream in(std::string(buf, n > 0 ? static_cast<size_t>(n) : 0));
  Orphan o;
  in >> o.id >> o.runner;
  return o;
}

class LocalBackendTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = make_temp_dir("rf-local-test");
    ASSERT_FALSE(root_.empty());
    auto b = make_local_backend(LocalOptions{RF_RUNNER_PATH, root_});
    ASSERT_TRUE(b.ok()) << b.error().to_string();
    backend_ = std::move(*b);
  }
  static void TearDownTestSuite() {
    backend_.reset();
    std::error_code ec;
    fs::remove_all(root_, ec);  // does not follow symlinks
  }
  // Every sandbox a test made is destroyed by its end: nothing is left behind.
  void TearDown() override {
    EXPECT_TRUE(fs::is_empty(root_)) << root_ << " still holds a scratch directory";
  }

  static std::unique_ptr<Sandbox> make(SandboxSpec spec = {}) {
    spec.backend = BackendKind::kLocal;
    auto sb = backend_->create(spec);
    EXPECT_TRUE(sb.ok()) << sb.error().to_string();
    if (!sb.ok()) return nullptr;
    return std::move(*sb);
  }

  static std::string scratch(const Sandbox& sb) { return root_ + "/" + sb.id(); }

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

  static inline std::string root_;
  static inline std::unique_ptr<Backend> backend_;
};

TEST_F(LocalBackendTest, ExecEchoAndExitCodes) {
  auto sb = make();
  ASSERT_NE(sb, nullptr);
  EXPECT_GT(sb->init_pid(), 0);
  auto echo = run(*sb, {"echo", "hello"});
  EXPECT_EQ(echo.out, "hello\n");
  EXPECT_EQ(echo.result.exit_code, 0);
  EXPECT_EQ(echo.result.limit, "");

  auto three = run(*sb, {"/bin/sh", "-c", "echo oops >&2; exit 3"});
  EXPECT_EQ(three.result.exit_code, 3);
  EXPECT_EQ(three.err, "oops\n");

  auto killed = run(*sb, {"/bin/sh", "-c", "kill -9 $$"});
  EXPECT_EQ(killed.result.exit_code, 137);
  EXPECT_EQ(killed.result.signal, SIGKILL);

  auto missing = run(*sb, {"no-such-command-rf"});
  EXPECT_EQ(missing.result.exit_code, 127);
  EXPECT_EQ(missing.result.exec_errno, ENOENT);

  std::vector<std::string> steps;
  for (const auto& t : sb->setup_timings()) steps.push_back(t.step);
  EXPECT_EQ(steps, (std::vector<std::string>{"create scratch dir", "start tool runner",
                                             "record owner", "handshake"}));
}

TEST_F(LocalBackendTest, EnvironmentIsExactlyTheNamedVariables) {
  ASSERT_EQ(::setenv("HOST_SECRET", "hunter2", 1), 0);
  SandboxSpec spec;
  spec.env = {{"SPEC_VAR", "from-spec"}, {"SHARED", "spec"}};
  auto sb = make(spec);
  ASSERT_NE(sb, nullptr);
  ExecCall call;
  call.env = {{"CALL_VAR", "from-call"}, {"SHARED", "call"}};
  auto r = run(*sb, {"env"}, call);  // env(1) prints its environ as it is: no shell adds PWD
  ::unsetenv("HOST_SECRET");
  ASSERT_EQ(r.result.exit_code, 0) << r.err;
  const std::string s = scratch(*sb);
  std::vector<std::string> got = lines(r.out);
  std::sort(got.begin(), got.end());
  const std::vector<std::string> want = {
      "CALL_VAR=from-call",   "HOME=" + s + "/workspace",
      "LANG=C.UTF-8",         "PATH=" + base_environment(false).at("PATH"),
      "SHARED=call",          "SPEC_VAR=from-spec",
      "TMPDIR=" + s + "/tmp",
  };
  EXPECT_EQ(got, want);
  EXPECT_EQ(r.out.find("HOST_SECRET"), std::string::npos);
  EXPECT_EQ(r.out.find("hunter2"), std::string::npos);

  // The runner itself starts with an empty environment (readable only with
  // CAP_SYS_PTRACE: it is not dumpable).
  const std::string environ = "/proc/" + std::to_string(sb->init_pid()) + "/environ";
  if (std::ifstream(environ)) {
    EXPECT_EQ(slurp(environ), "");
  }
}

TEST_F(LocalBackendTest, CwdIsTheScratchWorkspaceAndHomePointsThere) {
  auto sb = make();
  ASSERT_NE(sb, nullptr);
  const std::string ws = scratch(*sb) + "/workspace";
  EXPECT_EQ(run(*sb, {"pwd", "-P"}).out, ws + "\n");
  EXPECT_EQ(run(*sb, {"/bin/sh", "-c", "echo \"$HOME\"; cd && pwd -P"}).out, ws + "\n" + ws + "\n");

  ASSERT_EQ(run(*sb, {"mkdir", "-p", "sub/dir"}).result.exit_code, 0);
  ExecCall below;
  below.cwd = "/workspace/sub/dir";
  EXPECT_EQ(run(*sb, {"pwd", "-P"}, below).out, ws + "/sub/dir\n");

  for (const std::string cwd : {"/etc", "/", "/workspacex", "/workspace/..",
                                "/workspace/sub/../../x", "workspace", "/tmp"}) {
    ExecCall call;
    call.argv = {"pwd"};
    call.cwd = cwd;
    Captured c;
    auto r = sb->exec(call, c);
    ASSERT_FALSE(r.ok()) << cwd;
    EXPECT_NE(r.error().to_string().find("cwd must be under /workspace in a local sandbox"),
              std::string::npos)
        << r.error().to_string();
    EXPECT_EQ(c.out, "");
  }
}

TEST_F(LocalBackendTest, WriteFileLandsInTheScratchDirAndReadFileReturnsIt) {
  auto sb = make();
  ASSERT_NE(sb, nullptr);
  const std::string ws = scratch(*sb) + "/workspace";
  ASSERT_TRUE(sb->write_file("/workspace/notes/a.txt", "written by the host\n").ok());
  EXPECT_EQ(slurp(ws + "/notes/a.txt"), "written by the host\n");
  auto back = sb->read_file("/workspace/notes/a.txt");
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(*back, "written by the host\n");
  EXPECT_EQ(run(*sb, {"cat", "notes/a.txt"}).out, "written by the host\n");

  ASSERT_EQ(run(*sb, {"/bin/sh", "-c", "echo from the command > b.txt"}).result.exit_code, 0);
  auto b = sb->read_file("/workspace/b.txt");
  ASSERT_TRUE(b.ok()) << b.error().to_string();
  EXPECT_EQ(*b, "from the command\n");
  auto rel = sb->read_file("b.txt");  // relative paths are under /workspace
  ASSERT_TRUE(rel.ok()) << rel.error().to_string();
  EXPECT_EQ(*rel, "from the command\n");

  auto st = sb->stat("/workspace/b.txt");
  ASSERT_TRUE(st.ok()) << st.error().to_string();
  EXPECT_EQ(st->size, 17);
  auto listing = sb->list_dir("/");
  ASSERT_TRUE(listing.ok()) << listing.error().to_string();
  std::vector<std::string> names;
  for (const auto& e : *listing) names.push_back(e.name);
  EXPECT_EQ(names, (std::vector<std::string>{"tmp", "workspace"}));
}

TEST_F(LocalBackendTest, SymlinksOutOfTheScratchDirDoNotLetReadFileEscape) {
  auto sb = make();
  ASSERT_NE(sb, nullptr);
  const std::string host_passwd = slurp("/etc/passwd");
  ASSERT_FALSE(host_passwd.empty());
  const std::string ws = scratch(*sb) + "/workspace";
  ASSERT_EQ(::symlink("/etc/passwd", (ws + "/abs").c_str()), 0);
  ASSERT_EQ(::symlink("../../../../../../../../../etc/passwd", (ws + "/rel").c_str()), 0);
  ASSERT_EQ(::symlink("/etc", (ws + "/etcdir").c_str()), 0);
  const std::vector<std::string> paths = {
      "/workspace/abs", "/workspace/rel",    "/workspace/etcdir/passwd",
      "/etc/passwd",    "/../../etc/passwd", "../../../etc/passwd",
  };
  for (const auto& path : paths) {
    auto r = sb->read_file(path);
    ASSERT_FALSE(r.ok()) << path << " read the host's file";
    EXPECT_EQ(r.error().sys_errno, ENOENT) << path << ": " << r.error().to_string();
  }
  // With a file at the sandbox's own /etc/passwd, every path reads that one.
  ASSERT_TRUE(sb->write_file("/etc/passwd", "the sandbox's own\n").ok());
  for (const auto& path : paths) {
    auto r = sb->read_file(path);
    ASSERT_TRUE(r.ok()) << path << ": " << r.error().to_string();
    EXPECT_EQ(*r, "the sandbox's own\n") << path;
    EXPECT_NE(*r, host_passwd);
  }
  EXPECT_EQ(slurp("/etc/passwd"), host_passwd);
}

TEST_F(LocalBackendTest, TwoSandboxesHaveTheirOwnScratchDirs) {
  auto a = make();
  auto b = make();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a->id(), b->id());
  EXPECT_NE(scratch(*a), scratch(*b));
  EXPECT_EQ(run(*a, {"pwd", "-P"}).out, scratch(*a) + "/workspace\n");
  EXPECT_EQ(run(*b, {"pwd", "-P"}).out, scratch(*b) + "/workspace\n");

  ASSERT_TRUE(a->write_file("/workspace/only-a", "a's").ok());
  ASSERT_TRUE(fs::exists(scratch(*a) + "/workspace/only-a"));
  EXPECT_FALSE(fs::exists(scratch(*b) + "/workspace/only-a"));
  for (const std::string& path :
       {std::string("/workspace/only-a"), "/../" + a->id() + "/workspace/only-a",
        "../../" + a->id() + "/workspace/only-a"}) {
    auto r = b->read_file(path);
    ASSERT_FALSE(r.ok()) << path;
    EXPECT_EQ(r.error().sys_errno, ENOENT) << path << ": " << r.error().to_string();
  }
  auto up = b->list_dir("/..");  // ".." at the root stays at the root
  ASSERT_TRUE(up.ok()) << up.error().to_string();
  std::vector<std::string> names;
  for (const auto& e : *up) names.push_back(e.name);
  EXPECT_EQ(names, (std::vector<std::string>{"tmp", "workspace"}));
}

TEST_F(LocalBackendTest, TimeoutAndOutputCapEndTheCall) {
  SandboxSpec spec;
  spec.limits.timeout = 300ms;
  spec.limits.output_bytes = 4096;
  auto sb = make(spec);
  ASSERT_NE(sb, nullptr);
  const auto start = std::chrono::steady_clock::now();
  auto slow = run(*sb, {"sleep", "30"});
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  EXPECT_TRUE(slow.result.timed_out);
  EXPECT_EQ(slow.result.limit, "timeout");

  auto loud = run(*sb, {"head", "-c", "1000000", "/dev/zero"});
  EXPECT_EQ(loud.result.limit, "output");
  EXPECT_TRUE(loud.result.output_truncated);
  // The first 4096 bytes pass, nothing added to them (a binary stdout stays
  // bytes); the runner's notice goes to stderr (issue 40).
  EXPECT_EQ(loud.out, std::string(4096, '\0'));
  EXPECT_EQ(loud.err, "\n[ringfence: output truncated at 4096 bytes]\n");

  ExecCall call;  // the call's own bounds win over the spec's
  call.timeout = 5000ms;
  auto fits = run(*sb, {"/bin/sh", "-c", "sleep 0.5; echo done"}, call);
  EXPECT_EQ(fits.out, "done\n");
  EXPECT_EQ(fits.result.limit, "");
}

TEST_F(LocalBackendTest, DestroyRemovesTheScratchDirAndTheRunnerAndIsIdempotent) {
  auto sb = make();
  ASSERT_NE(sb, nullptr);
  const pid_t runner = sb->init_pid();
  const std::string s = scratch(*sb);
  ASSERT_TRUE(fs::is_directory(s + "/workspace"));
  ASSERT_TRUE(fs::is_directory(s + "/tmp"));
  EXPECT_EQ(fs::status(s).permissions(), fs::perms::owner_all);
  ASSERT_TRUE(sb->write_file("/workspace/deep/er/file", "x").ok());
  ASSERT_EQ(run(*sb, {"/bin/sh", "-c", "mkdir locked && touch locked/f && chmod 0 locked"})
                .result.exit_code,
            0);

  // A call still running when destroy() comes is ended with its process.
  Captured c;
  std::thread caller([&] {
    ExecCall call;
    call.argv = {"sleep", "60"};
    auto r = sb->exec(call, c);
    EXPECT_FALSE(r.ok());
  });
  for (int i = 0; i < 500 && c.pid == 0; ++i) std::this_thread::sleep_for(10ms);
  const pid_t command = c.pid;
  ASSERT_GT(command, 0);

  auto destroyed = sb->destroy();
  EXPECT_TRUE(destroyed.ok()) << destroyed.error().to_string();
  caller.join();
  EXPECT_FALSE(fs::exists(s));
  EXPECT_TRUE(gone(runner)) << "runner pid " << runner;
  EXPECT_TRUE(gone(command)) << "command pid " << command;
  EXPECT_TRUE(sb->destroy().ok());
  Captured after;
  EXPECT_FALSE(sb->exec(ExecCall{{"true"}}, after).ok());
}

TEST_F(LocalBackendTest, DestroyDoesNotFollowSymlinksToHostFiles) {
  const std::string host = make_temp_dir("rf-local-host");
  ASSERT_FALSE(host.empty());
  { std::ofstream(host + "/keep.txt") << "host data"; }
  ASSERT_EQ(::mkdir((host + "/sub").c_str(), 0755), 0);
  auto sb = make();
  ASSERT_NE(sb, nullptr);
  const std::string ws = scratch(*sb) + "/workspace";
  ASSERT_EQ(::symlink(host.c_str(), (ws + "/hostdir").c_str()), 0);
  ASSERT_EQ(::symlink((host + "/keep.txt").c_str(), (ws + "/hostfile").c_str()), 0);
  ASSERT_EQ(::mkdir((ws + "/nested").c_str(), 0700), 0);
  ASSERT_EQ(::symlink((host + "/sub").c_str(), (ws + "/nested/hostsub").c_str()), 0);

  auto destroyed = sb->destroy();
  EXPECT_TRUE(destroyed.ok()) << destroyed.error().to_string();
  EXPECT_FALSE(fs::exists(scratch(*sb)));
  EXPECT_EQ(slurp(host + "/keep.txt"), "host data");
  EXPECT_TRUE(fs::is_directory(host + "/sub"));
  fs::remove_all(host);
}

TEST_F(LocalBackendTest, KillingTheRunnerMakesTheNextExecFail) {
  auto sb = make();
  ASSERT_NE(sb, nullptr);
  const pid_t runner = sb->init_pid();
  ASSERT_EQ(::kill(runner, SIGKILL), 0);
  Captured c;
  ExecCall call;
  call.argv = {"echo", "hi"};
  auto r = sb->exec(call, c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().to_string(), "sandbox ended: tool runner (pid " + std::to_string(runner) +
                                       ") killed by signal 9 (Killed)");
  auto f = sb->read_file("/workspace/x");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.error().where, "sandbox ended");
  EXPECT_TRUE(sb->destroy().ok());
  EXPECT_FALSE(fs::exists(scratch(*sb)));
  EXPECT_TRUE(gone(runner));
}

TEST_F(LocalBackendTest, SpecsTheLocalBackendCannotHonourAreRefused) {
  SandboxSpec native;  // backend "native": never silently weaker
  auto r = backend_->create(native);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().where, "backend");
  SandboxSpec bound;
  bound.backend = BackendKind::kLocal;
  bound.workspace_dir = "/tmp";
  auto w = backend_->create(bound);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().where, "workspace");
  auto v = parse_spec_json(R"({"backend": "k8s"})");
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error().to_string(),
            "backend: unknown backend \"k8s\" (allowed: native, docker, remotedocker, local)");
}

TEST_F(LocalBackendTest, ScratchDirOfAnExistingIdIsNotTakenOver) {
  SandboxSpec spec;
  spec.id = "rf-taken";
  ASSERT_EQ(::mkdir((root_ + "/rf-taken").c_str(), 0700), 0);
  { std::ofstream(root_ + "/rf-taken/mine") << "x"; }
  spec.backend = BackendKind::kLocal;
  auto r = backend_->create(spec);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().to_string(),
            "sandbox setup failed at step \"create scratch dir\": scratch dir " + root_ +
                "/rf-taken: File exists");
  EXPECT_EQ(slurp(root_ + "/rf-taken/mine"), "x");  // not removed by the failed create
  fs::remove_all(root_ + "/rf-taken");
}

TEST_F(LocalBackendTest, RegistryFindsLocal) {
  const std::string tmpdir = make_temp_dir("rf-local-tmpdir");
  ASSERT_FALSE(tmpdir.empty());
  const char* old_tmpdir = std::getenv("TMPDIR");
  const std::string saved = old_tmpdir ? old_tmpdir : "";
  ::setenv("TMPDIR", tmpdir.c_str(), 1);
  ::setenv("RINGFENCE_TOOL_RUNNER", RF_RUNNER_PATH, 1);
  register_local_backend();
  const auto kinds = registered_backends();
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), BackendKind::kLocal), kinds.end());
  auto b = make_backend(BackendKind::kLocal);
  ASSERT_TRUE(b.ok()) << b.error().to_string();
  EXPECT_EQ((*b)->name(), "local");
  SandboxSpec spec;
  spec.backend = BackendKind::kLocal;
  auto sb = (*b)->create(spec);
  ASSERT_TRUE(sb.ok()) << sb.error().to_string();
  EXPECT_EQ(run(**sb, {"pwd", "-P"}).out,
            tmpdir + "/ringfence-local/" + (*sb)->id() + "/workspace\n");
  sb->reset();
  EXPECT_TRUE(fs::is_empty(tmpdir + "/ringfence-local"));  // the destructor destroys
  if (old_tmpdir) {
    ::setenv("TMPDIR", saved.c_str(), 1);
  } else {
    ::unsetenv("TMPDIR");
  }
  ::unsetenv("RINGFENCE_TOOL_RUNNER");
  fs::remove_all(tmpdir);
}

TEST_F(LocalBackendTest, ListShowsTheRunnerTheOwnerAndTheAge) {
  auto sb = make();
  ASSERT_NE(sb, nullptr);
  auto all = backend_->list();
  ASSERT_TRUE(all.ok()) << all.error().to_string();
  ASSERT_EQ(all->size(), 1u);
  const SandboxInfo& info = all->front();
  EXPECT_EQ(info.id, sb->id());
  EXPECT_EQ(info.backend, "local");
  EXPECT_EQ(info.pid, sb->init_pid());
  EXPECT_EQ(info.owner_pid, ::getpid());
  EXPECT_FALSE(info.orphaned());
  EXPECT_LE(info.age.count(), 5);
  EXPECT_FALSE(info.memory_bytes.has_value());  // no cgroup: the local backend cannot tell
  // The marker is beside the scratch dir, out of reach of the runner's file operations.
  const std::string marker = root_ + "/" + sb->id() + ".owner";
  auto parsed = parse_owner_marker(slurp(marker));
  ASSERT_TRUE(parsed.ok()) << parsed.error().to_string();
  EXPECT_EQ(parsed->owner_pid, ::getpid());
  EXPECT_EQ(parsed->owner_start, start_time_of(::getpid()));
  EXPECT_EQ(parsed->runner_pid, sb->init_pid());
  EXPECT_EQ(parsed->runner_start, start_time_of(sb->init_pid()));
  EXPECT_EQ(fs::status(marker).permissions(), fs::perms::owner_read | fs::perms::owner_write);
  auto through = sb->read_file("/../" + sb->id() + ".owner");
  ASSERT_FALSE(through.ok());
  EXPECT_EQ(through.error().sys_errno, ENOENT) << through.error().to_string();
  ASSERT_TRUE(sb->destroy().ok());
  EXPECT_FALSE(fs::exists(marker));  // destroy removes it after the scratch dir
}

TEST_F(LocalBackendTest, ReapRemovesWhatAKilledOwnerLeftBehind) {
  const Orphan o = make_orphan(*backend_);
  ASSERT_FALSE(o.id.empty());
  ASSERT_NE(o.id, "error");
  EXPECT_TRUE(wait_gone(o.runner))
      << "the parent-death signal should have ended runner " << o.runner;
  const std::string dir = root_ + "/" + o.id;
  ASSERT_TRUE(fs::is_directory(dir));
  ASSERT_TRUE(fs::exists(dir + ".owner"));

  auto all = backend_->list();
  ASSERT_TRUE(all.ok()) << all.error().to_string();
  const SandboxInfo* info = find_info(*all, o.id);
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->pid, 0);
  EXPECT_EQ(info->owner_pid, 0);
  EXPECT_TRUE(info->orphaned());

  auto dry = backend_->reap(std::chrono::hours(1), /*dry_run=*/true);
  ASSERT_TRUE(dry.ok()) << dry.error().to_string();
  ASSERT_EQ(dry->size(), 1u);
  EXPECT_EQ(dry->front().id, o.id);
  EXPECT_TRUE(fs::is_directory(dir));  // a dry run changes nothing
  EXPECT_TRUE(fs::exists(dir + ".owner"));

  auto reaped = backend_->reap(std::chrono::hours(1), /*dry_run=*/false);
  ASSERT_TRUE(reaped.ok()) << reaped.error().to_string();
  ASSERT_EQ(reaped->size(), 1u);
  EXPECT_EQ(reaped->front().id, o.id);
  EXPECT_TRUE(reaped->front().orphaned());
  EXPECT_FALSE(fs::exists(dir));
  EXPECT_FALSE(fs::exists(dir + ".owner"));

  auto again = backend_->reap(std::chrono::hours(1), /*dry_run=*/false);
  ASSERT_TRUE(again.ok()) << again.error().to_string();
  EXPECT_TRUE(again->empty());  // idempotent
}

TEST_F(LocalBackendTest, ReapSparesALiveOwnersSandboxAndADirBeingCreated) {
  auto sb = make();
  ASSERT_NE(sb, nullptr);
  // A scratch dir whose marker is not written yet: a create in progress.
  const std::string making = root_ + "/rf-being-made";
  ASSERT_EQ(::mkdir(making.c_str(), 0700), 0);

  auto reaped = backend_->reap(std::chrono::hours(1), /*dry_run=*/false);
  ASSERT_TRUE(reaped.ok()) << reaped.error().to_string();
  EXPECT_TRUE(reaped->empty());
  EXPECT_EQ(run(*sb, {"echo", "alive"}).out, "alive\n");
  EXPECT_TRUE(fs::exists(root_ + "/" + sb->id() + ".owner"));

  auto all = backend_->list();
  ASSERT_TRUE(all.ok());
  const SandboxInfo* info = find_info(*all, "rf-being-made");
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->pid, 0);
  EXPECT_EQ(info->owner_pid, 0);

  ASSERT_TRUE(sb->destroy().ok());
  // Even "older than 0 s" spares it: without a marker, only kSetupGrace makes it old.
  auto zero = backend_->reap(std::chrono::seconds(0), /*dry_run=*/false);
  ASSERT_TRUE(zero.ok()) << zero.error().to_string();
  EXPECT_TRUE(zero->empty());
  EXPECT_TRUE(fs::is_directory(making));
  ASSERT_EQ(::rmdir(making.c_str()), 0);
}

TEST_F(LocalBackendTest, ReapOlderThanEndsALiveSandboxAndEveryTrace) {
  auto sb = make();
  ASSERT_NE(sb, nullptr);
  const pid_t runner = sb->init_pid();
  const std::string dir = scratch(*sb);
  ASSERT_TRUE(sb->write_file("/workspace/f", "x").ok());

  auto dry = backend_->reap(std::chrono::seconds(0), /*dry_run=*/true);
  ASSERT_TRUE(dry.ok());
  ASSERT_EQ(dry->size(), 1u);
  EXPECT_EQ(run(*sb, {"echo", "untouched"}).out, "untouched\n");

  auto reaped = backend_->reap(std::chrono::seconds(0), /*dry_run=*/false);
  ASSERT_TRUE(reaped.ok()) << reaped.error().to_string();
  ASSERT_EQ(reaped->size(), 1u);
  EXPECT_EQ(reaped->front().id, sb->id());
  EXPECT_EQ(reaped->front().owner_pid, ::getpid());  // not orphaned: reaped for its age
  EXPECT_EQ(reaped->front().pid, runner);
  EXPECT_FALSE(fs::exists(dir));
  EXPECT_FALSE(fs::exists(dir + ".owner"));
  Captured c;
  auto r = sb->exec(ExecCall{{"true"}}, c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().to_string(), "sandbox ended: tool runner (pid " + std::to_string(runner) +
                                       ") killed by signal 9 (Killed)");

  auto again = backend_->reap(std::chrono::seconds(0), /*dry_run=*/false);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->empty());
  EXPECT_TRUE(sb->destroy().ok());  // the owner's own destroy still succeeds
  EXPECT_TRUE(gone(runner));
}

TEST(LocalScratchRoot, RefusesASymlinkOrADirectoryOthersCanWrite) {
  const std::string base = make_temp_dir("rf-local-root");
  ASSERT_FALSE(base.empty());
  ASSERT_EQ(::symlink(base.c_str(), (base + "/link").c_str()), 0);
  auto link = prepare_scratch_root(base + "/link");
  ASSERT_FALSE(link.ok());
  EXPECT_EQ(link.error().to_string(), "scratch root " + base + "/link: is a symlink");

  ASSERT_EQ(::mkdir((base + "/open").c_str(), 0700), 0);
  ASSERT_EQ(::chmod((base + "/open").c_str(), 0777), 0);
  auto open = prepare_scratch_root(base + "/open");
  ASSERT_FALSE(open.ok());
  EXPECT_EQ(open.error().to_string(),
            "scratch root " + base + "/open: writable by others (mode 0777)");

  auto fresh = prepare_scratch_root(base + "/fresh");
  ASSERT_TRUE(fresh.ok()) << fresh.error().to_string();
  EXPECT_EQ(*fresh, base + "/fresh");
  EXPECT_EQ(fs::status(base + "/fresh").permissions(), fs::perms::owner_all);
  fs::remove_all(base);
}

// A command run as root in mode none may leave a mount in its scratch dir:
// a host directory bound there (the same file system, so the same device
// number as the tree) must come out of the removal untouched, neither
// emptied nor opened up to 0700. Run in a child with a mount namespace of
// its own, so the bind mount is nobody else's to see.
TEST(LocalScratchDir, ABindMountLeftInTheTreeIsNeitherEnteredNorChmoded) {
  if (::geteuid() != 0) RF_SKIP() << "a bind mount needs root";
  const std::string base = make_temp_dir("rf-local-bind");
  ASSERT_FALSE(base.empty());
  const std::string host = base + "/host", root = base + "/root";
  ASSERT_EQ(::mkdir(host.c_str(), 0751), 0);
  ASSERT_EQ(::chmod(host.c_str(), 0751), 0);
  { std::ofstream(host + "/keep.txt") << "host data"; }
  ASSERT_EQ(::mkdir(root.c_str(), 0700), 0);
  ASSERT_TRUE(create_scratch_dir(root, "rf-bind").ok());
  const std::string bound = root + "/rf-bind/workspace/h";
  ASSERT_EQ(::mkdir(bound.c_str(), 0700), 0);

  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::string said;
    if (::unshare(CLONE_NEWNS) != 0 ||
        ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        ::mount(host.c_str(), bound.c_str(), nullptr, MS_BIND, nullptr) != 0) {
      said = std::string("set-up: ") + std::strerror(errno);
    } else {
      const Status removed = remove_scratch_dir(root, "rf-bind");
      said = removed.ok() ? "removed" : removed.error().to_string();
      ::umount2(bound.c_str(), MNT_DETACH);
    }
    (void)!::write(pipe_fds[1], said.data(), said.size());
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  std::string said;
  char buf[512];
  for (ssize_t n; (n = ::read(pipe_fds[0], buf, sizeof buf)) > 0;) said.append(buf, n);
  ::close(pipe_fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);

  EXPECT_EQ(said, "remove " + bound + ": a mount point; not entered");
  EXPECT_EQ(slurp(host + "/keep.txt"), "host data");
  struct stat st {};
  ASSERT_EQ(::stat(host.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0751u);
  // Without the mount the rest goes as usual.
  EXPECT_TRUE(remove_scratch_dir(root, "rf-bind").ok());
  EXPECT_FALSE(fs::exists(root + "/rf-bind"));
  fs::remove_all(base);
}

// A process in a process group of its own, like a runner: `sh` that leaves a
// `sleep` in the group (its pid in `pidfile`) and becomes another `sleep`.
pid_t spawn_group_leader(const std::string& pidfile) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    const std::string script = "sleep 60 & echo $! > " + pidfile + "; exec sleep 61";
    ::execl("/bin/sh", "sh", "-c", script.c_str(), nullptr);
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  return pid;
}

pid_t read_pid(const std::string& path) {
  for (int i = 0; i < 200; ++i) {
    const std::string text = slurp(path);
    if (!text.empty() && text.back() == '\n') return static_cast<pid_t>(std::atoi(text.c_str()));
    std::this_thread::sleep_for(10ms);
  }
  return 0;
}

TEST(LocalInventory, ReapKillsTheRunnerAndItsGroupButNeverAReusedPid) {
  const std::string root = make_temp_dir("rf-local-inv");
  ASSERT_FALSE(root.empty());
  // A dead owner: its pid with the start time it had.
  const pid_t owner = ::fork();
  if (owner == 0) {
    ::pause();
    ::_exit(0);
  }
  const uint64_t owner_start = start_time_of(owner);
  ASSERT_GT(owner_start, 0u);
  ::kill(owner, SIGKILL);
  ::waitpid(owner, nullptr, 0);

  const pid_t runner = spawn_group_leader(root + "/runner.pid");
  const pid_t left_in_group = read_pid(root + "/runner.pid");
  ASSERT_GT(left_in_group, 0);
  const pid_t bystander = spawn_group_leader(root + "/bystander.pid");
  const pid_t bystanders_child = read_pid(root + "/bystander.pid");
  ASSERT_GT(bystanders_child, 0);
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  for (const char* id : {"rf-orphan1", "rf-orphan2"})
    ASSERT_EQ(::mkdir((root + "/" + id).c_str(), 0700), 0);
  ASSERT_TRUE(write_owner_marker(root, "rf-orphan1",
                                 {owner, owner_start, runner, start_time_of(runner), now})
                  .ok());
  // The bystander's pid with another start time: what a reused pid looks like.
  ASSERT_TRUE(write_owner_marker(root, "rf-orphan2",
                                 {owner, owner_start, bystander, start_time_of(bystander) + 1, now})
                  .ok());
  ASSERT_TRUE(write_owner_marker(root, "rf-stray", {owner, owner_start, runner, 1, now}).ok());
  { std::ofstream(root + "/notes.txt") << "not ours"; }
  ASSERT_EQ(::mkdir((root + "/Not-An-Id").c_str(), 0700), 0);

  auto listed = list_local_sandboxes(root);
  ASSERT_TRUE(listed.ok()) << listed.error().to_string();
  ASSERT_EQ(listed->size(), 2u);  // rf-orphan1 and rf-orphan2; nothing else is a sandbox
  const SandboxInfo* one = find_info(*listed, "rf-orphan1");
  ASSERT_NE(one, nullptr);
  EXPECT_EQ(one->pid, runner);
  EXPECT_TRUE(one->orphaned());
  const SandboxInfo* two = find_info(*listed, "rf-orphan2");
  ASSERT_NE(two, nullptr);
  EXPECT_EQ(two->pid, 0);  // the pid names another process now

  auto reaped = reap_local_sandboxes(root, std::chrono::hours(1), /*dry_run=*/false);
  ASSERT_TRUE(reaped.ok()) << reaped.error().to_string();
  std::vector<std::string> ids;
  for (const auto& i : *reaped) ids.push_back(i.id);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<std::string>{"rf-orphan1", "rf-orphan2"}));

  int status = 0;
  ASSERT_EQ(::waitpid(runner, &status, 0), runner);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  EXPECT_TRUE(wait_gone(left_in_group)) << "the runner's process group was not ended";
  EXPECT_EQ(::waitpid(bystander, &status, WNOHANG), 0) << "a reused pid was killed";
  EXPECT_FALSE(gone(bystanders_child));
  for (const char* name :
       {"rf-orphan1", "rf-orphan2", "rf-orphan1.owner", "rf-orphan2.owner", "rf-stray.owner"}) {
    EXPECT_FALSE(fs::exists(root + "/" + name)) << name;
  }
  EXPECT_TRUE(fs::exists(root + "/notes.txt"));
  EXPECT_TRUE(fs::is_directory(root + "/Not-An-Id"));

  auto again = reap_local_sandboxes(root, std::chrono::hours(1), /*dry_run=*/false);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->empty());

  ::kill(-bystander, SIGKILL);
  ::waitpid(bystander, nullptr, 0);
  fs::remove_all(root);
}

TEST(LocalInventory, NoScratchRootMeansNoSandboxes) {
  auto listed = list_local_sandboxes("/nonexistent/rf-local-root");
  ASSERT_TRUE(listed.ok()) << listed.error().to_string();
  EXPECT_TRUE(listed->empty());
  auto reaped = reap_local_sandboxes("/nonexistent/rf-local-root", std::chrono::seconds(0), false);
  ASSERT_TRUE(reaped.ok());
  EXPECT_TRUE(reaped->empty());
}

TEST(LocalOwnerMarker, RoundTripsAndRefusesAnythingElse) {
  const OwnerMarker m{4242, 123456, 4250, 123470, 1700000000};
  const std::string text = format_owner_marker(m);
  EXPECT_EQ(text,
            "owner_pid=4242\nowner_start=123456\nrunner_pid=4250\nrunner_start=123470\n"
            "created_at=1700000000\n");
  auto back = parse_owner_marker(text);
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(back->owner_pid, 4242);
  EXPECT_EQ(back->owner_start, 123456u);
  EXPECT_EQ(back->runner_pid, 4250);
  EXPECT_EQ(back->runner_start, 123470u);
  EXPECT_EQ(back->created_at, 1700000000);
  const std::pair<std::string, std::string> bad[] = {
      {"", "owner marker: owner_pid missing"},
      {text.substr(0, text.size() - 4), "owner marker: truncated"},  // being written
      {"owner_pid=0\n", "owner marker: owner_pid: expected a positive number, got \"0\""},
      {"owner_pid=x\n", "owner marker: owner_pid: expected a positive number, got \"x\""},
      {text + "owner_pid=1\n", "owner marker: owner_pid given twice"},
      {text + "extra=1\n", "owner marker: unknown key"},
  };
  for (const auto& [input, want] : bad) {
    auto r = parse_owner_marker(input);
    ASSERT_FALSE(r.ok()) << input;
    EXPECT_EQ(r.error().to_string(), want) << input;
  }
}

TEST(LocalSandboxPaths, CwdMapsOnlyFromUnderWorkspace) {
  EXPECT_EQ(*host_cwd("/s/id", "/workspace"), "/s/id/workspace");
  EXPECT_EQ(*host_cwd("/s/id", "/workspace/a/b"), "/s/id/workspace/a/b");
  EXPECT_EQ(*host_cwd("/s/id", "/workspace/"), "/s/id/workspace/");
  EXPECT_EQ(*host_cwd("/s/id", "/workspace/a..b"), "/s/id/workspace/a..b");
  for (const std::string bad :
       {"", "/", "/etc", "/workspacex", "workspace", "/workspace/..", "/workspace/a/../../etc"}) {
    auto r = host_cwd("/s/id", bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().to_string(),
              "exec: cwd must be under /workspace in a local sandbox, got \"" + bad + "\"");
  }
}

}  // namespace
}  // namespace rf::local
