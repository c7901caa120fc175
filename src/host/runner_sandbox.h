// The runner-facing half of a Sandbox, shared by every backend whose sandbox
// is served by the tool runner over the protocol (native, local, docker): the
// protocol calls, exec() itself, and why the sandbox ended once the runner's
// process is gone. A backend adds how its sandbox is made and destroyed, and
// may adjust a call through the hooks below.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <functional>
#include <memory>
#include <mutex>
#include <optional>

#include "core/unique_fd.h"
#include "host/call_usage.h"
#include "host/cgroup.h"
#include "host/egress_hub.h"
#include "host/runner_client.h"
#include "sandbox/sandbox.h"

namespace rf::host {

class RunnerSandbox : public Sandbox {
 public:
  explicit RunnerSandbox(SandboxSpec spec) : spec_(std::move(spec)) {}

  const std::string& id() const override { return spec_.id; }
  const SandboxSpec& spec() const override { return spec_; }
  int init_pid() const override { return pid_; }
  const std::vector<StepTiming>& setup_timings() const override { return timings_; }
  std::string runner_version() const override {
    return runner_ ? runner_->runner_version() : std::string();
  }

  // Final: every backend runs a call the same way; the hooks below differ.
  Result<ExecResult> exec(const ExecCall& call, OutputSink& sink) final;
  // Sent here and now (RunnerClient::start_exec).
  std::unique_ptr<StartedCall> start_exec(const ExecCall& call, OutputSink& sink) final;
  Status write_stdin(uint32_t id, std::string_view data) override;
  Status close_stdin(uint32_t id) override;
  Status send_signal(uint32_t id, int sig) override;
  Status resize(uint32_t id, int rows, int cols) override;
  Result<std::string> read_file(const std::string& path) override;
  Status write_file(const std::string& path, std::string_view data, uint32_t mode) override;
  Result<std::vector<proto::FileInfo>> list_dir(const std::string& path) override;
  Result<proto::FileInfo> stat(const std::string& path) override;
  Status make_dir(const std::string& path, bool parents) override;
  Status remove(const std::string& path, bool recursive) override;
  Status move(const std::string& from, const std::string& to) override;
  Result<std::string> watch(
      const std::string& path, bool recursive, const std::function<void(uint32_t)>& on_watching,
      const std::function<void(std::vector<proto::FileEvent>&&)>& on_events) override;
  Status unwatch(uint32_t id) override;
  Status port_exchange(int port, std::string_view request,
                       const std::function<void(std::string_view)>& on_data, size_t max,
                       const std::function<void(uint32_t)>& on_open) override;
  Status port_input(uint32_t id, std::string_view bytes) override;
  Status port_close(uint32_t id) override;
  Status set_env(const std::map<std::string, std::string>& vars) override;
  Status unset_env(const std::vector<std::string>& names) override;
  Result<proto::ProbeResult> probe() override;
  StartProbe take_start_probe() override;
  std::map<std::string, std::string> cgroup_limit_files() const override {
    const Cgroup* c = usage_cgroup();
    return c != nullptr ? c->limit_files() : std::map<std::string, std::string>{};
  }
  bool takes_credential_requests() const override { return takes_credentials_; }
  void set_credential_handler(std::function<void(const proto::CredRequest&)> handler) override;
  void set_credential_withdrawn_handler(
      std::function<void(const proto::CredWithdrawn&)> handler) override;
  Status answer_credential(const proto::CredAnswer& answer, std::string_view value) override;
  Status bind_edge_credentials(std::vector<net::EdgeCredential> creds,
                               std::function<void(const net::EdgeEvent&)> on_event) override;

 protected:
  // Runs `fn` with the sandbox's place at the egress proxy, if it has one and
  // is not destroyed (under the backend's own lock).
  virtual Status with_egress(const std::function<Status(EgressLease&)>& /*fn*/) {
    return make_error("edge credentials", "this sandbox has no egress proxy");
  }
  // The request for `call`: by default the spec's limits and the base
  // environment, cwd as given. The local backend maps cwd into its scratch dir.
  virtual Result<proto::ExecRequest> exec_request(const ExecCall& call);
  // Why the sandbox ended, asked when a call's connection to the runner broke.
  // By default the runner's process, given the kernel a moment to report it.
  virtual std::optional<Error> ended_reason();
  // A call's result as exec() returns it: why the sandbox ended when the
  // runner went away, and what `watch` (started before the call was sent;
  // empty: no cgroup to read) saw folded in.
  Result<ExecResult> finished(Result<proto::ExitStatus> status, CallWatch watch);
  // The cgroup whose counters say how a call ended (OOM kill, pids limit, peak
  // memory); null when the backend cannot read one.
  virtual const Cgroup* usage_cgroup() const { return nullptr; }

  // With spec.probe_at_start: keeps the frames of the self-probe the runner
  // starts with the sandbox (start_probe_args, with the same `inside_only`),
  // from runner_'s making on. Before the handshake.
  void expect_start_probe(bool inside_only);

  // The runner's process (host pid and pidfd), once it exists.
  void adopt_runner_process(pid_t pid, UniqueFd pidfd);
  // "sandbox ended: tool runner (pid N) killed by signal 9 (Killed)" once the
  // runner's process is gone; it stays a zombie (WNOWAIT) until end_runner()
  // reaps it, so its pid cannot name anyone else meanwhile.
  std::optional<Error> death_reason();
  // A failed protocol call says why the sandbox ended, if it did.
  template <class T>
  T checked(T result) {
    if (!result.ok()) {
      if (auto why = death_reason()) return *why;
    }
    return result;
  }
  // Calls `stop(pidfd, pid)` to end the runner, then reaps it. Idempotent.
  void end_runner(const std::function<void(int pidfd, pid_t pid)>& stop);

  SandboxSpec spec_;
  std::unique_ptr<RunnerClient> runner_;
  bool takes_credentials_ = false;  // the backend started the runner with --cred-socket
  std::vector<StepTiming> timings_;

 private:
  CallUsage usage_;  // the cgroup's event counters after the last call
  std::unique_ptr<KeptOutput> start_probe_output_;
  std::shared_ptr<RunnerClient::StartedExec> start_probe_;  // until taken
  bool start_probe_inside_only_ = false;
  std::mutex start_probe_mu_;
  pid_t pid_ = 0;
  std::mutex runner_mu_;  // guards pidfd_ and exit_info_: exec threads ask why the runner died
  UniqueFd pidfd_;
  std::optional<siginfo_t> exit_info_;
};

}  // namespace rf::host
