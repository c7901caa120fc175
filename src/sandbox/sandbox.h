// The backend-independent sandbox API: a Backend creates Sandboxes from a
// SandboxSpec; a Sandbox runs tool calls and moves files until destroyed.
// Results are values; a backend never exits the process.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "net/edge_credential.h"
#include "proto/messages.h"
#include "sandbox/spec.h"

namespace rf {

// How long one named set-up step took, in the order the steps ran.
struct StepTiming {
  std::string step;
  std::chrono::nanoseconds duration{0};
};

// One tool call.
struct ExecCall {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // added to the sandbox's environment
  std::string cwd = "/workspace";
  std::string stdin_data;                // sent before the call starts
  bool stdin_stream = false;             // more stdin follows through write_stdin()
  std::chrono::milliseconds timeout{0};  // 0: the spec's limit
  uint64_t output_limit = 0;             // 0: the spec's limit
  bool pty = false;
  int rows = 24, cols = 80;
  // A background process (sandbox/process_table.h): no call timeout and no
  // output cap; its sandbox's lifetime and its ring buffer bound it.
  bool background = false;
};

// How a call ended. `limit` names the bound that ended it, if any:
// "timeout", "memory", "pids", "output", "disk".
struct ExecResult {
  int exit_code = 0;  // the command's; 128+N when killed by signal N
  int signal = 0;
  bool timed_out = false;
  bool oom_killed = false;
  bool output_truncated = false;
  std::string limit;
  int exec_errno = 0;  // the command could not be started (exit 126/127)
  std::string error;
  std::chrono::microseconds wall{0}, cpu_user{0}, cpu_system{0};
  uint64_t peak_memory_bytes = 0;
};

// Receives a call's output as it streams. Called on the thread running exec().
class OutputSink {
 public:
  virtual ~OutputSink() = default;
  virtual void on_started(uint32_t /*call_id*/, int /*pid*/) {}
  // False if on_started is of no use to it: the sandbox may then not report
  // the start at all (one message and one wake-up of the caller fewer).
  virtual bool wants_started() const { return true; }
  virtual void on_stdout(std::string_view data) = 0;
  virtual void on_stderr(std::string_view data) = 0;
};

// A call sent and not yet waited for (Sandbox::start_exec).
class StartedCall {
 public:
  virtual ~StartedCall() = default;
  // Waits for the call's end; once.
  virtual Result<ExecResult> wait() = 0;
};

// A sink that keeps what a call printed: stdout up to `max_out` bytes, stderr
// up to `max_err` (the rest is dropped). The defaults fit a self-probe: its
// JSON (a few KB) with room, and an error's first lines.
class KeptOutput final : public OutputSink {
 public:
  explicit KeptOutput(size_t max_out = 4u << 20, size_t max_err = 4096)
      : max_out_(max_out), max_err_(max_err) {}
  void on_stdout(std::string_view d) override {
    if (out.size() < max_out_) out.append(d.substr(0, max_out_ - out.size()));
  }
  void on_stderr(std::string_view d) override {
    if (err.size() < max_err_) err.append(d.substr(0, max_err_ - err.size()));
  }
  bool wants_started() const override { return false; }
  std::string out, err;

 private:
  size_t max_out_, max_err_;
};

// What the host read of a sandbox's PID 1 as it started (native, with
// SandboxSpec::probe_at_start; host/pid1_readback.h), once its exec was done
// and while its self-probe ran: so that a report made beside the first call
// reads nothing then, and stops no PID 1 in the middle of it.
struct StartReadback {
  std::map<std::string, uint64_t> ns;         // namespace -> inode
  std::vector<std::string> seccomp_programs;  // each program's bytes, in load order
  std::string seccomp_error;                  // why they could not be read ("": read)
  // /proc/PID/ files as the kernel printed them ("" when unreadable).
  std::string uid_map, gid_map, status, mountinfo, net_dev;
  // proto::kReportedRlimits as prlimit gave them (RLIM_INFINITY: UINT64_MAX).
  struct Rlimit {
    std::string name;
    uint64_t cur = 0, max = 0;
  };
  std::vector<Rlimit> rlimits;
};

// The self-probe a sandbox's runner started with it (SandboxSpec::
// probe_at_start): its call, and its output kept since the start.
struct StartProbe {
  std::unique_ptr<KeptOutput> output;
  std::unique_ptr<StartedCall> call;  // null: none
  // It left out what every process shares with PID 1 (`self-probe
  // --inside-only`): the host reads that from PID 1 (init_pid()).
  bool inside_only = false;
};

class Sandbox {
 public:
  virtual ~Sandbox() = default;
  virtual const std::string& id() const = 0;
  virtual const SandboxSpec& spec() const = 0;
  // Host pid of the sandbox's PID 1 (0 when the backend has none).
  virtual int init_pid() const = 0;
  virtual const std::vector<StepTiming>& setup_timings() const = 0;
  // The tool runner's version, as it said in the handshake ("" when none).
  virtual std::string runner_version() const { return {}; }
  // The content digest of the image it was made from ("sha256:...", docker's
  // image id); "" where the image has none (native's host image).
  virtual std::string image_digest() const { return {}; }

  // Runs one call to its end, streaming output to `sink`. Thread-safe: several
  // calls may run at once. While it runs, other threads may feed its stdin.
  virtual Result<ExecResult> exec(const ExecCall& call, OutputSink& sink) = 0;
  // exec() in two halves: the call is sent before start_exec() returns, so it
  // reaches the sandbox ahead of any call another thread sends after it; its
  // end is waited for through the result. Its stdin is call.stdin_data,
  // whole. `sink` must outlive the wait, and the sandbox the result, waited
  // for or not. This default runs exec() on a thread of its own, in no
  // particular order with other calls (the runner's backends send at once:
  // host/runner_sandbox.h).
  virtual std::unique_ptr<StartedCall> start_exec(const ExecCall& call, OutputSink& sink);
  virtual Status write_stdin(uint32_t call_id, std::string_view data) = 0;
  virtual Status close_stdin(uint32_t call_id) = 0;
  virtual Status send_signal(uint32_t call_id, int sig) = 0;
  virtual Status resize(uint32_t call_id, int rows, int cols) = 0;

  // Paths are the sandbox's own; symlinks resolve inside it.
  virtual Result<std::string> read_file(const std::string& path) = 0;
  virtual Status write_file(const std::string& path, std::string_view data,
                            uint32_t mode = 0644) = 0;
  virtual Result<std::vector<proto::FileInfo>> list_dir(const std::string& path) = 0;
  virtual Result<proto::FileInfo> stat(const std::string& path) = 0;
  // A directory (with missing parents when asked); a file, a symlink (never
  // what it names) or a directory (with everything in it when `recursive`);
  // a rename. Each resolves inside the sandbox as the others do.
  virtual Status make_dir(const std::string& path, bool /*parents*/) {
    return make_error("mkdir " + path, "this sandbox cannot make directories from outside");
  }
  virtual Status remove(const std::string& path, bool /*recursive*/) {
    return make_error("remove " + path, "this sandbox cannot remove files from outside");
  }
  virtual Status move(const std::string& from, const std::string& /*to*/) {
    return make_error("move " + from, "this sandbox cannot move files from outside");
  }
  // A directory watched from inside (issue 41): blocks until the watch
  // ends (unwatch() with the id `on_watching` heard, its directory gone, the
  // sandbox gone), each batch of events to `on_events` on this thread.
  // Returns why it ended; an error naming the path when it never began.
  virtual Result<std::string> watch(
      const std::string& path, bool /*recursive*/,
      const std::function<void(uint32_t)>& /*on_watching*/,
      const std::function<void(std::vector<proto::FileEvent>&&)>& /*on_events*/) {
    return make_error("file_watch " + path, "this sandbox cannot watch directories");
  }
  virtual Status unwatch(uint32_t /*id*/) { return ok_status(); }
  // A request to a port a process listens on inside (issue 41): `request`'s
  // bytes to 127.0.0.1:`port` in the sandbox's own network, through its
  // runner, and the answer's bytes to `on_data` (on this thread) until the
  // connection closes; an error past `max` bytes (0: no bound). `on_open`
  // hears the exchange's id: port_input() and port_close() take it from
  // other threads while this one waits (a WebSocket's other direction).
  static constexpr size_t kPortAnswerMax = 256u << 20;
  virtual Status port_exchange(int port, std::string_view /*request*/,
                               const std::function<void(std::string_view)>& /*on_data*/,
                               size_t /*max*/ = kPortAnswerMax,
                               const std::function<void(uint32_t)>& /*on_open*/ = {}) {
    return make_error("port " + std::to_string(port), "this sandbox cannot be reached on a port");
  }
  virtual Status port_input(uint32_t /*id*/, std::string_view /*bytes*/) {
    return make_error("port", "this sandbox cannot be reached on a port");
  }
  virtual Status port_close(uint32_t /*id*/) { return ok_status(); }
  // Pause and resume (issue 42): every process of the sandbox frozen (no
  // CPU; its memory, processes and open connections kept) or thawed. While
  // paused, nothing inside answers: a caller resumes it first. Idempotent.
  virtual Status pause() { return make_error("pause " + id(), "this sandbox cannot be paused"); }
  virtual Status resume() { return ok_status(); }
  virtual bool paused() const { return false; }
  // Adds variables to every later call's environment (credentials injected late).
  virtual Status set_env(const std::map<std::string, std::string>& vars) = 0;
  // Takes variables set by set_env out again (a JIT grant withdrawn).
  virtual Status unset_env(const std::vector<std::string>& /*names*/) {
    return make_error("unset env", "this sandbox cannot take variables out");
  }
  // What the runner sees from inside: uid, capabilities, seccomp, fds.
  virtual Result<proto::ProbeResult> probe() = 0;
  // The self-probe started with the sandbox (SandboxSpec::probe_at_start),
  // once: later takers get none (then the host runs it as a call).
  virtual StartProbe take_start_probe() { return {}; }
  // What the host read of PID 1 as the sandbox started; null when nothing.
  virtual const StartReadback* start_readback() const { return nullptr; }
  // The sandbox cgroup's limit files as the host reads them back (file ->
  // text), for the boundary report; empty when the host cannot read them.
  virtual std::map<std::string, std::string> cgroup_limit_files() const { return {}; }
  // JIT credentials (`rf-cred get` inside): whether this sandbox can take
  // requests at all (its runner serves the credential socket in a network
  // namespace of its own), then who handles them. `handler` runs on the
  // thread reading the runner and must only queue; the answer goes back
  // through answer_credential(). Without a handler, requests are refused.
  virtual bool takes_credential_requests() const { return false; }
  virtual void set_credential_handler(std::function<void(const proto::CredRequest&)> /*handler*/) {}
  // The asker of a request left before its answer (its process was killed or
  // timed out): told to `handler`, on the same thread and under the same
  // rules as requests. A runner before protocol 0.3 never tells.
  virtual void set_credential_withdrawn_handler(
      std::function<void(const proto::CredWithdrawn&)> /*handler*/) {}
  virtual Status answer_credential(const proto::CredAnswer& /*answer*/,
                                   std::string_view /*value*/) {
    return make_error("answer credential", "this sandbox takes no credential requests");
  }

  // The gateway and proxy deliveries (issue 13; net/edge_credential.h): the
  // credentials the egress proxy swaps in for this sandbox, all of them
  // (replaces; empty takes them away), from the next request on. `on_event`
  // hears what each request did with one, on a proxy thread: it must only
  // queue. Only a sandbox with network proxy can have them.
  virtual Status bind_edge_credentials(std::vector<net::EdgeCredential> /*creds*/,
                                       std::function<void(const net::EdgeEvent&)> /*on_event*/) {
    return make_error("edge credentials",
                      "this sandbox has no egress proxy (gateway and proxy deliveries need "
                      "network proxy)");
  }

  // Ends every process and removes every trace on the host. Idempotent.
  virtual Status destroy() = 0;
};

// A sandbox as the host sees it, found without its owner's help.
struct SandboxInfo {
  std::string id;
  std::string backend;
  int pid = 0;        // host pid of its PID 1; 0 when none is left
  int owner_pid = 0;  // the process that created it; 0 when gone
  std::chrono::seconds age{0};
  std::optional<uint64_t> memory_bytes;  // peak; empty when the backend cannot tell (local)
  bool orphaned() const { return owner_pid == 0; }
};

// One line of `sandbox doctor`: a named check, and what to do when it fails.
struct HealthCheck {
  std::string name;
  bool ok = false;
  std::string detail;    // what was found ("v1: memory, pids, cpu, cpuacct")
  std::string remedy;    // how to fix it, when !ok
  bool required = true;  // a failed required check makes the backend unhealthy
};

// What a backend found out about an image before running it (`sandbox validate`).
struct ImageReport {
  std::string description;            // "digest sha256:...", "the host's /usr and /etc"
  std::optional<bool> has_workspace;  // the image has a /workspace directory, when it can tell
  std::string runner = "injected";    // or the --version line of the image's own runner
  std::string runner_problem;         // the image's own runner cannot serve: why
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual BackendKind kind() const = 0;
  std::string name() const { return std::string(to_string(kind())); }
  // Fails closed: if any bound cannot be set up, nothing runs and the error
  // names the step ("sandbox setup failed at step \"mount /proc\": ...").
  virtual Result<std::unique_ptr<Sandbox>> create(const SandboxSpec& spec) = 0;
  // Every sandbox of this backend alive on the host, whoever created it.
  virtual Result<std::vector<SandboxInfo>> list() { return std::vector<SandboxInfo>{}; }
  // Ends and removes every trace of the sandboxes that are orphaned or older
  // than `older_than`; returns them. With dry_run, only returns them.
  virtual Result<std::vector<SandboxInfo>> reap(std::chrono::seconds /*older_than*/,
                                                bool /*dry_run*/) {
    return std::vector<SandboxInfo>{};
  }
  // Everything this backend needs from the host, checked for real.
  virtual std::vector<HealthCheck> health() { return {}; }
  // Makes `image` ready (pulled, inspected) and says what it is.
  virtual Result<ImageReport> prepare_image(const std::string& image) {
    if (image != "host") {
      return make_error(
          "image", "the " + name() + " backend has only the \"host\" image, not \"" + image + "\"");
    }
    return ImageReport{"the host's /usr and a curated /etc, read-only", std::nullopt, "injected"};
  }
};

// The registry: the CLI (the composition root) registers each backend it
// wires; the worker and the commands make backends from it by kind.
using BackendFactory = std::function<Result<std::unique_ptr<Backend>>()>;
// A backend's `sandbox doctor` checks, which work even when the backend cannot
// be made (and then say why as failed checks).
using DoctorFactory = std::function<std::vector<HealthCheck>()>;
// A later registration of the same kind replaces the earlier one. Without a
// doctor, backend_doctor() makes the backend and asks its health().
void register_backend(BackendKind kind, BackendFactory make, DoctorFactory doctor = {});
Result<std::unique_ptr<Backend>> make_backend(BackendKind kind);
std::vector<HealthCheck> backend_doctor(BackendKind kind);
std::vector<BackendKind> registered_backends();

}  // namespace rf
