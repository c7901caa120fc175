#include "native/native_sandbox.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>

#include "core/io.h"
#include "core/log.h"
#include "core/unique_fd.h"
#include "host/idmapped_tree.h"
#include "host/janitor.h"
#include "host/pid1_readback.h"
#include "host/runner_client.h"
#include "host/setup_step.h"
#include "native/clone_child.h"

namespace rf::native {
namespace {

using Clock = std::chrono::steady_clock;

// A sandbox's setup takes milliseconds; the limit catches a child that hangs.
// Under ThreadSanitizer the child (forked from a threaded, instrumented
// process) sets up many times slower, and several at once passed 10 s.
#if defined(__SANITIZE_THREAD__)
constexpr std::chrono::milliseconds kSetupTimeout{60'000};
#else
constexpr std::chrono::milliseconds kSetupTimeout{10'000};
#endif

void sigkill(int pidfd, pid_t) { ::syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0); }

}  // namespace

// What one start() holds. The child reads `config` (and runs on `stack`)
// until it execs, so both outlive it: start() kills the child before they go
// unless it exec'd.
struct NativeSandbox::Launch {
  Launch(const ChildConfig& base, const MountPlan& plan, std::vector<StepTiming>* timings)
      : config(base), plan(plan), timer(timings) {
    config.plan = &plan;
  }
  ChildConfig config;
  const MountPlan& plan;
  host::StepTimer timer;
  UniqueFd sync_parent, sync_child;         // SOCK_SEQPACKET: the child's report, then EOF at exec
  UniqueFd proto_parent, proto_child;       // the runner's protocol socket (its fd 3)
  host::IdmappedTree workspace;             // --workspace DIR: the detached, idmapped tree
  std::vector<host::IdmappedTree> volumes;  // each volume's, in the spec's order
  std::vector<UniqueFd> join_fds;           // cgroup v1: the `tasks` files the child joins by
  ChildStack stack;
  pid_t pid = -1;
};

NativeSandbox::NativeSandbox(SandboxSpec spec, host::UidSlot slot,
                             std::unique_ptr<host::Cgroup> cgroup,
                             std::unique_ptr<host::EgressLease> egress)
    : host::RunnerSandbox(std::move(spec)),
      slot_(std::move(slot)),
      cgroup_(std::move(cgroup)),
      egress_(std::move(egress)) {
  // The runner serves JIT requests on an abstract socket: private only in a
  // network namespace of the sandbox's own.
  takes_credentials_ = spec_.network != NetworkPolicy::kHost;
}

NativeSandbox::~NativeSandbox() {
  if (auto s = destroy(); !s) spdlog::warn("{}: destroy: {}", spec_.id, s.error().to_string());
}

Status NativeSandbox::start(const ChildConfig& base, const MountPlan& plan,
                            std::vector<StepTiming> host_steps) {
  timings_ = std::move(host_steps);
  Launch l(base, plan, &timings_);
  RF_TRY(open_channels(l));
  RF_TRY(prepare_workspace(l));
  RF_TRY(open_cgroup_join_files(l));
  RF_TRY(clone(l));
  // From here the child runs on l.stack and reads l.config: any failure kills
  // it before they go (and destroy() reaps it).
  bool exec_done = false;
  struct KillUnlessExecd {
    NativeSandbox* self;
    const bool& exec_done;
    ~KillUnlessExecd() {
      if (!exec_done) self->kill_child_now();
    }
  } guard{this, exec_done};
  RF_TRY(move_child_into_cgroup(l));
  RF_TRY(write_id_maps(l));
  RF_TRY(release_child(l));
  auto setup = wait_for_child_setup(l);
  exec_done = true;  // EOF on the sync socket: the child exec'd (CLOEXEC) or died
  RF_TRY(setup);
  read_back_pid1(l);
  return handshake(l);
}

Status NativeSandbox::open_channels(Launch& l) {
  int sync[2], proto[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sync) != 0) {
    return host::setup_error("socketpair", sys_error("sync"));
  }
  l.sync_parent = UniqueFd(sync[0]);
  l.sync_child = UniqueFd(sync[1]);
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, proto) != 0) {
    return host::setup_error("socketpair", sys_error("protocol"));
  }
  l.proto_parent = UniqueFd(proto[0]);
  l.proto_child = UniqueFd(proto[1]);
  l.config.sync_fd = l.sync_child.get();
  l.config.proto_fd = l.proto_child.get();
  l.config.hostname = spec_.id;
  l.config.own_network = spec_.network != NetworkPolicy::kHost;
  return ok_status();
}

Status NativeSandbox::pause() {
  std::lock_guard lock(pause_mu_);
  if (paused_) return ok_status();
  if (!cgroup_) return make_error("pause " + id(), "it has no cgroup");
  RF_TRY(cgroup_->freeze(true));
  paused_ = true;
  return ok_status();
}

Status NativeSandbox::resume() {
  std::lock_guard lock(pause_mu_);
  if (!paused_) return ok_status();
  RF_TRY(cgroup_->freeze(false));
  paused_ = false;
  return ok_status();
}

Status NativeSandbox::prepare_workspace(Launch& l) {
  const uid_t sandbox_user = slot_.host_base() + host::kSandboxUid;
  // Volumes: idmapped as the workspace is, so that every sandbox of the
  // project sees the files as its own user's (on disk: the volume's owner).
  for (const VolumeMount& v : spec_.volumes) {
    auto tree = l.timer.run("prepare volume", [&] {
      return host::make_idmapped_tree(v.host_dir, sandbox_user, sandbox_user, v.readonly);
    });
    if (!tree) return host::setup_error("prepare volume " + v.name, tree.error());
    l.volumes.push_back(std::move(*tree));
    l.config.tree_fds[l.volumes.size()] = l.volumes.back().fd.get();
  }
  if (spec_.workspace_dir.empty()) return ok_status();
  auto tree = l.timer.run("prepare workspace", [&] {
    return host::make_idmapped_tree(spec_.workspace_dir, sandbox_user, sandbox_user);
  });
  if (!tree) return host::setup_error("prepare workspace", tree.error());
  if (!tree->idmapped) {
    spdlog::warn("{}: {} cannot be idmapped; files there keep their host owners", spec_.id,
                 spec_.workspace_dir);
  }
  l.workspace = std::move(*tree);
  l.config.tree_fds[0] = l.workspace.fd.get();
  return ok_status();
}

// cgroup v1: the child moves itself in as its first step (see Cgroup::self_attach_files).
Status NativeSandbox::open_cgroup_join_files(Launch& l) {
  const auto files = cgroup_->self_attach_files();
  if (files.size() > std::size(l.config.join_cgroup_fds)) {
    return host::setup_error("join cgroup", make_error("cgroup", "too many hierarchies"));
  }
  for (size_t i = 0; i < files.size(); ++i) {
    l.join_fds.emplace_back(::open(files[i].c_str(), O_WRONLY | O_CLOEXEC));
    if (!l.join_fds.back()) {
      return host::setup_error("join cgroup", sys_error("open " + files[i]));
    }
    l.config.join_cgroup_fds[i] = l.join_fds.back().get();
  }
  return ok_status();
}

Status NativeSandbox::clone(Launch& l) {
  int pidfd = -1;
  l.pid = l.timer.run(
      "clone", [&] { return clone_child(l.config, cgroup_->clone_into_fd(), l.stack, &pidfd); });
  if (l.pid < 0) return host::setup_error("clone", sys_error("clone"));
  adopt_runner_process(l.pid, UniqueFd(pidfd));
  // The child has its own copies now; ours would keep its ends open.
  l.sync_child.reset();
  l.proto_child.reset();
  l.join_fds.clear();
  l.workspace.fd.reset();
  return ok_status();
}

// Only where the clone could not start the child in its cgroup (v2 under
// ThreadSanitizer, see clone_child.h): before the go byte, so the child's
// cgroup namespace is rooted there.
Status NativeSandbox::move_child_into_cgroup(Launch& l) {
  if (kClonesIntoCgroup || cgroup_->clone_into_fd() < 0) return ok_status();
  if (auto s = l.timer.run("move into cgroup", [&] { return cgroup_->add_process(l.pid); }); !s) {
    return host::setup_error("move into cgroup", s.error());
  }
  return ok_status();
}

// The sandbox's root is the first host uid of its slot: never host root (rule 1).
Status NativeSandbox::write_id_maps(Launch& l) {
  const std::string map =
      "0 " + std::to_string(slot_.host_base()) + " " + std::to_string(host::kUidRangeSize) + "\n";
  auto maps = l.timer.run("write id maps", [&]() -> Status {
    RF_TRY(rf::write_file("/proc/" + std::to_string(l.pid) + "/uid_map", map));
    return rf::write_file("/proc/" + std::to_string(l.pid) + "/gid_map", map);
  });
  if (!maps) return host::setup_error("write id maps", maps.error());
  return ok_status();
}

// The go byte: the child waits for it before anything that needs its id maps.
Status NativeSandbox::release_child(Launch& l) {
  if (::send(l.sync_parent.get(), "g", 1, MSG_NOSIGNAL) != 1) {
    return host::setup_error("wait for parent", sys_error("send"));
  }
  return ok_status();
}

Status NativeSandbox::wait_for_child_setup(Launch& l) {
  const std::vector<std::string> names = child_step_names(l.plan);
  ChildReport report{};
  bool have_report = false;
  const auto deadline = Clock::now() + kSetupTimeout;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    pollfd p{l.sync_parent.get(), POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
    if (r == 0) {
      return make_error("sandbox setup",
                        "timed out after " + std::to_string(kSetupTimeout.count()) + " ms");
    }
    if (r < 0) {
      if (errno == EINTR) continue;
      return sys_error("sandbox setup: poll");
    }
    ChildReport next{};
    const ssize_t n = ::recv(l.sync_parent.get(), &next, sizeof next, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: the runner was exec'd, or the child died
    if (static_cast<size_t>(n) == sizeof next) {
      report = next;
      have_report = true;
    }
  }
  if (have_report) {
    for (uint32_t i = 0; i < report.step_count && i < names.size() && i < kMaxSteps; ++i) {
      timings_.push_back({names[i], std::chrono::nanoseconds(report.step_ns[i])});
    }
  }
  if (have_report && report.failed_step >= 0) {
    const auto idx = static_cast<size_t>(report.failed_step);
    const std::string step = idx < names.size() ? names[idx] : "step " + std::to_string(idx);
    return Error{"sandbox setup failed at step \"" + step + "\"", "", report.sys_errno};
  }
  if (!have_report) {
    auto why = death_reason();
    return host::setup_error("child",
                             why ? *why : make_error("sandbox init", "ended without a report"));
  }
  return ok_status();
}

// For a boundary report (spec.probe_at_start): while the runner starts and
// runs its self-probe, on a core the start leaves idle, what the host reads
// of PID 1 from outside (host/pid1_readback.h). Its seccomp programs are
// read once the exec is done, stopping the runner for the read (tens of us)
// before its hello, not in the middle of its first call; its namespaces'
// inodes are made here, not by the self-probe (200-300 us there,
// rf_proof_bench). What cannot be read is said in the report, not here.
void NativeSandbox::read_back_pid1(Launch& l) {
  if (!spec_.probe_at_start) return;
  (void)l.timer.run("read back PID 1", [&] {
    readback_ = host::read_back_pid1(l.pid);
    return ok_status();
  });
}

Status NativeSandbox::handshake(Launch& l) {
  runner_ = std::make_unique<host::RunnerClient>(std::move(l.proto_parent));
  expect_start_probe(kStartProbeInsideOnly);
  if (auto s = l.timer.run("handshake", [&] { return runner_->handshake(kSetupTimeout); }); !s) {
    if (auto why = death_reason()) return host::setup_error("handshake", *why);
    return host::setup_error("handshake", s.error());
  }
  return ok_status();
}

void NativeSandbox::kill_child_now() { end_runner(sigkill); }

Status NativeSandbox::destroy() {
  std::lock_guard lock(mu_);
  if (destroyed_) return ok_status();
  destroyed_ = true;
  if (runner_) runner_->fail_all(make_error("sandbox", "destroyed"));
  // A paused sandbox is thawed first: a frozen task takes SIGKILL only once
  // it runs again (v1), and PID 1 must die for its namespace to end.
  if (paused_ && cgroup_) {
    if (auto thawed = cgroup_->freeze(false); !thawed) {
      spdlog::warn("{}: thaw before destroy: {}", spec_.id, thawed.error().to_string());
    }
    paused_ = false;
  }
  // Killing PID 1 makes the kernel kill every process in its PID namespace.
  end_runner(sigkill);
  Status result;
  if (cgroup_) {
    // Stragglers (a process between fork and the namespace's end) die here;
    // if some survive, remove() says so.
    if (auto killed = cgroup_->kill_all(); !killed) {
      spdlog::warn("{}: cgroup kill: {}", spec_.id, killed.error().to_string());
    }
    result = cgroup_->remove();
    if (result) {
      if (auto j = host::Janitor::get()) {
        for (const auto& dir : cgroup_->paths()) (*j)->untrack(dir);
      }
    }
  }
  egress_.reset();  // closes its socket and connections at the proxy
  slot_.release();
  return result;
}

Status NativeSandbox::with_egress(const std::function<Status(host::EgressLease&)>& fn) {
  std::lock_guard lock(mu_);
  if (destroyed_ || !egress_) return make_error("edge credentials", "sandbox " + id() + " is gone");
  return fn(*egress_);
}

}  // namespace rf::native
