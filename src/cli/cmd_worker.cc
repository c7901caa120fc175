// `ringfence worker config [settings flags] [--explain]`: the worker's settings as
// they resolve from the flags, the config file and the defaults.
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "agents/adapter.h"
#include "cli/backends.h"
#include "cli/commands.h"
#include "cli/vault_wiring.h"
#include "cli/worker_flags.h"
#include "core/fd_limit.h"
#include "core/no_core_dumps.h"
#include "core/units.h"
#include "worker/config_file.h"
#include "worker/worker.h"

namespace rf::cli {
namespace {

int run_config(const worker::WorkerFlags& flags, bool explain) {
  auto settings = worker::resolve_worker_settings(flags, worker::home_directory());
  if (!settings) {
    std::fprintf(stderr, "ringfence: %s\n", settings.error().to_string().c_str());
    return kExitUsage;
  }
  if (!explain) {
    std::fputs(worker::settings_to_yaml(*settings).c_str(), stdout);
    return 0;
  }
  for (const std::string& line : settings->explain()) std::printf("%s\n", line.c_str());
  return 0;
}

struct StartFlags {
  int concurrency = 8;
  std::string grace = "10s";
  std::string lease = "10s";
  std::string worker_id;
  int max_workflow_runs = 4;
  std::string artifact_root;
  std::string agents_dir;
  std::string door_listen;
};

// Runs until SIGTERM or SIGINT, then drains (see Worker::stop) and exits 0.
int run_start(const worker::WorkerFlags& flags, const StartFlags& start) {
  // Secret values, the sealing key and VAULT_TOKEN live in this process.
  if (auto s = forbid_core_dumps(); !s)
    std::fprintf(stderr, "ringfence: warning: %s\n", s.error().to_string().c_str());
  // Three fds per live native sandbox (protocol socket, pidfd, uid-slot lock):
  // thousands of sandboxes need the hard limit, and a low one is said at start.
  if (auto limit = raise_fd_limit(); !limit) {
    std::fprintf(stderr, "ringfence: warning: %s\n", limit.error().to_string().c_str());
  } else if (*limit < 8192) {
    std::fprintf(stderr,
                 "ringfence: note: the open-file limit is %llu, enough for about %llu live "
                 "sandboxes; raise the hard limit (ulimit -Hn, systemd LimitNOFILE=) for more\n",
                 static_cast<unsigned long long>(*limit),
                 static_cast<unsigned long long>(*limit > 64 ? (*limit - 64) / 3 : 0));
  }
  auto settings = worker::resolve_worker_settings(flags, worker::home_directory());
  if (!settings) {
    std::fprintf(stderr, "ringfence: %s\n", settings.error().to_string().c_str());
    return kExitUsage;
  }
  auto grace = parse_duration(start.grace);
  if (!grace) {
    std::fprintf(stderr, "ringfence: --grace: %s\n", grace.error().to_string().c_str());
    return kExitUsage;
  }
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // before any thread starts
  auto placement = place_worker(*settings);
  if (!placement) {
    std::fprintf(stderr, "ringfence: %s\n", placement.error().to_string().c_str());
    return 1;
  }
  const std::string backend = placement->backend->name();
  worker::WorkerOptions options;
  options.settings = *settings;
  options.worker_id = start.worker_id;
  options.concurrency = start.concurrency;
  options.grace = *grace;
  auto lease = parse_duration(start.lease);
  if (!lease || lease->count() < 2000) {
    std::fprintf(stderr, "ringfence: --lease %s: %s\n", start.lease.c_str(),
                 lease ? "at least 2s (workers heartbeat once a second)"
                       : lease.error().to_string().c_str());
    return kExitUsage;
  }
  options.lease = *lease;
  options.max_workflow_runs = start.max_workflow_runs;
  options.agents_dir = start.agents_dir.empty() ? agents::default_agents_dir() : start.agents_dir;
  options.door_listen = start.door_listen;
  if (!start.artifact_root.empty()) {
    std::error_code ec;
    const auto root = std::filesystem::canonical(start.artifact_root, ec);
    if (ec || !std::filesystem::is_directory(root)) {
      std::fprintf(stderr, "ringfence: --artifact-root %s: %s\n", start.artifact_root.c_str(),
                   ec ? ec.message().c_str() : "not a directory");
      return kExitUsage;
    }
    options.artifact_root = root.string();
  }
  // Identity-scoped calls read Vault secrets with VAULT_TOKEN (never argv).
  auto vault = make_vault_access();
  if (!vault.ok()) {
    std::fprintf(stderr, "ringfence: worker: %s\n", vault.error().to_string().c_str());
    return kExitUsage;
  }
  options.vault = vault->get();
  auto w = worker::Worker::start(std::move(options), std::move(*placement));
  if (!w) {
    std::fprintf(stderr, "ringfence: worker: %s\n", w.error().to_string().c_str());
    return 1;
  }
  std::printf("worker %s serving: mode %s, backend %s, state %s\n", (*w)->id().c_str(),
              worker::to_string((*w)->mode()).c_str(), backend.c_str(),
              settings->state_dir.value.c_str());
  std::fflush(stdout);
  int sig = 0;
  while (!(*w)->fatal()) {
    if ((*w)->drained()) {
      // `fleet drain`: it held nothing more; a supervisor sees a clean exit.
      std::printf("worker %s drained: exiting\n", (*w)->id().c_str());
      std::fflush(stdout);
      (*w)->stop();
      return 0;
    }
    const timespec tick{0, 200'000'000};
    sig = sigtimedwait(&set, nullptr, &tick);
    if (sig > 0) break;
  }
  if (auto why = (*w)->fatal()) {
    // A process supervisor sees the outage: drain, then exit non-zero.
    std::fprintf(stderr, "ringfence: worker %s: %s\n", (*w)->id().c_str(), why->c_str());
    (*w)->stop();
    return 1;
  }
  std::printf("worker %s stopping (signal %d): draining\n", (*w)->id().c_str(), sig);
  std::fflush(stdout);
  (*w)->stop();
  return 0;
}

}  // namespace

void add_worker_commands(CLI::App* worker, CommandResult* result) {
  worker->require_subcommand(1);
  auto* config = worker->add_subcommand(
      "config",
      "Print the resolved worker settings (as worker.yaml, or with --explain their sources)");
  auto flags = std::make_shared<worker::WorkerFlags>();
  auto explain = std::make_shared<bool>(false);
  add_worker_settings_flags(config, flags.get());
  config->add_flag("--explain", *explain, "Print each setting and where it came from");
  config->callback([flags, explain, result] { result->exit_code = run_config(*flags, *explain); });

  auto* start =
      worker->add_subcommand("start", "Serve tool calls from the store until SIGTERM or SIGINT");
  auto start_flags = std::make_shared<worker::WorkerFlags>();
  auto start_opts = std::make_shared<StartFlags>();
  add_worker_settings_flags(start, start_flags.get());
  start->add_option("--concurrency", start_opts->concurrency, "Calls run at once")
      ->default_val(8)
      ->check(CLI::Range(1, 1024));
  start->add_option("--grace", start_opts->grace, "How long in-flight calls may finish on SIGTERM")
      ->default_val("10s");
  start->add_option("--worker-id", start_opts->worker_id, "Default: <hostname>-<pid>");
  start
      ->add_option("--lease", start_opts->lease,
                   "How long a call outlives this worker's last heartbeat before it is marked "
                   "interrupted (at least 2s)")
      ->default_val("10s");
  start
      ->add_option("--max-workflow-runs", start_opts->max_workflow_runs,
                   "Workflow runs executed at once")
      ->default_val(4)
      ->check(CLI::Range(1, 256));
  start->add_option("--artifact-root", start_opts->artifact_root,
                    "Where workflow artifacts with dest local are copied (confined there)");
  start->add_option("--door-listen", start_opts->door_listen,
                    "HOST:PORT where serve on other hosts reaches this worker's API sandboxes "
                    "(default: a unix socket in the state dir, for serve on this host)");
  start->add_option("--agents-dir", start_opts->agents_dir,
                    "Where agent adapters are (default: the agents/ that ships with ringfence)");
  start->callback([start_flags, start_opts, result] {
    result->exit_code = run_start(*start_flags, *start_opts);
  });
}

}  // namespace rf::cli
