// Attacks that must fail. Each test names one attack and asserts its exact
// outcome: the errno, the signal, or the limit the result reports.
#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <condition_variable>
#include <iterator>
#include <set>
#include <thread>

#include "host/uid_slots.h"
#include "integration/harness.h"

namespace rf::testing {
namespace {

class Attack : public SandboxTest {
 protected:
  void SetUp() override {
    SandboxTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    sb_ = make(spec_);
    ASSERT_TRUE(sb_);
    install_testprog(*sb_);
  }
  void TearDown() override {
    if (sb_) {
      EXPECT_TRUE(sb_->destroy().ok());
    }
  }
  std::string t(std::vector<std::string> args, Out* full = nullptr) {
    return SandboxTest::t(*sb_, std::move(args), full);
  }
  Out sh(const std::string& script, ExecCall call = {}) {
    return SandboxTest::sh(*sb_, script, call);
  }
  // `sleep SECONDS` sent now: its command runs before that of any call sent after.
  std::unique_ptr<StartedCall> start_sleep(const char* seconds, Captured& sink) {
    ExecCall call;
    call.argv = {"sleep", seconds};
    return sb_->start_exec(call, sink);
  }

  SandboxSpec spec_;
  std::unique_ptr<Sandbox> sb_;
};

// ---- user namespace, capabilities, privileges ----

TEST_F(Attack, CommandsRunAsAnUnprivilegedUser) {
  if constexpr (kDocker) {
    // No user namespace: the sandbox user is its slot's host uid itself.
    const std::string ids = t({"ids"});
    const uid_t uid = static_cast<uid_t>(std::stoul(ids.substr(4)));
    uint32_t slot = 0;
    EXPECT_TRUE(host::uid_slot_of(uid, &slot)) << ids;
    EXPECT_EQ(uid, host::slot_host_base(slot) + host::kSandboxUid) << ids;
    const std::string u = std::to_string(uid);
    EXPECT_EQ(ids, "uid=" + u + " gid=" + u + " euid=" + u);
  } else {
    EXPECT_EQ(t({"ids"}), "uid=1000 gid=1000 euid=1000");
  }
}

TEST_F(Attack, SetuidToRootFails) { EXPECT_EQ(t({"setuid0"}), "errno EPERM"); }

TEST_F(Attack, NoCapabilityInAnySet) {
  for (const char* set : {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"}) {
    EXPECT_EQ(t({"status", set}), std::string(set) + ":\t0000000000000000") << set;
  }
}

TEST_F(Attack, NoNewPrivsAndSeccompAreOn) {
  EXPECT_EQ(t({"status", "NoNewPrivs"}), "NoNewPrivs:\t1");
  EXPECT_EQ(t({"status", "Seccomp:"}), "Seccomp:\t2");
}

TEST_F(Attack, SandboxRootIsAnUnprivilegedHostUidOfItsOwn) {
  ASSERT_GT(sb_->init_pid(), 0) << "a local daemon's sandbox has a host pid";
  const std::string status = slurp("/proc/" + std::to_string(sb_->init_pid()) + "/status");
  const auto pos = status.find("Uid:\t");
  ASSERT_NE(pos, std::string::npos);
  const uid_t host_uid = static_cast<uid_t>(std::stoul(status.substr(pos + 5)));
  uint32_t slot = 0;
  EXPECT_TRUE(host::uid_slot_of(host_uid, &slot)) << host_uid;
  EXPECT_EQ(host_uid, host::slot_host_base(slot) + host::kSandboxUid);
  auto other = make();
  ASSERT_TRUE(other);
  const std::string other_status = slurp("/proc/" + std::to_string(other->init_pid()) + "/status");
  const uid_t other_uid =
      static_cast<uid_t>(std::stoul(other_status.substr(other_status.find("Uid:\t") + 5)));
  EXPECT_NE(other_uid, host_uid);
  uint32_t other_slot = 0;
  EXPECT_TRUE(host::uid_slot_of(other_uid, &other_slot));
  EXPECT_NE(other_slot, slot);
}

TEST_F(Attack, ChownToRootFails) {
  ASSERT_EQ(sh("touch f").result.exit_code, 0);
  Out r = sh("chown 0:0 f");
  EXPECT_EQ(r.result.exit_code, 1);
  EXPECT_NE(r.err.find("Operation not permitted"), std::string::npos) << r.err;
}

TEST_F(Attack, SethostnameFails) {
  EXPECT_EQ(t({"syscall", "sethostname"}), "errno EPERM");
  EXPECT_EQ(sh("hostname").out, sb_->id() + "\n");
}

TEST_F(Attack, RaisingTheFileLimitFails) {
  Out r = sh("ulimit -Hn 1000000");
  EXPECT_NE(r.result.exit_code, 0);
  EXPECT_NE(r.err.find("Operation not permitted"), std::string::npos) << r.err;
}

// ---- file system ----

TEST_F(Attack, RootIsReadOnly) { EXPECT_EQ(t({"create", "/evil"}), "errno EROFS"); }

TEST_F(Attack, UsrIsReadOnly) { EXPECT_EQ(t({"create", "/usr/bin/evil"}), "errno EROFS"); }

TEST_F(Attack, EtcIsReadOnly) { EXPECT_EQ(t({"create", "/etc/evil"}), "errno EROFS"); }

TEST_F(Attack, ShadowAndMachineSecretsAreAbsent) {
  for (const char* p :
       {"/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/ssh", "/etc/ssl/private",
        "/etc/machine-id", "/root", "/home", "/var/lib", "/work"}) {
    EXPECT_EQ(t({"exists", p}), "errno ENOENT") << p;
  }
  if constexpr (kDocker) {
    // The mount point stays; an empty read-only tmpfs covers the host's sysfs.
    EXPECT_EQ(sh("ls -A /sys | wc -l").out, "0\n");
    EXPECT_EQ(t({"create", "/sys/evil"}), "errno EROFS");
  } else {
    EXPECT_EQ(t({"exists", "/sys"}), "errno ENOENT");
  }
}

// The mount options of `target` as /proc/self/mountinfo shows them inside.
std::string mount_options(Sandbox& sb, const std::string& target) {
  return SandboxTest::sh(sb, "awk '$5 == \"" + target + "\" {print $6}' /proc/self/mountinfo").out;
}

TEST_F(Attack, ToolRunnerBinaryCannotBeReplaced) {
  // Owned by a host uid the sandbox cannot map, on a read-only bind.
  EXPECT_EQ(t({"write", "/.ringfence/tool-runner"}), "errno EACCES");
  // native binds the file; docker mounts the runner's volume at /.ringfence.
  EXPECT_EQ(mount_options(*sb_, kDocker ? "/.ringfence" : "/.ringfence/tool-runner").substr(0, 3),
            "ro,");
}

TEST_F(Attack, Pid1ExeCannotBeOpened_CVE_2019_5736) {
  EXPECT_EQ(t({"write", "/proc/1/exe"}), "errno EACCES");
  EXPECT_EQ(t({"read", "/proc/1/exe"}), "errno EACCES");
}

TEST_F(Attack, SelfExeOfAHostBinaryCannotBeWritten_CVE_2019_5736) {
  // The shell opens its own binary (the image's or the host's) for writing.
  Out r = sh("exec 3>/proc/self/exe");
  EXPECT_NE(r.result.exit_code, 0);
  // The host's binary (native) or the image's (docker), on a read-only mount.
  EXPECT_NE(r.err.find("Read-only file system"), std::string::npos) << r.err;
  EXPECT_EQ(mount_options(*sb_, kDocker ? "/" : "/usr").substr(0, 3), "ro,");
}

TEST_F(Attack, Pid1EnvironAndMemAreUnreadable) {
  EXPECT_EQ(t({"read", "/proc/1/environ"}), "errno EACCES");
  EXPECT_EQ(t({"write", "/proc/1/mem"}), "errno EACCES");
}

// A command's parent is the runner (PID 1), which forks it: the command holds
// nothing of the runner's memory once it execs, and may not read it. A
// self-probe's process is a fork of the runner that does not exec
// (runner/self_probe.h): it stays non-dumpable, like the runner.
TEST_F(Attack, TheRunnersEnvironAndMemAreUnreadable) {
  EXPECT_EQ(sh("echo $PPID").out, "1\n");
  EXPECT_EQ(sh("exec /workspace/t read /proc/$PPID/environ").out, "errno EACCES\n");
  EXPECT_EQ(sh("exec /workspace/t write /proc/$PPID/mem").out, "errno EACCES\n");
  EXPECT_EQ(sh("cat /proc/$PPID/comm").out, "tool-runner\n");
}

TEST_F(Attack, NoDeviceNodesCanBeMade) { EXPECT_EQ(t({"mknod", "/workspace/mem"}), "errno EPERM"); }

TEST_F(Attack, DevHoldsOnlyHarmlessNodes) {
  // Docker adds /dev/mqueue: POSIX queues of the sandbox's own IPC namespace.
  EXPECT_EQ(sh("ls /dev | tr '\\n' ' '").out,
            std::string("fd full ") + (kDocker ? "mqueue " : "") +
                "null ptmx pts random shm stderr stdin stdout tty urandom zero ");
  EXPECT_EQ(t({"exists", "/dev/mem"}), "errno ENOENT");
  EXPECT_EQ(t({"exists", "/dev/sda"}), "errno ENOENT");
}

TEST_F(Attack, EveryMountIsNosuidAndAllButDeviceNodesNodev) {
  Out r = sh("awk '{print $5, $6}' /proc/self/mountinfo");
  std::istringstream lines(r.out);
  std::string target, opts;
  int mounts = 0;
  while (lines >> target >> opts) {
    ++mounts;
    // Docker leaves nosuid off its read-only mounts (the image's root, the
    // runner's volume, /etc/hosts and friends): nothing there is writable, and
    // no_new_privs (asserted above) makes setuid bits inert on exec.
    if (kDocker && opts.rfind("ro,", 0) == 0) continue;
    EXPECT_NE(opts.find("nosuid"), std::string::npos) << target << " " << opts;
    const bool device = target == "/dev/null" || target == "/dev/zero" || target == "/dev/full" ||
                        target == "/dev/random" || target == "/dev/urandom" ||
                        target == "/dev/tty" || target == "/dev/pts" ||
                        target.rfind("/proc/", 0) == 0 || target == "/proc" ||
                        (kDocker && target == "/dev");
    if (!device) {
      EXPECT_NE(opts.find("nodev"), std::string::npos) << target << " " << opts;
    }
  }
  EXPECT_GT(mounts, 10);
}

TEST_F(Attack, ProcKernelMemoryAndKeysAreMasked) {
  EXPECT_EQ(sh("cat /proc/kcore /proc/keys /proc/timer_list | wc -c").out, "0\n");
}

TEST_F(Attack, ProcSysAndSysrqAreReadOnly) {
  EXPECT_EQ(t({"write", "/proc/sys/kernel/hostname"}), "errno EACCES");
  EXPECT_EQ(mount_options(*sb_, "/proc/sys").substr(0, 3), "ro,");
  // Kernels without CONFIG_MAGIC_SYSRQ have no such file at all.
  struct stat st {};
  const bool host_has_sysrq = ::stat("/proc/sysrq-trigger", &st) == 0;
  EXPECT_EQ(t({"write", "/proc/sysrq-trigger"}), host_has_sysrq ? "errno EACCES" : "errno ENOENT");
  if (host_has_sysrq) {
    EXPECT_EQ(mount_options(*sb_, "/proc/sysrq-trigger").substr(0, 3), "ro,");
  }
}

TEST_F(Attack, CgroupReleaseAgentIsUnreachable_CVE_2022_0492) {
  EXPECT_EQ(t({"syscall", "mount_cgroup"}), "errno EPERM");
  EXPECT_EQ(t({"exists", "/sys/fs/cgroup"}), "errno ENOENT");
}

TEST_F(Attack, NoFdOrCwdPointsOutside_CVE_2024_21626) {
  EXPECT_EQ(t({"fds"}), "0 1 2");
  EXPECT_EQ(sh("readlink /proc/self/cwd").out, "/workspace\n");
  EXPECT_EQ(sh("readlink /proc/1/cwd; echo $?").out, "1\n");  // PID 1 is not dumpable
  Out r = sh("ls -l /proc/self/fd/ | grep -c -- '->'");
  // 0, 1, 2 and the fd GNU ls itself opened; busybox ls closes its own first.
  EXPECT_EQ(r.out, kDocker ? "3\n" : "4\n");
}

TEST_F(Attack, DiskFillStopsAtTheLimit) {
  spec_.limits.disk_bytes = 16 << 20;
  sb_ = make(spec_);
  install_testprog(*sb_);
  Out r;
  // One file stops at RLIMIT_FSIZE (= the disk size) ...
  EXPECT_EQ(t({"fill", "/tmp/big"}, &r), "errno EFBIG after 16 MiB");
  EXPECT_EQ(r.result.limit, "disk");
  // ... several files at the tmpfs size.
  EXPECT_EQ(t({"fill", "/workspace/a", "10"}), "ok 10 MiB");
  const std::string out = t({"fill", "/workspace/b"}, &r);
  EXPECT_EQ(out.rfind("errno ENOSPC after ", 0), 0u) << out;
  EXPECT_LE(std::stoi(out.substr(19)), 6) << out;
  EXPECT_EQ(r.result.limit, "disk");
}

// Issue 40: empty files take no size; each writable tmpfs stops them at
// its inode cap (limits.h: tmpfs_inodes, 4096 for 16 MiB of disk), on every
// backend (docker's /tmp, /workspace and /dev/shm had none: 300,000 files).
TEST_F(Attack, EmptyFilesStopAtEachTmpfsInodeCap) {
  spec_.limits.disk_bytes = 16 << 20;
  sb_ = make(spec_);
  install_testprog(*sb_);
  for (const std::string dir : {"/tmp/many", "/workspace/many", "/dev/shm/many"}) {
    ASSERT_EQ(sh("mkdir " + dir + " && echo made").out, "made\n") << dir;
    const std::string out = t({"files", dir});
    ASSERT_EQ(out.rfind("errno ENOSPC after ", 0), 0u) << dir << ": " << out;
    const long made = std::stol(out.substr(19));
    EXPECT_LE(made, 4096) << dir;
    EXPECT_GE(made, 4000) << dir;
  }
}

TEST_F(Attack, CoreDumpsAreOff) {
  Out r;
  EXPECT_EQ(t({"coredump"}, &r), "raise core limit: errno EPERM");
  EXPECT_EQ(r.result.signal, SIGABRT);
  EXPECT_EQ(r.result.exit_code, 128 + SIGABRT);
  EXPECT_EQ(sh("ls /workspace | grep -c core").out, "0\n");
}

// ---- processes ----

TEST_F(Attack, NoHostProcessIsVisible) {
  // The runner and sh: nothing else. Builtins only, so the shell forks
  // nothing while it looks.
  std::istringstream names(sh("for p in /proc/[0-9]*; do read c < $p/comm; echo $c; done").out);
  std::multiset<std::string> seen{std::istream_iterator<std::string>(names), {}};
  EXPECT_EQ(seen, (std::multiset<std::string>{"sh", "tool-runner"}));
  EXPECT_EQ(sh("cat /proc/1/comm").out, "tool-runner\n");
}

// A host process running as the sandbox user's own host uid: without a pid
// namespace, kill(-1) from inside would reach it (same uid). It reports each
// SIGCHLD ('c') and SIGURG ('u') it receives on a pipe, and 'r' once ready.
class SameUidVictim {
 public:
  explicit SameUidVictim(uid_t uid) : uid_(uid) {
    int fds[2];
    EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    pid_ = ::fork();
    if (pid_ == 0) {  // async-signal-safe calls only from here
      report_fd = fds[1];
      struct sigaction sa {};
      sa.sa_handler = [](int sig) {
        const char c = sig == SIGCHLD ? 'c' : 'u';
        (void)!::write(report_fd, &c, 1);
      };
      ::sigaction(SIGCHLD, &sa, nullptr);
      ::sigaction(SIGURG, &sa, nullptr);
      if (::setgroups(0, nullptr) != 0 || ::setresgid(uid, uid, uid) != 0 ||
          ::setresuid(uid, uid, uid) != 0)
        ::_exit(1);
      (void)!::write(report_fd, "r", 1);
      for (;;) ::pause();
    }
    ::close(fds[1]);
    read_fd_ = fds[0];
  }
  ~SameUidVictim() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    ::close(read_fd_);
  }
  pid_t pid() const { return pid_; }
  // What it reported, up to and including `until` ("" + EOF when it died).
  std::string read_until(char until) {
    std::string got;
    char c;
    pollfd p{read_fd_, POLLIN, 0};
    while (::poll(&p, 1, 10'000) == 1 && ::read(read_fd_, &c, 1) == 1) {
      got += c;
      if (c == until) break;
    }
    return got;
  }
  // Whether that uid may signal it: kill(pid, 0) from a process of that uid.
  bool signalable_by_its_uid() const {
    const pid_t checker = ::fork();
    if (checker == 0) {
      if (::setgroups(0, nullptr) != 0 || ::setresgid(uid_, uid_, uid_) != 0 ||
          ::setresuid(uid_, uid_, uid_) != 0)
        ::_exit(2);
      ::_exit(::kill(pid_, 0) == 0 ? 0 : 1);
    }
    int status = 0;
    ::waitpid(checker, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }

  static inline int report_fd = -1;

 private:
  uid_t uid_;
  pid_t pid_ = -1;
  int read_fd_ = -1;
};

TEST_F(Attack, KillMinusOneSparesTheHostAndOtherSandboxes) {
  auto other = make();
  ASSERT_TRUE(other);
  // The host uid commands of this sandbox run as: its slot's sandbox user.
  ASSERT_GT(sb_->init_pid(), 0);
  struct stat init {};
  ASSERT_EQ(::stat(("/proc/" + std::to_string(sb_->init_pid())).c_str(), &init), 0);
  uint32_t slot = 0;
  ASSERT_TRUE(host::uid_slot_of(init.st_uid, &slot)) << init.st_uid;
  const uid_t sandbox_user = host::kFirstHostUid + slot * host::kUidRangeSize + host::kSandboxUid;
  SameUidVictim victim(sandbox_user);
  ASSERT_EQ(victim.read_until('r'), "r");
  ASSERT_TRUE(victim.signalable_by_its_uid());  // so only the pid namespace can spare it

  // The victim got nothing yet: a SIGURG sent now is the first thing it
  // reports (a pending SIGCHLD would come first; after a SIGKILL it is gone: EOF).
  auto untouched = [&] {
    EXPECT_EQ(::kill(victim.pid(), SIGURG), 0);
    return victim.read_until('u') == "u";
  };
  // kill(-1) reaches every process it may signal but PID 1 and the caller:
  // in this sandbox, none (the runner forks the command), so ESRCH.
  EXPECT_EQ(t({"kill", "-1", std::to_string(SIGCHLD)}), "errno ESRCH");
  EXPECT_TRUE(untouched()) << "kill(-1, SIGCHLD) inside reached a host process";
  // The same with SIGKILL, beside a second call of this sandbox (sent first,
  // so its command runs before the attack starts), which it does end.
  Captured slept;
  auto asleep = start_sleep("100", slept);
  EXPECT_EQ(t({"kill", "-1", "9"}), "ok");
  auto r = asleep->wait();
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->signal, SIGKILL);
  EXPECT_TRUE(untouched()) << "kill(-1, SIGKILL) inside reached a host process";
  EXPECT_EQ(::kill(::getpid(), 0), 0);
  EXPECT_EQ(SandboxTest::sh(*other, "echo alive").out, "alive\n");
  EXPECT_EQ(sh("echo still here").out, "still here\n");
}

TEST_F(Attack, KillingPid1FromInsideHasNoEffect) {
  EXPECT_EQ(t({"kill", "1", "9"}), "ok");
  EXPECT_EQ(sh("echo still here").out, "still here\n");
}

TEST_F(Attack, ConcurrentSandboxesCannotSeeEachOther) {
  auto other = make();
  ASSERT_TRUE(other);
  ASSERT_EQ(sh("echo secret > /tmp/mine; echo secret > /workspace/mine").result.exit_code, 0);
  // A sleeper that says when it runs, and lives until it is killed.
  struct Sleeper : Captured {
    std::condition_variable cv;
    void on_stdout(std::string_view d) override {
      Captured::on_stdout(d);
      cv.notify_all();
    }
  } sleeper;
  ExecCall bg;
  bg.argv = {"/bin/sh", "-c", "echo started; exec sleep 60"};
  Result<ExecResult> slept = make_error("sleeper", "did not run");
  std::thread thread([&] { slept = sb_->exec(bg, sleeper); });
  {
    std::unique_lock lock(sleeper.mu);
    ASSERT_TRUE(sleeper.cv.wait_for(lock, std::chrono::seconds(10), [&] {
      return sleeper.out == "started\n";
    })) << sleeper.out;
  }
  // Seen from its own sandbox, the sleeper and the files are there (it said
  // "started" as `sh`, and may not have exec'd `sleep` yet: looked at again
  // until it has, for a while)...
  const std::string look = "ls /tmp /workspace; ps -e -o comm= | grep -c sleep";
  std::string own = sh(look).out;
  for (const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
       own.ends_with("\n0\n") && std::chrono::steady_clock::now() < end;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    own = sh(look).out;
  }
  EXPECT_EQ(own, "/tmp:\nmine\n\n/workspace:\nmine\nt\n1\n");
  // ...and from the other, none of them.
  Out r = SandboxTest::sh(*other, look);
  EXPECT_EQ(r.out, "/tmp:\n\n/workspace:\n0\n");
  // The sleeper lived through both looks: it ends only now, by our signal.
  ASSERT_TRUE(sb_->send_signal(sleeper.call_id, SIGKILL).ok());
  thread.join();
  ASSERT_TRUE(slept.ok()) << slept.error().to_string();
  EXPECT_EQ(slept->signal, SIGKILL);
  EXPECT_EQ(slept->exit_code, 128 + SIGKILL);
}

TEST_F(Attack, ForkBombHitsThePidsLimit) {
  spec_.limits.pids = 32;
  sb_ = make(spec_);
  install_testprog(*sb_);
  Out r;
  const std::string out = t({"forkbomb"}, &r);
  EXPECT_EQ(out.rfind("errno EAGAIN after ", 0), 0u) << out;
  EXPECT_LT(std::stoi(out.substr(19)), 32);
  EXPECT_EQ(r.result.limit, "pids");
  EXPECT_EQ(sh("echo recovered").out, "recovered\n");
}

TEST_F(Attack, MemoryBombIsOomKilled) {
  spec_.limits.memory_bytes = 64 << 20;
  sb_ = make(spec_);
  install_testprog(*sb_);
  Out r;
  t({"membomb", "512"}, &r);
  EXPECT_EQ(r.result.signal, SIGKILL);
  EXPECT_EQ(r.result.exit_code, 137);
  EXPECT_TRUE(r.result.oom_killed);
  EXPECT_EQ(r.result.limit, "memory");
  EXPECT_EQ(sh("echo recovered").out, "recovered\n");
}

TEST_F(Attack, OutputFloodIsCappedWithAMarker) {
  ExecCall call;
  call.output_limit = 1 << 20;
  Out r = run(*sb_, {"/workspace/t", "flood"}, call);
  EXPECT_TRUE(r.result.output_truncated);
  EXPECT_EQ(r.result.limit, "output");
  const std::string marker = "\n[ringfence: output truncated at 1048576 bytes]\n";
  EXPECT_EQ(r.out.size(), 1u << 20);
  EXPECT_EQ(r.err, marker);
}

TEST_F(Attack, TimeoutKillsTheWholeTree) {
  ExecCall call;
  call.timeout = std::chrono::milliseconds(500);
  Out r = sh("sleep 100 & sleep 100 & sleep 100", call);
  EXPECT_TRUE(r.result.timed_out);
  EXPECT_EQ(r.result.limit, "timeout");
  EXPECT_EQ(r.result.exit_code, 137);
  EXPECT_LT(r.result.wall.count(), 5'000'000);
  EXPECT_EQ(sh("ps -e -o comm= | grep -c sleep").out, "0\n");
}

TEST_F(Attack, SetsidBackgroundProcessDoesNotOutliveItsCall) {
  const auto start = std::chrono::steady_clock::now();
  Out r = sh("setsid sleep 100 & echo started");
  EXPECT_EQ(r.out, "started\n");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(sh("ps -e -o comm= | grep -c sleep").out, "0\n");
}

// The runner forks each command itself, and what a command leaves behind
// reparents to it (runner/orphans.h): it says whose each one is.
TEST_F(Attack, ADetachedProcessThatDropsItsStdioDoesNotOutliveItsCall) {
  const auto start = std::chrono::steady_clock::now();
  Out r =
      sh("(setsid sleep 100 </dev/null >/dev/null 2>&1 &); "
         "setsid sleep 101 </dev/null >/dev/null 2>&1 & echo started");
  EXPECT_EQ(r.out, "started\n");
  EXPECT_EQ(r.result.exit_code, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(sh("ps -e -o comm= | grep -c sleep").out, "0\n");
}

// A call running beside it does not let a leftover that keeps the call's
// process group, or its stdout, outlive its call: the call ends at once, and
// with nothing of it left.
TEST_F(Attack, LeftoversEndWithTheirCallWhileAnotherCallRuns) {
  Captured slept;
  auto asleep = start_sleep("3", slept);
  const auto start = std::chrono::steady_clock::now();
  Out r = sh("setsid sleep 100 & sleep 101 </dev/null >/dev/null 2>&1 & echo started");
  EXPECT_EQ(r.out, "started\n");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(sh("ps -e -o args= | grep -c '^sleep 10[01]$'").out, "0\n");
  auto y = asleep->wait();
  ASSERT_TRUE(y.ok()) << y.error().to_string();
  EXPECT_EQ(y->exit_code, 0);
}

// The documented exception: a process that leaves its call's process group
// and drops its stdio, while another call runs, could be of either. It
// delays neither, and lives until both have ended.
TEST_F(Attack, ADetachedProcessWithNoStdioBesideAnotherCallEndsWithTheLastOfThem) {
  Captured slept;
  // The other call runs until told (a file appears), not for a time: on a
  // loaded host the two calls below once outlasted the seconds it slept,
  // and the process, rightly ended with the last call, was not there to count.
  ExecCall waiting;
  waiting.argv = {"sh", "-c", "while [ ! -e /tmp/go ]; do sleep 0.05; done"};
  auto asleep = sb_->start_exec(waiting, slept);
  const auto start = std::chrono::steady_clock::now();
  // It waits until the process has left its group (else the group's kill
  // takes it, as it should).
  Out r =
      sh("setsid sleep 100 </dev/null >/dev/null 2>&1 & p=$!; "
         "while [ \"$(cut -d' ' -f5 /proc/$p/stat)\" = $$ ]; do :; done; echo started");
  EXPECT_EQ(r.out, "started\n");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  EXPECT_EQ(sh("ps -e -o args= | grep -c '^sleep 100$'").out, "1\n");
  EXPECT_EQ(sh("touch /tmp/go").out, "");
  auto y = asleep->wait();
  ASSERT_TRUE(y.ok()) << y.error().to_string();
  EXPECT_EQ(y->exit_code, 0);
  EXPECT_EQ(sh("ps -e -o args= | grep -c '^sleep 100$'").out, "0\n");
}

// The other way round: calls that end beside a running one do not take its
// background processes with them, whether they kept its process group or not.
TEST_F(Attack, ACallsBackgroundProcessesOutliveOtherCallsEndingBesideIt) {
  Captured seen;
  ExecCall y;
  y.argv = {"sh", "-c",
            "(sleep 30 &); (setsid sleep 31 </dev/null >/dev/null 2>&1 &); sleep 1.5; "
            "ps -e -o args= | grep -c '^sleep 3[01]$'"};
  auto running = sb_->start_exec(y, seen);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  for (int i = 0; i < 10; ++i) EXPECT_EQ(sh("true").result.exit_code, 0);
  auto r = running->wait();
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(seen.out, "2\n");
  EXPECT_EQ(sh("ps -e -o comm= | grep -c sleep").out, "0\n");
}

// Calls side by side in one sandbox run as one uid, yet neither reads the
// other's environment or memory (runner/call_domain.h): what one call was
// given (an identity step's values in a per_run sandbox) is out of reach of a
// call beside it. A call's own processes still reach each other, renames
// across directories still work, and signals still cross.
TEST_F(Attack, ACallCannotReadTheEnvironmentOrMemoryOfACallBesideIt) {
  Captured seen;
  ExecCall victim;
  victim.argv = {"sleep", "31"};
  victim.env = {{"RF_BESIDE", "a-value-for-this-call-only"}};
  auto running = sb_->start_exec(victim, seen);
  // Found from another call, as an attacker would: visible, and of its uid.
  const Out found =
      sh("while :; do for p in /proc/[0-9]*; do "
         "[ \"$(tr '\\0' ' ' < $p/cmdline 2>/dev/null)\" = 'sleep 31 ' ] && "
         "[ \"$(awk '/^Uid:/{print $2}' $p/status)\" = \"$(id -u)\" ] && echo ${p#/proc/} && exit; "
         "done; done");
  const std::string pid = found.out.substr(0, found.out.find('\n'));
  ASSERT_FALSE(pid.empty()) << found.out << found.err << found.result.limit;
  const std::string proc = "/proc/" + pid;
  EXPECT_EQ(t({"read", proc + "/environ"}), "errno EACCES");
  EXPECT_EQ(t({"read", proc + "/mem"}), "errno EACCES");
  EXPECT_EQ(t({"write", proc + "/mem"}), "errno EACCES");
  EXPECT_EQ(t({"read", proc + "/maps"}), "errno EACCES");
  EXPECT_EQ(t({"read", proc + "/fd/1"}), "errno EACCES");  // its stdout, through the link
  // Within one call, as before.
  EXPECT_EQ(sh("RF_OWN=1 sleep 5 & p=$!; until [ \"$(cat /proc/$p/comm)\" = sleep ]; do :; done; "
               "tr '\\0' '\\n' < /proc/$p/environ | grep -c '^RF_OWN=1$'; kill $p")
                .out,
            "1\n");
  EXPECT_EQ(sh("mkdir -p a b && echo x > a/f && mv a/f b/f && ln b/f a/g && cat a/g").out, "x\n");
  EXPECT_EQ(sh("kill " + pid).result.exit_code, 0);
  auto r = running->wait();
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->signal, SIGTERM);
}

// ---- seccomp: each refused syscall returns its exact errno ----

struct SyscallCase {
  const char* verb;
  const char* outcome;
};

class SeccompAttack : public Attack, public ::testing::WithParamInterface<SyscallCase> {};

TEST_P(SeccompAttack, IsRefused) { EXPECT_EQ(t({"syscall", GetParam().verb}), GetParam().outcome); }

INSTANTIATE_TEST_SUITE_P(
    Syscalls, SeccompAttack,
    ::testing::Values(
        SyscallCase{"bpf", "errno EPERM"}, SyscallCase{"keyctl", "errno EPERM"},
        SyscallCase{"add_key", "errno EPERM"}, SyscallCase{"userfaultfd", "errno EPERM"},
        SyscallCase{"perf_event_open", "errno EPERM"}, SyscallCase{"io_uring_setup", "errno EPERM"},
        SyscallCase{"ptrace", "errno EPERM"}, SyscallCase{"process_vm_readv", "errno EPERM"},
        SyscallCase{"mount_tmpfs", "errno EPERM"}, SyscallCase{"umount_proc", "errno EPERM"},
        SyscallCase{"pivot_root", "errno EPERM"}, SyscallCase{"unshare_user", "errno EPERM"},
        SyscallCase{"unshare_net", "errno EPERM"}, SyscallCase{"setns", "errno EPERM"},
        SyscallCase{"clone_newuser", "errno EPERM"}, SyscallCase{"clone3", "errno ENOSYS"},
        SyscallCase{"kexec_load", "errno EPERM"}, SyscallCase{"init_module", "errno EPERM"},
        SyscallCase{"open_by_handle_at", "errno EPERM"}, SyscallCase{"reboot", "errno EPERM"},
        SyscallCase{"swapon", "errno EPERM"}, SyscallCase{"acct", "errno EPERM"},
        SyscallCase{"syslog", "errno EPERM"}, SyscallCase{"chroot", "errno EPERM"},
        SyscallCase{"personality", "errno EPERM"}, SyscallCase{"tiocsti", "errno EPERM"},
        SyscallCase{"tiocsti_high", "errno EPERM"}, SyscallCase{"tioclinux", "errno EPERM"},
        SyscallCase{"socket_alg", "errno EPERM"}, SyscallCase{"socket_vsock", "errno EPERM"},
        SyscallCase{"socket_packet", "errno EPERM"}),
    [](const auto& info) { return std::string(info.param.verb); });

// The signal that ends `rf-testprog syscall i386` run on the host itself,
// outside any sandbox: 0 when the 32-bit entry point answered. A kernel
// without IA32 emulation (CONFIG_IA32_EMULATION off, or ia32_emulation=0, as
// on some VM kernels) has no such entry point: int 0x80 is a SIGSEGV there.
int host_i386_signal() {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::dup2(null, 2);
    ::execl(RF_TESTPROG_PATH, RF_TESTPROG_PATH, "syscall", "i386", nullptr);
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

TEST_F(Attack, I386EntryPointKillsWithSigsys) {
  Out r;
  t({"syscall", "i386"}, &r);
  if (host_i386_signal() == SIGSEGV) {
    // No 32-bit entry point on this kernel: nothing to filter, and nothing
    // gets through either (the host's own process dies the same way).
    EXPECT_EQ(r.result.signal, SIGSEGV);
    EXPECT_EQ(r.result.exit_code, 128 + SIGSEGV);
    return;
  }
  EXPECT_EQ(r.result.signal, SIGSYS);
  EXPECT_EQ(r.result.exit_code, 128 + SIGSYS);
}

TEST_F(Attack, X32EntryPointKillsWithSigsys) {
  Out r;
  t({"syscall", "x32"}, &r);
  EXPECT_EQ(r.result.signal, SIGSYS);
  EXPECT_EQ(r.result.exit_code, 128 + SIGSYS);
}

// ---- network ----

TEST_F(Attack, OnlyLoopbackExists) {
  EXPECT_EQ(sh("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '").out, "lo\n");
}

TEST_F(Attack, HostLoopbackIsUnreachable) {
  // A listener on the host's 127.0.0.1 is not the sandbox's 127.0.0.1.
  const int srv = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(srv, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(srv, 1), 0);
  socklen_t len = sizeof addr;
  ::getsockname(srv, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  EXPECT_EQ(t({"connect", "127.0.0.1", std::to_string(port)}), "errno ECONNREFUSED");
  ::close(srv);
}

TEST_F(Attack, NoResolverIsConfigured) {
  // Docker writes its own resolv.conf even for network none; with no route,
  // no query can leave either way.
  if constexpr (!kDocker) {
    EXPECT_EQ(sh("wc -c < /etc/resolv.conf").out, "0\n");
  }
  EXPECT_EQ(t({"resolve", "example.com"}), "refused");
}

}  // namespace
}  // namespace rf::testing
