#include "host/runner_sandbox.h"

#include <sys/wait.h>
#include <unistd.h>

#include "host/exec_request.h"
#include "host/runner_exit.h"

namespace rf::host {

Result<ExecResult> RunnerSandbox::exec(const ExecCall& call, OutputSink& sink) {
  auto req = exec_request(call);
  if (!req) return req.take_error();
  req->started = sink.wants_started();
  // Before the request goes: the call's peak counts from here.
  CallWatch watch = watch_call(usage_cgroup());
  auto status = runner_->exec(*req, call.stdin_data, !call.stdin_stream, sink);
  return finished(std::move(status), std::move(watch));
}

Result<ExecResult> RunnerSandbox::finished(Result<proto::ExitStatus> status, CallWatch watch) {
  if (!status) {
    if (auto why = ended_reason()) return *why;
    return status.take_error();
  }
  ExecResult r = to_exec_result(*status);
  usage_.fold(watch, r);
  return r;
}

namespace {

class RunnerCall final : public StartedCall {
 public:
  explicit RunnerCall(std::function<Result<ExecResult>()> finish) : finish_(std::move(finish)) {}
  Result<ExecResult> wait() override { return finish_(); }

 private:
  std::function<Result<ExecResult>()> finish_;
};

}  // namespace

std::unique_ptr<StartedCall> RunnerSandbox::start_exec(const ExecCall& call, OutputSink& sink) {
  auto req = exec_request(call);
  if (!req) {
    Error e = req.take_error();
    return std::make_unique<RunnerCall>([e] { return Result<ExecResult>(e); });
  }
  req->started = sink.wants_started();
  CallWatch watch = watch_call(usage_cgroup());  // before the request goes, as in exec()
  std::shared_ptr<RunnerClient::StartedExec> sent =
      runner_->start_exec(*req, call.stdin_data, sink);
  // The watch is let go once read: a caller may keep the call after.
  return std::make_unique<RunnerCall>([this, sent, watch = std::move(watch)]() mutable {
    return finished(runner_->finish_exec(*sent), std::move(watch));
  });
}

void RunnerSandbox::expect_start_probe(bool inside_only) {
  if (!spec_.probe_at_start) return;
  start_probe_inside_only_ = inside_only;
  start_probe_output_ = std::make_unique<KeptOutput>();
  start_probe_ = runner_->expect_exec(proto::kStartProbeCallId, *start_probe_output_);
}

StartProbe RunnerSandbox::take_start_probe() {
  std::lock_guard lock(start_probe_mu_);
  if (!start_probe_) return {};
  StartProbe p;
  p.output = std::move(start_probe_output_);
  p.inside_only = start_probe_inside_only_;
  p.call = std::make_unique<RunnerCall>([this, sent = std::move(start_probe_)] {
    return finished(runner_->finish_exec(*sent), CallWatch{});
  });
  return p;
}

Result<proto::ExecRequest> RunnerSandbox::exec_request(const ExecCall& call) {
  return make_exec_request(call, spec_, base_environment(call.pty));
}

std::optional<Error> RunnerSandbox::ended_reason() {
  // Give the kernel a moment to report why the runner went away.
  for (int i = 0; i < 50 && !death_reason(); ++i) ::usleep(2000);
  return death_reason();
}

Status RunnerSandbox::write_stdin(uint32_t id, std::string_view data) {
  return runner_->write_stdin(id, data);
}
Status RunnerSandbox::close_stdin(uint32_t id) { return runner_->close_stdin(id); }
Status RunnerSandbox::send_signal(uint32_t id, int sig) { return runner_->send_signal(id, sig); }
Status RunnerSandbox::resize(uint32_t id, int rows, int cols) {
  return runner_->resize(id, rows, cols);
}

Result<std::string> RunnerSandbox::read_file(const std::string& path) {
  return checked(runner_->read_file(path));
}

Status RunnerSandbox::write_file(const std::string& path, std::string_view data, uint32_t mode) {
  return checked(runner_->write_file(path, data, mode));
}

Result<std::vector<proto::FileInfo>> RunnerSandbox::list_dir(const std::string& path) {
  return checked(runner_->list_dir(path));
}

Result<proto::FileInfo> RunnerSandbox::stat(const std::string& path) {
  return checked(runner_->stat(path));
}

Status RunnerSandbox::make_dir(const std::string& path, bool parents) {
  return checked(runner_->make_dir(path, parents));
}

Result<std::string> RunnerSandbox::watch(
    const std::string& path, bool recursive, const std::function<void(uint32_t)>& on_watching,
    const std::function<void(std::vector<proto::FileEvent>&&)>& on_events) {
  return checked(runner_->watch(path, recursive, on_watching, on_events));
}

Status RunnerSandbox::unwatch(uint32_t id) { return runner_->unwatch(id); }

Status RunnerSandbox::port_exchange(int port, std::string_view request,
                                    const std::function<void(std::string_view)>& on_data,
                                    size_t max, const std::function<void(uint32_t)>& on_open) {
  return checked(runner_->port_exchange(port, request, on_data, max, on_open));
}

Status RunnerSandbox::port_input(uint32_t id, std::string_view bytes) {
  return checked(runner_->port_input(id, bytes));
}

Status RunnerSandbox::port_close(uint32_t id) { return checked(runner_->port_close(id)); }

Status RunnerSandbox::remove(const std::string& path, bool recursive) {
  return checked(runner_->remove(path, recursive));
}

Status RunnerSandbox::move(const std::string& from, const std::string& to) {
  return checked(runner_->move(from, to));
}

Status RunnerSandbox::set_env(const std::map<std::string, std::string>& vars) {
  proto::SetEnv m;
  m.set = vars;
  return checked(runner_->set_env(m));
}

Status RunnerSandbox::unset_env(const std::vector<std::string>& names) {
  proto::SetEnv m;
  m.unset = names;
  return checked(runner_->set_env(m));
}

Result<proto::ProbeResult> RunnerSandbox::probe() { return checked(runner_->probe()); }

void RunnerSandbox::set_credential_handler(std::function<void(const proto::CredRequest&)> handler) {
  if (runner_) runner_->set_cred_handler(std::move(handler));
}

void RunnerSandbox::set_credential_withdrawn_handler(
    std::function<void(const proto::CredWithdrawn&)> handler) {
  if (runner_) runner_->set_cred_withdrawn_handler(std::move(handler));
}

Status RunnerSandbox::bind_edge_credentials(std::vector<net::EdgeCredential> creds,
                                            std::function<void(const net::EdgeEvent&)> on_event) {
  if (spec_.network != NetworkPolicy::kProxy) {
    return make_error("edge credentials", "sandbox " + spec_.id + " has network " +
                                              std::string(to_string(spec_.network)) +
                                              "; gateway and proxy deliveries need network proxy");
  }
  return with_egress([&](EgressLease& lease) {
    return lease.bind_credentials(std::move(creds), std::move(on_event));
  });
}

Status RunnerSandbox::answer_credential(const proto::CredAnswer& answer, std::string_view value) {
  if (!runner_) return make_error("answer credential", "the sandbox has no tool runner");
  return checked(runner_->answer_credential(answer, value));
}

void RunnerSandbox::adopt_runner_process(pid_t pid, UniqueFd pidfd) {
  std::lock_guard lock(runner_mu_);
  pid_ = pid;
  pidfd_ = std::move(pidfd);
}

std::optional<Error> RunnerSandbox::death_reason() {
  std::lock_guard lock(runner_mu_);
  if (!exit_info_ && pidfd_) {
    siginfo_t si{};
    if (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd_.get()), &si,
                 WEXITED | WNOHANG | WNOWAIT) == 0 &&
        si.si_pid != 0) {
      exit_info_ = si;
    }
  }
  if (!exit_info_) return std::nullopt;
  return runner_ended_error(pid_, *exit_info_);
}

void RunnerSandbox::end_runner(const std::function<void(int pidfd, pid_t pid)>& stop) {
  std::lock_guard lock(runner_mu_);
  if (!pidfd_) return;
  stop(pidfd_.get(), pid_);
  siginfo_t si{};
  while (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd_.get()), &si, WEXITED) !=
             0 &&
         errno == EINTR) {
  }
  if (!exit_info_) exit_info_ = si;
  pidfd_.reset();
}

}  // namespace rf::host
