#include "native/native_backend.h"

#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>

#include "core/io.h"
#include "core/log.h"
#include "native/call_usage.h"
#include "native/cgroup.h"
#include "native/child_setup.h"
#include "native/doctor.h"
#include "native/host_image.h"
#include "native/inventory.h"
#include "native/janitor.h"
#include "native/seccomp_profile.h"
#include "native/uid_slots.h"
#include "native/workspace_mount.h"
#include "sandbox/exec_request.h"
#include "sandbox/runner_client.h"
#include "sandbox/runner_exit.h"
#include "sandbox/runner_sandbox.h"
#include "sandbox/setup_step.h"

namespace rf::native {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kNamespaceFlags =
    CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS;
constexpr std::chrono::milliseconds kSetupTimeout{10'000};

// ThreadSanitizer keeps its per-thread state behind the thread pointer: a
// CLONE_VM child would run on the cloning thread's state while that thread
// goes on, and both crash. Under TSAN the child always gets a copy of memory.
#if defined(__SANITIZE_THREAD__)
constexpr bool kCloneVmAllowed = false;
#else
constexpr bool kCloneVmAllowed = true;
#endif

int read_cap_last_cap() {
  auto text = read_file("/proc/sys/kernel/cap_last_cap");
  return text ? std::atoi(text->c_str()) : 40;
}

// clone3 with a pidfd (and CLONE_INTO_CGROUP on v2); clone(2) where clone3 is
// missing. Both return twice like fork: 0 in the child.
pid_t clone_sandbox(int cgroup_fd, bool own_network, int* pidfd) {
  const uint64_t namespaces =
      own_network ? kNamespaceFlags : kNamespaceFlags & ~uint64_t{CLONE_NEWNET};
  clone_args args{};
  args.flags = namespaces | CLONE_PIDFD | (cgroup_fd >= 0 ? CLONE_INTO_CGROUP : 0);
  args.pidfd = reinterpret_cast<uint64_t>(pidfd);
  args.exit_signal = SIGCHLD;
  args.cgroup = cgroup_fd >= 0 ? static_cast<uint64_t>(cgroup_fd) : 0;
  long pid = ::syscall(SYS_clone3, &args, sizeof args);
  if (pid < 0 && errno == ENOSYS && cgroup_fd < 0) {
    pid =
        ::syscall(SYS_clone, namespaces | CLONE_PIDFD | SIGCHLD, nullptr, pidfd, nullptr, nullptr);
  }
  return static_cast<pid_t>(pid);
}

// The child's stack while it shares the host's memory (CLONE_VM), until it
// execs the runner. Unmapped only once the child has exec'd or died.
class ChildStack {
 public:
  static constexpr size_t kSize = 256 * 1024;
  ChildStack() {
    void* p = ::mmap(nullptr, kSize, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    base_ = p == MAP_FAILED ? nullptr : p;
  }
  ~ChildStack() {
    if (base_) ::munmap(base_, kSize);
  }
  void* top() const { return base_ ? static_cast<char*>(base_) + kSize : nullptr; }

 private:
  void* base_ = nullptr;
};

int child_entry(void* config) {
  run_child(*static_cast<const ChildConfig*>(config));  // never returns
  return 127;
}

// Without CLONE_INTO_CGROUP (v1): the child shares the host's memory until it
// execs, as posix_spawn's child does. A fork-style clone of a multi-threaded
// worker copies its page tables, and every write by its other threads while
// the child sets up is a copy-on-write fault with a TLB-shootdown IPI
// (measured: ~20% of the worker's CPU in per_tool). The child touches only its
// own stack and reads the config; run_child allocates nothing.
pid_t clone_sandbox_vm(bool own_network, const ChildConfig& config, void* stack_top, int* pidfd) {
  const uint64_t namespaces =
      own_network ? kNamespaceFlags : kNamespaceFlags & ~uint64_t{CLONE_NEWNET};
  return ::clone(child_entry, stack_top,
                 static_cast<int>(namespaces | CLONE_VM | CLONE_PIDFD) | SIGCHLD,
                 const_cast<ChildConfig*>(&config), pidfd);
}

class NativeSandbox;

class NativeBackend : public Backend {
 public:
  NativeBackend(NativeOptions options, CgroupLayout layout, SeccompFilters seccomp)
      : options_(std::move(options)),
        layout_(std::move(layout)),
        seccomp_(std::move(seccomp)),
        cap_last_cap_(read_cap_last_cap()),
        egress_(options_.egress) {}

  std::string name() const override { return "native"; }
  Result<std::unique_ptr<Sandbox>> create(const SandboxSpec& spec) override;
  Result<std::vector<SandboxInfo>> list() override {
    return list_native_sandboxes(layout_, options_.cgroup_parent);
  }
  Result<std::vector<SandboxInfo>> reap(std::chrono::seconds older_than, bool dry_run) override {
    return reap_native_sandboxes(layout_, options_.cgroup_parent, older_than, dry_run);
  }
  std::vector<HealthCheck> health() override {
    return native_health(
        DoctorInputs{&layout_, "", options_.cgroup_parent, &seccomp_, options_.runner_path});
  }

 private:
  NativeOptions options_;
  CgroupLayout layout_;
  SeccompFilters seccomp_;
  int cap_last_cap_;
  EgressHub egress_;
};

class NativeSandbox : public RunnerSandbox {
 public:
  NativeSandbox(SandboxSpec spec, UidSlot slot, std::unique_ptr<Cgroup> cgroup,
                std::unique_ptr<EgressLease> egress)
      : RunnerSandbox(std::move(spec)),
        slot_(std::move(slot)),
        cgroup_(std::move(cgroup)),
        egress_(std::move(egress)) {}
  ~NativeSandbox() override { (void)destroy(); }

  Result<ExecResult> exec(const ExecCall& call, OutputSink& sink) override;
  Status destroy() override;

  // Set-up, called once by the backend. On error the destructor cleans up.
  Status start(const ChildConfig& base, const MountPlan& plan, std::vector<StepTiming> host_steps);

 private:
  Status wait_for_child_setup(const std::vector<std::string>& step_names, int sync_fd);

 public:
  // SIGKILL and reap: set-up failed, and the child must not run on past it.
  void kill_child_now() {
    end_runner(
        [](int pidfd, pid_t) { ::syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0); });
  }

 private:
  UidSlot slot_;
  std::unique_ptr<Cgroup> cgroup_;
  std::unique_ptr<EgressLease> egress_;  // network proxy: its socket at the proxy
  std::mutex mu_;                        // serialises destroy()
  bool destroyed_ = false;
  CallUsage usage_;  // the cgroup's counters after the last call
};

Status NativeSandbox::start(const ChildConfig& base, const MountPlan& plan,
                            std::vector<StepTiming> host_steps) {
  timings_ = std::move(host_steps);
  StepTimer timer(&timings_);
  int sync[2], proto[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sync) != 0) {
    return setup_error("socketpair", sys_error("sync"));
  }
  UniqueFd sync_parent(sync[0]), sync_child(sync[1]);
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, proto) != 0) {
    return setup_error("socketpair", sys_error("protocol"));
  }
  UniqueFd proto_parent(proto[0]), proto_child(proto[1]);

  ChildConfig config = base;
  config.plan = &plan;
  config.sync_fd = sync_child.get();
  config.proto_fd = proto_child.get();
  config.hostname = spec_.id;
  config.own_network = spec_.network != "host";
  native::WorkspaceTree workspace;
  if (!spec_.workspace_dir.empty()) {
    const uid_t sandbox_user = slot_.host_base() + kSandboxUid;
    auto tree = timer.run("prepare workspace", [&] {
      return make_workspace_tree(spec_.workspace_dir, sandbox_user, sandbox_user);
    });
    if (!tree) return setup_error("prepare workspace", tree.error());
    if (!tree->idmapped) {
      spdlog::warn("{}: {} cannot be idmapped; files there keep their host owners", spec_.id,
                   spec_.workspace_dir);
    }
    workspace = std::move(*tree);
    config.workspace_tree_fd = workspace.fd.get();
  }
  std::vector<UniqueFd> join_fds;
  const auto attach_files = cgroup_->self_attach_files();
  if (attach_files.size() > std::size(config.join_cgroup_fds)) {
    return setup_error("join cgroup", make_error("cgroup", "too many hierarchies"));
  }
  for (size_t i = 0; i < attach_files.size(); ++i) {
    join_fds.emplace_back(::open(attach_files[i].c_str(), O_WRONLY | O_CLOEXEC));
    if (!join_fds.back()) return setup_error("join cgroup", sys_error("open " + attach_files[i]));
    config.join_cgroup_fds[i] = join_fds.back().get();
  }

  int pidfd = -1;
  ChildStack
      stack;  // after everything the child reads: destroyed first, once it has exec'd or died
  const bool share_memory =
      kCloneVmAllowed && cgroup_->clone_into_fd() < 0 && stack.top() != nullptr;
  const pid_t pid = timer.run("clone", [&] {
    return share_memory ? clone_sandbox_vm(config.own_network, config, stack.top(), &pidfd)
                        : clone_sandbox(cgroup_->clone_into_fd(), config.own_network, &pidfd);
  });
  if (pid < 0) return setup_error("clone", sys_error("clone"));
  if (pid == 0) run_child(config);  // sandbox side from here; never returns
  adopt_runner_process(pid, UniqueFd(pidfd));
  // Any early return below must not leave a child running on `stack` and
  // `config`: it is killed, and reaped by destroy() later.
  struct KillUnlessExecd {
    NativeSandbox* self;
    bool execd = false;
    ~KillUnlessExecd() {
      if (!execd) self->kill_child_now();
    }
  } guard{this};
  sync_child.reset();
  proto_child.reset();
  join_fds.clear();
  workspace.fd.reset();
  // The sandbox's root is the first host uid of its slot: never host root.
  const std::string map =
      "0 " + std::to_string(slot_.host_base()) + " " + std::to_string(kUidRangeSize) + "\n";
  auto maps = timer.run("write id maps", [&]() -> Status {
    RF_TRY(rf::write_file("/proc/" + std::to_string(pid) + "/uid_map", map));
    return rf::write_file("/proc/" + std::to_string(pid) + "/gid_map", map);
  });
  if (!maps) return setup_error("write id maps", maps.error());
  if (::send(sync_parent.get(), "g", 1, MSG_NOSIGNAL) != 1) {
    return setup_error("wait for parent", sys_error("send"));
  }
  auto setup = wait_for_child_setup(child_step_names(plan), sync_parent.get());
  guard.execd = true;  // EOF on the sync socket: the child exec'd (CLOEXEC) or died
  RF_TRY(setup);

  runner_ = std::make_unique<RunnerClient>(std::move(proto_parent));
  if (auto s = timer.run("handshake", [&] { return runner_->handshake(kSetupTimeout); }); !s) {
    if (auto why = death_reason()) return setup_error("handshake", *why);
    return setup_error("handshake", s.error());
  }
  return ok_status();
}

Status NativeSandbox::wait_for_child_setup(const std::vector<std::string>& names, int sync_fd) {
  ChildReport report{};
  bool have_report = false;
  const auto deadline = Clock::now() + kSetupTimeout;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    pollfd p{sync_fd, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
    if (r == 0)
      return make_error("sandbox setup",
                        "timed out after " + std::to_string(kSetupTimeout.count()) + " ms");
    if (r < 0) {
      if (errno == EINTR) continue;
      return sys_error("sandbox setup: poll");
    }
    ChildReport next{};
    const ssize_t n = ::recv(sync_fd, &next, sizeof next, 0);
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
    return setup_error("child", why ? *why : make_error("sandbox init", "ended without a report"));
  }
  return ok_status();
}

Result<ExecResult> NativeSandbox::exec(const ExecCall& call, OutputSink& sink) {
  const proto::ExecRequest req = make_exec_request(call, spec_, base_environment(call.pty));

  auto status = runner_->exec(req, call.stdin_data, !call.stdin_stream, sink);
  if (!status) {
    // Give the kernel a moment to report why the runner went away.
    for (int i = 0; i < 50 && !death_reason(); ++i) ::usleep(2000);
    if (auto why = death_reason()) return *why;
    return status.take_error();
  }
  ExecResult r = to_exec_result(*status);
  if (auto after = cgroup_->usage()) usage_.fold(*after, r);
  return r;
}

Status NativeSandbox::destroy() {
  std::lock_guard lock(mu_);
  if (destroyed_) return ok_status();
  destroyed_ = true;
  if (runner_) runner_->fail_all(make_error("sandbox", "destroyed"));
  // Killing PID 1 makes the kernel kill every process in its PID namespace.
  end_runner(
      [](int pidfd, pid_t) { ::syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0); });
  Status result;
  if (cgroup_) {
    (void)cgroup_->kill_all();
    result = cgroup_->remove();
    if (result) {
      if (auto j = Janitor::get()) {
        for (const auto& dir : cgroup_->paths()) (*j)->untrack(dir);
      }
    }
  }
  egress_.reset();  // closes its socket and connections at the proxy
  slot_.release();
  return result;
}

Result<std::unique_ptr<Sandbox>> NativeBackend::create(const SandboxSpec& in) {
  SandboxSpec spec = in;
  if (spec.id.empty()) spec.id = generate_sandbox_id();
  RF_TRY(validate_spec(spec));
  std::vector<StepTiming> host_steps;
  StepTimer timer(&host_steps);

  auto slot = timer.run("allocate uid range", [] { return acquire_uid_slot(); });
  if (!slot) return setup_error("allocate uid range", slot.error());
  auto janitor = Janitor::get();
  if (!janitor) return setup_error("start janitor", janitor.error());
  auto cgroup = timer.run("create cgroup", [&]() -> Result<std::unique_ptr<Cgroup>> {
    auto cg = create_cgroup(layout_, options_.cgroup_parent, spec.id);
    if (!cg) return cg;
    for (const auto& dir : (*cg)->paths()) (*janitor)->track(dir);
    CgroupLimits limits{spec.limits.cpus, spec.limits.memory_bytes, spec.limits.pids};
    if (auto s = (*cg)->apply(limits); !s) {
      (void)(*cg)->remove();
      return s.take_error();
    }
    return cg;
  });
  if (!cgroup) return setup_error("create cgroup", cgroup.error());

  HostImageOptions image{"/", options_.runner_path, spec.id, ""};
  std::unique_ptr<EgressLease> egress;
  if (spec.network == "proxy") {
    const uid_t user = slot->host_base() + kSandboxUid;
    auto lease = timer.run("listen at egress proxy", [&] { return egress_.add(spec, user, user); });
    if (!lease) return setup_error("listen at egress proxy", lease.error());
    egress = std::move(*lease);
    image.proxy_socket = egress->socket_path();
    for (const auto& [k, v] : proxy_environment())
      spec.env.emplace(k, v);  // the caller's own values win
  }
  const MountPlan plan =
      timer.run("build mount plan", [&] { return build_host_image_plan(spec, image); });

  static char arg0[] = "ringfence-tool-runner";
  static char arg1[] = "--fd";
  static char arg2[] = "3";
  static char arg3[] = "--egress-bridge";
  static std::string bridge = std::string(kEgressListen) + "=" + kProxySocketInSandbox;
  ChildConfig config;
  config.seccomp = &seccomp_;
  config.uid = kSandboxUid;
  config.gid = kSandboxUid;
  config.cap_last_cap = cap_last_cap_;
  config.rlimit_nofile = spec.limits.nofile;
  config.rlimit_fsize = spec.limits.disk_bytes;
  config.runner_argv = {arg0, arg1, arg2, nullptr};
  if (egress) config.runner_argv = {arg0, arg1, arg2, arg3, bridge.data(), nullptr};
  config.runner_envp = {nullptr};

  auto sandbox = std::make_unique<NativeSandbox>(spec, std::move(*slot), std::move(*cgroup),
                                                 std::move(egress));
  if (auto s = sandbox->start(config, plan, std::move(host_steps)); !s) {
    (void)sandbox->destroy();
    return s.take_error();
  }
  return std::unique_ptr<Sandbox>(std::move(sandbox));
}

}  // namespace

Result<std::string> find_runner_binary() {
  if (const char* env = std::getenv("RINGFENCE_TOOL_RUNNER"); env && *env) return std::string(env);
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  std::vector<std::string> candidates;
  if (n > 0) {
    std::string dir(self, static_cast<size_t>(n));
    dir.resize(dir.rfind('/'));
    candidates.push_back(dir + "/ringfence-tool-runner");
  }
  candidates.push_back("/usr/libexec/ringfence/ringfence-tool-runner");
  for (const auto& c : candidates) {
    if (::access(c.c_str(), X_OK) == 0) return c;
  }
  return make_error("tool runner", "ringfence-tool-runner not found (looked in " + candidates[0] +
                                       "; set RINGFENCE_TOOL_RUNNER)");
}

Result<std::unique_ptr<Backend>> make_native_backend(const NativeOptions& in) {
  NativeOptions options = in;
  if (options.runner_path.empty()) {
    auto path = find_runner_binary();
    if (!path) return path.take_error();
    options.runner_path = *path;
  }
  if (options.runner_path[0] != '/') {
    return make_error("tool runner", "path must be absolute: " + options.runner_path);
  }
  auto layout = detect_cgroup_layout();
  if (!layout) return make_error("native backend: cgroups", layout.error().to_string());
  auto seccomp = build_seccomp_profile("default");
  if (!seccomp) return make_error("native backend: seccomp", seccomp.error().to_string());
  return std::unique_ptr<Backend>(
      std::make_unique<NativeBackend>(std::move(options), std::move(*layout), std::move(*seccomp)));
}

std::vector<HealthCheck> native_doctor(const NativeOptions& options) {
  DoctorInputs in;
  in.cgroup_parent = options.cgroup_parent;
  in.runner_path = options.runner_path;
  if (in.runner_path.empty()) {
    auto found = find_runner_binary();
    in.runner_path = found ? *found : found.error().to_string();
  }
  auto layout = detect_cgroup_layout();
  if (layout)
    in.layout = &*layout;
  else
    in.layout_error = layout.error().to_string();
  auto seccomp = build_seccomp_profile("default");
  if (seccomp) in.seccomp = &*seccomp;
  return native_health(in);
}

void register_native_backend() {
  register_backend("native", []() -> Result<std::unique_ptr<Backend>> {
    NativeOptions options;
    // The egress proxy's resolver override, for tests (docs/network.md).
    if (const char* text = std::getenv("RINGFENCE_PROXY_RESOLVE"); text && *text) {
      auto resolve = parse_resolve_override(text);
      if (!resolve) return make_error("RINGFENCE_PROXY_RESOLVE", resolve.error().to_string());
      options.egress.resolve = std::move(*resolve);
    }
    return make_native_backend(options);
  });
}

}  // namespace rf::native
