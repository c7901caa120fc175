#include "local/local_backend.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <optional>

#include "core/log.h"
#include "host/exec_request.h"
#include "host/runner_binary.h"
#include "host/runner_client.h"
#include "host/runner_exit.h"
#include "host/runner_sandbox.h"
#include "host/setup_step.h"
#include "local/doctor.h"
#include "local/inventory.h"
#include "local/owner_marker.h"
#include "local/runner_spawn.h"
#include "local/sandbox_paths.h"
#include "local/scratch_dir.h"

namespace rf::local {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::chrono::milliseconds kHandshakeTimeout{10'000};
// After SHUTDOWN the runner ends every call: it waits up to 2 s for their
// supervisors and 1 s to flush. Past this grace it is killed.
constexpr std::chrono::milliseconds kShutdownGrace{3'500};

Status check_local_spec(const SandboxSpec& spec) {
  if (spec.backend != BackendKind::kLocal) {
    return make_error("backend", "the spec asks for \"" + std::string(to_string(spec.backend)) +
                                     "\"; the local backend makes only \"local\" sandboxes");
  }
  if (!spec.workspace_dir.empty()) {
    return make_error("workspace",
                      "not supported by the local backend (its /workspace is the "
                      "sandbox's scratch directory)");
  }
  return ok_status();
}

// setup_error keeps the message and errno; the path a scratch error names goes in the message.
Error scratch_setup_error(const Error& e) {
  const std::string what = e.message.empty() ? e.where : e.where + ": " + e.message;
  return host::setup_error("create scratch dir", Error{"", what, e.sys_errno});
}

// Waits until `pidfd` is readable (the process ended) or `limit` passes.
void wait_for_exit(int pidfd, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    pollfd p{pidfd, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
    if (r >= 0 || errno != EINTR) return;
  }
}

void warn_once(const std::string& runner_path) {
  static std::once_flag once;
  std::call_once(once, [&] {
    spdlog::warn(
        "local backend: tool calls run as uid {} in a scratch directory, with the host's "
        "network and no memory, pids or cpu limits (sandbox mode none; runner {})",
        ::geteuid(), runner_path);
  });
}

class LocalSandbox : public host::RunnerSandbox {
 public:
  LocalSandbox(SandboxSpec spec, std::string scratch_root)
      : host::RunnerSandbox(std::move(spec)),
        root_(std::move(scratch_root)),
        scratch_(root_ + "/" + spec_.id) {}
  ~LocalSandbox() override { warn_unless_ok(destroy(), "destroying " + spec_.id); }

  Status destroy() override;

  // Set-up, called once by the backend. On error the backend destroys it.
  Status start(const std::string& runner_path);

 private:
  // cwd and the environment are the scratch directory's.
  Result<proto::ExecRequest> exec_request(const ExecCall& call) override;
  // SHUTDOWN, a grace period, then SIGKILL to the runner and its process group; reaps it.
  void stop_runner();

  std::string root_;     // the scratch root, canonical
  std::string scratch_;  // <root>/<id>: the sandbox's "/"
  std::mutex mu_;        // serialises destroy()
  bool stopped_ = false;
  bool scratch_created_ = false;  // ours to remove (a directory that existed is not)
  bool marker_written_ = false;   // <root>/<id>.owner, removed after the scratch directory
};

Status LocalSandbox::start(const std::string& runner_path) {
  host::StepTimer timer(&timings_);
  auto made = timer.run("create scratch dir", [&] { return create_scratch_dir(root_, spec_.id); });
  if (!made) return scratch_setup_error(made.error());
  scratch_created_ = true;
  const RunnerLaunch launch{runner_path, scratch_, scratch_ + "/workspace", spec_.limits.nofile};
  auto spawned = timer.run("start tool runner", [&] { return spawn_runner(launch); });
  if (!spawned) return host::setup_error(spawned.error().where, spawned.error());
  const pid_t runner_pid = spawned->pid;
  adopt_runner_process(spawned->pid, std::move(spawned->pidfd));
  // Lets `sandbox list` and `sandbox reap` find it, and tell whether we live.
  auto recorded = timer.run("record owner", [&] {
    return write_owner_marker(root_, spec_.id, marker_for_runner(runner_pid));
  });
  if (!recorded) return host::setup_error("record owner", recorded.error());
  marker_written_ = true;
  runner_ = std::make_unique<host::RunnerClient>(std::move(spawned->host_fd));
  if (auto s = timer.run("handshake", [&] { return runner_->handshake(kHandshakeTimeout); }); !s) {
    if (auto why = death_reason()) return host::setup_error("handshake", *why);
    return host::setup_error("handshake", s.error());
  }
  return ok_status();
}

Result<proto::ExecRequest> LocalSandbox::exec_request(const ExecCall& call) {
  auto cwd = host_cwd(scratch_, call.cwd);
  if (!cwd) return cwd.take_error();
  proto::ExecRequest req =
      host::make_exec_request(call, spec_, local_environment(scratch_, call.pty));
  req.cwd = *cwd;
  return req;
}

void LocalSandbox::stop_runner() {
  if (runner_) {
    (void)runner_->shutdown();
    runner_->fail_all(make_error("sandbox", "destroyed"));
  }
  end_runner([](int pidfd, pid_t pid) {
    wait_for_exit(pidfd, kShutdownGrace);
    // The runner first, so its supervisors see their control pipes close and kill
    // their calls; then whatever is left in its group. Until end_runner reaps it,
    // its pid (the group's id) cannot name anyone else.
    ::kill(pid, SIGKILL);
    wait_for_exit(pidfd, kShutdownGrace);
    ::kill(-pid, SIGKILL);
  });
}

Status LocalSandbox::destroy() {
  std::lock_guard lock(mu_);
  if (!stopped_) {
    stopped_ = true;
    stop_runner();
  }
  // A removal that failed is tried again by the next destroy(). The marker
  // goes last: while the directory is there, it says whose it is.
  if (scratch_created_) {
    RF_TRY(remove_scratch_dir(root_, spec_.id));
    scratch_created_ = false;
  }
  if (marker_written_) {
    RF_TRY(remove_owner_marker(root_, spec_.id));
    marker_written_ = false;
  }
  return ok_status();
}

class LocalBackend : public Backend {
 public:
  explicit LocalBackend(LocalOptions options) : options_(std::move(options)) {}

  BackendKind kind() const override { return BackendKind::kLocal; }
  Result<std::unique_ptr<Sandbox>> create(const SandboxSpec& spec) override;
  Result<std::vector<SandboxInfo>> list() override {
    return list_local_sandboxes(options_.scratch_root);
  }
  Result<std::vector<SandboxInfo>> reap(std::chrono::seconds older_than, bool dry_run) override {
    return reap_local_sandboxes(options_.scratch_root, older_than, dry_run);
  }
  std::vector<HealthCheck> health() override { return local_doctor(options_); }

 private:
  LocalOptions options_;  // both paths resolved
};

Result<std::unique_ptr<Sandbox>> LocalBackend::create(const SandboxSpec& in) {
  SandboxSpec spec = in;
  if (spec.id.empty()) spec.id = generate_sandbox_id();
  RF_TRY(validate_spec(spec));
  RF_TRY(check_local_spec(spec));
  warn_once(options_.runner_path);
  auto sandbox = std::make_unique<LocalSandbox>(spec, options_.scratch_root);
  if (auto s = sandbox->start(options_.runner_path); !s) {
    warn_unless_ok(sandbox->destroy(), spec.id + ": cleaning up after a failed set-up");
    return s.take_error();
  }
  return std::unique_ptr<Sandbox>(std::move(sandbox));
}

}  // namespace

Result<std::unique_ptr<Backend>> make_local_backend(const LocalOptions& in) {
  LocalOptions options = in;
  auto runner = host::resolve_runner_binary(options.runner_path);
  if (!runner) return runner.take_error();
  options.runner_path = *runner;
  if (::access(options.runner_path.c_str(), X_OK) != 0) {
    return sys_error("tool runner " + options.runner_path);
  }
  auto root = prepare_scratch_root(options.scratch_root.empty() ? default_scratch_root()
                                                                : options.scratch_root);
  if (!root) return make_error("local backend", root.error().to_string());
  options.scratch_root = *root;
  return std::unique_ptr<Backend>(std::make_unique<LocalBackend>(std::move(options)));
}

void register_local_backend() {
  register_backend(
      BackendKind::kLocal, [] { return make_local_backend(LocalOptions{}); },
      [] { return local_doctor(LocalOptions{}); });
}

}  // namespace rf::local
