// `ringfence sandbox exec | shell`; doctor, list and reap are in cmd_sandbox_admin.cc.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <future>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/backends.h"
#include "cli/client_store.h"
#include "cli/commands.h"
#include "cli/process_via_api.h"
#include "cli/proof_session.h"
#include "cli/stdio_forwarder.h"
#include "cli/terminal.h"
#include "core/io.h"
#include "core/units.h"
#include "net/resolve_override.h"
#include "policy/host_capacity.h"
#include "proof/output_digest.h"
#include "sandbox/result_json.h"
#include "sandbox/sandbox.h"

namespace rf::cli {
namespace {

struct SandboxFlags {
  std::string backend = "native";
  std::string docker_host;
  std::string image = "host";
  std::string workspace;
  std::vector<std::string> env;
  std::map<std::string, std::string, std::less<>> limits;  // text by limit name (sandbox/limits.h)
  std::string network = "none";
  std::vector<std::string> allow;
  std::vector<std::string> proxy_resolve;
  bool json = false;
  std::string receipt;    // write a signed receipt of the call here (exec only)
  std::string state_dir;  // where the signing key and the audit log live
  std::vector<std::string> command;
};

void add_sandbox_flags(CLI::App* cmd, SandboxFlags* f) {
  cmd->add_option("--backend", f->backend,
                  "native (every bound on), docker or remotedocker (a Docker daemon's "
                  "containers, same bounds), or local (no isolation: development only)")
      ->default_val("native");
  cmd->add_option("--docker-host", f->docker_host,
                  "The Docker daemon: unix:///path, tcp://HOST:PORT or ssh://USER@HOST "
                  "(default $DOCKER_HOST, else unix:///var/run/docker.sock)");
  cmd->add_option("--image", f->image,
                  "Image: host (the host's /usr, read-only; native) or a docker image")
      ->default_val("host");
  cmd->add_option("--workspace", f->workspace,
                  "Host directory to bind at /workspace (default: a tmpfs)");
  // One value per occurrence, so that "--env A=1 -- cmd -x" leaves "--" to end the options.
  cmd->add_option("--env", f->env, "K=V added to the environment (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  // One flag per limit, from the one table the worker and the spec JSON use too.
  const Limits defaults;
  for (const LimitField& l : limit_fields()) {
    std::string& text = f->limits[std::string(l.name)];
    text = l.get(defaults);
    cmd->add_option(l.exec_flag(), text, std::string(l.help))->default_val(text);
  }
  cmd->add_option(
         "--network", f->network,
         "Network policy: none (loopback only), proxy (egress to --allow rules only, through the "
         "host's proxy), host (the host's network: trusted steps only)")
      ->default_val("none");
  cmd->add_option("--allow", f->allow,
                  "With --network proxy: a host the sandbox may reach, e.g. api.example.com, "
                  "'*.pkg.example.org:443', 10.0.0.5:8080 (repeatable; docs/network.md)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option(
         "--proxy-resolve", f->proxy_resolve,
         "With --network proxy: the proxy maps NAME to ADDR without DNS; ADDR still passes the "
         "policy (NAME=ADDR, repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_flag("--json", f->json, "Print a JSON result object at the end");
  cmd->add_option("--state-dir", f->state_dir,
                  "The state dir: the signing key and the audit log of --receipt (default "
                  "~/.ringfence/state)");
}

// Turns flags into a spec; every error names the flag.
Result<SandboxSpec> to_spec(const SandboxFlags& f) {
  SandboxSpec s;
  auto backend = parse_backend_kind(f.backend);
  if (!backend) return make_error("--backend", backend.error().message);
  s.backend = *backend;
  s.image = f.image;
  if (!f.workspace.empty()) {
    char buf[PATH_MAX];
    if (::realpath(f.workspace.c_str(), buf) == nullptr)
      return sys_error("--workspace " + f.workspace);
    s.workspace_dir = buf;
  }
  for (const auto& kv : f.env) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      return make_error("--env \"" + kv + "\"", "expected K=V");
    s.env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const LimitField& l : limit_fields()) {
    const auto it = f.limits.find(l.name);
    if (it == f.limits.end()) continue;
    if (auto set = l.set(s.limits, it->second); !set) {
      return make_error(l.exec_flag(), set.error().message);
    }
  }
  // Nothing above what this host has, even for its operator.
  if (auto fits = policy::check_host_capacity(s.limits); !fits) {
    const LimitField* l = limit_of_spec_error(fits.error());
    return make_error(l ? l->exec_flag() : fits.error().where, fits.error().message);
  }
  auto network = parse_network_policy(f.network);
  if (!network) return make_error("--network", network.error().message);
  s.network = *network;
  s.allow = f.allow;
  if (auto v = validate_spec(s); !v) {
    Error e = v.error();
    if (const LimitField* l = limit_of_spec_error(e)) return make_error(l->exec_flag(), e.message);
    static const std::map<std::string, std::string> kFlagOf = {
        {"network", "--network"}, {"image", "--image"},     {"workspace", "--workspace"},
        {"env", "--env"},         {"backend", "--backend"}, {"allow", "--allow"}};
    for (const auto& [field, flag] : kFlagOf) {
      if (e.where.rfind(field, 0) == 0) e.where = flag + e.where.substr(field.size());
    }
    return e;
  }
  return s;
}

std::string result_json(const Sandbox& sb, const ExecResult& r) {
  nlohmann::json setup = nlohmann::json::array();
  for (const auto& t : sb.setup_timings()) {
    setup.push_back(
        {{"step", t.step}, {"ms", std::chrono::duration<double, std::milli>(t.duration).count()}});
  }
  nlohmann::json j = exec_result_json(r, sb.id());
  j["setup"] = setup;
  return j.dump() + "\n";
}

void report_limit(const SandboxSpec& spec, const ExecResult& r) {
  if (r.limit.empty()) return;
  const Limits& l = spec.limits;
  std::string detail;
  if (r.limit == "timeout") detail = "timed out after " + format_duration(l.timeout);
  if (r.limit == "memory")
    detail = "killed: memory limit " + format_size(l.memory_bytes) + " reached";
  if (r.limit == "pids") detail = "process limit " + std::to_string(l.pids) + " reached";
  if (r.limit == "output") detail = "output truncated at " + format_size(l.output_bytes);
  if (r.limit == "disk") detail = "disk limit " + format_size(l.disk_bytes) + " reached";
  std::fprintf(stderr, "ringfence: %s (limit: %s)\n", detail.c_str(), r.limit.c_str());
}

// A sandbox that could not be torn down leaves a trace `sandbox reap` removes: say so.
void report_destroy(const Status& destroyed) {
  if (destroyed) return;
  std::fprintf(stderr,
               "ringfence: destroy: %s (`ringfence sandbox reap --older-than 1h` removes it)\n",
               destroyed.error().to_string().c_str());
}

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int run(const SandboxFlags& flags, bool shell) {
  auto spec = to_spec(flags);
  if (!spec) {
    std::fprintf(stderr, "ringfence: %s\n", spec.error().to_string().c_str());
    return kExitUsage;
  }
  // The forwarder takes the signals through a signalfd: blocked before any thread starts.
  StdioForwarder::block_signals();

  BackendConfig backends{flags.docker_host, {}};
  if (!flags.proxy_resolve.empty()) {
    std::string joined;
    for (const auto& r : flags.proxy_resolve) joined += (joined.empty() ? "" : ",") + r;
    auto parsed = net::parse_resolve_override(joined);
    if (!parsed) {
      std::fprintf(stderr, "ringfence: --proxy-resolve: %s\n", parsed.error().to_string().c_str());
      return kExitUsage;
    }
    backends.proxy_resolve = std::move(*parsed);
  }
  register_backends(backends);
  auto backend = make_backend(spec->backend);
  if (!backend) {
    std::fprintf(stderr, "ringfence: %s\n", backend.error().to_string().c_str());
    return kExitRuntime;
  }
  // The key and the log are opened beside the sandbox's creation (2-4 ms of
  // SQLite and key files, measured) and checked before the command is sent:
  // a receipt that cannot be made still fails before anything runs.
  std::future<Result<std::unique_ptr<ProofSession>>> opening;
  if (!flags.receipt.empty()) {
    if (auto ok = check_receipt_path(flags.receipt); !ok) {
      std::fprintf(stderr, "ringfence: %s\n", ok.error().to_string().c_str());
      return kExitUsage;
    }
    opening = std::async(std::launch::async, [dir = state_dir_or_default(flags.state_dir)] {
      return ProofSession::open(dir);
    });
  }
  // Its self-probe started with it, so the report is ready before the command ends.
  spec->probe_at_start = !flags.receipt.empty();
  auto sandbox = (*backend)->create(*spec);
  if (!sandbox) {
    std::fprintf(stderr, "ringfence: %s\n", sandbox.error().to_string().c_str());
    return kExitRuntime;
  }
  std::unique_ptr<ProofSession> proof;
  if (opening.valid()) {
    auto opened = opening.get();
    if (!opened) {
      std::fprintf(stderr, "ringfence: --receipt: %s (nothing was run)\n",
                   opened.error().to_string().c_str());
      report_destroy((*sandbox)->destroy());
      return kExitRuntime;
    }
    proof = std::move(*opened);
  }
  // The report is made while the command runs, and joined before the sandbox goes.
  if (proof) proof->start_report(**sandbox);
  ExecCall call;
  call.argv = flags.command;
  if (shell) {
    call.argv = {"/bin/bash", "-i"};
    call.pty = true;
    terminal_size(STDIN_FILENO, &call.rows, &call.cols);
  }
  call.stdin_stream = true;
  // Joined before the sandbox goes: stopped below, or destroyed first (declared after it).
  auto forwarder = StdioForwarder::start(**sandbox, call.pty);
  if (!forwarder) {
    std::fprintf(stderr, "ringfence: %s\n", forwarder.error().to_string().c_str());
    report_destroy((*sandbox)->destroy());
    return kExitRuntime;
  }

  std::optional<RawTerminal> raw;
  if (shell) raw.emplace(STDIN_FILENO);
  proof::DigestingSink digests(**forwarder);
  const int64_t started_ms = now_ms();
  auto result = (*sandbox)->exec(call, digests);
  const int64_t ended_ms = now_ms();
  (*forwarder)->stop();
  raw.reset();
  if (!result) {
    std::fprintf(stderr, "ringfence: %s\n", result.error().to_string().c_str());
    if (proof) proof->join();
    report_destroy((*sandbox)->destroy());
    return kExitRuntime;
  }
  std::optional<Status> destroyed;
  if (proof) {
    proof::CallRecord rec =
        proof::finished_call(**sandbox, call.argv, *result, digests, started_ms, ended_ms);
    rec.call = "exec";
    rec.stdin_sha256 = (*forwarder)->stdin_digest().hex();
    rec.stdin_bytes = (*forwarder)->stdin_digest().bytes();
    // Once its report is made the sandbox is no longer needed: it is
    // destroyed (1.8-3 ms here) while the receipt is filed and written.
    proof->join();
    auto destroying = std::async(std::launch::async, [&] { return (*sandbox)->destroy(); });
    auto bundle = proof->receipt(std::move(rec));
    Status written = bundle ? write_receipt_file(flags.receipt, *bundle) : Status(bundle.error());
    destroyed = destroying.get();
    if (!written) {
      std::fprintf(stderr, "ringfence: receipt: %s\n", written.error().to_string().c_str());
      report_destroy(*destroyed);
      return kExitRuntime;
    }
  }
  if (result->exec_errno != 0) std::fprintf(stderr, "ringfence: %s\n", result->error.c_str());
  report_limit(*spec, *result);
  if (flags.json) (void)write_all(STDOUT_FILENO, result_json(**sandbox, *result));
  report_destroy(destroyed ? *destroyed : (*sandbox)->destroy());
  return result->exit_code;
}

}  // namespace

std::vector<std::string> command_words(const std::vector<std::string>& positional,
                                       const CommandResult& result) {
  std::vector<std::string> words = positional;
  words.insert(words.end(), result.command_tail.begin(), result.command_tail.end());
  return words;
}

void add_sandbox_commands(CLI::App* sandbox, CommandResult* result) {
  sandbox->require_subcommand(1);

  auto exec_flags = std::make_shared<SandboxFlags>();
  auto* exec = sandbox->add_subcommand(
      "exec", "Run one command in a fresh sandbox: exec [options] -- CMD [ARG...]");
  add_sandbox_flags(exec, exec_flags.get());
  exec->add_option("--receipt", exec_flags->receipt,
                   "Write a signed receipt of the call to FILE: the sandbox's boundary report, "
                   "digests of argv, stdin, stdout and stderr, and their place in the audit log "
                   "(`ringfence audit verify --receipt FILE` checks it; docs/proof.md)");
  exec->add_option("command", exec_flags->command, "The command and its arguments (after --)");
  exec->callback([exec_flags, result] {
    exec_flags->command = command_words(exec_flags->command, *result);
    if (exec_flags->command.empty()) {
      std::fprintf(
          stderr,
          "ringfence: sandbox exec: no command (usage: sandbox exec [options] -- CMD [ARG...])\n");
      result->exit_code = kExitUsage;
      return;
    }
    result->exit_code = run(*exec_flags, /*shell=*/false);
  });

  auto shell_flags = std::make_shared<SandboxFlags>();
  auto attach = std::make_shared<ProcessTarget>();
  auto* shell = sandbox->add_subcommand(
      "shell",
      "An interactive shell in a fresh sandbox, on its own pty; or, with --attach ID --api URL, "
      "in a sandbox of a fleet that already exists");
  add_sandbox_flags(shell, shell_flags.get());
  shell->add_option("--attach", attach->sandbox,
                    "A sandbox that exists on a fleet (through serve: --api, and the project's "
                    "token in RINGFENCE_TOKEN or --token-file)");
  shell->add_option("--api", attach->api, "serve's URL, with --attach (default: $RINGFENCE_API)")
      ->envname("RINGFENCE_API");
  shell->add_option("--token-file", attach->token_file,
                    "With --attach: a file whose first line is the project's token");
  shell->add_option("--pid", attach->pid,
                    "With --attach: a terminal process already running there (default: a new "
                    "login shell)");
  shell->callback([shell_flags, attach, shell, result] {
    if (attach->sandbox.empty()) {
      for (const char* only : {"--pid", "--token-file"}) {
        if (shell->count(only) > 0) {
          result->exit_code = fail(std::string(only) + " goes with --attach ID", kExitUsage);
          return;
        }
      }
      result->exit_code = run(*shell_flags, /*shell=*/true);
      return;
    }
    if (attach->api.empty()) {
      result->exit_code = fail("--attach needs --api URL (or RINGFENCE_API)", kExitUsage);
      return;
    }
    result->exit_code = attach_shell_via_api(*attach);
  });

  add_sandbox_admin_commands(sandbox, result);
  add_sandbox_validate_command(sandbox, result);
  add_sandbox_api_commands(sandbox, result);
}

}  // namespace rf::cli
