// `ringfence sandbox exec | shell`; doctor, list and reap are in cmd_sandbox_admin.cc.
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/stdio_forwarder.h"
#include "cli/terminal.h"
#include "core/io.h"
#include "core/units.h"
#include "local/local_backend.h"
#include "native/native_backend.h"
#include "sandbox/result_json.h"
#include "sandbox/sandbox.h"
#include "worker/backends.h"

namespace rf::cli {
namespace {

struct SandboxFlags {
  std::string backend = "native";
  std::string docker_host;
  std::string image = "host";
  std::string workspace;
  std::vector<std::string> env;
  std::string cpu = "1";
  std::string mem = "512m";
  std::string pids = "256";
  std::string disk = "1g";
  std::string timeout = "30s";
  std::string output_limit = "16m";
  std::string network = "none";
  std::vector<std::string> allow;
  std::vector<std::string> proxy_resolve;
  std::string egress_connections = "64";
  std::string egress_bytes = "0";
  bool json = false;
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
  cmd->add_option("--cpu", f->cpu, "CPUs (cpu time per wall second)")->default_val("1");
  cmd->add_option("--mem", f->mem, "Memory limit")->default_val("512m");
  cmd->add_option("--pids", f->pids, "Process limit")->default_val("256");
  cmd->add_option("--disk", f->disk, "Size of /workspace and of /tmp")->default_val("1g");
  cmd->add_option("--timeout", f->timeout, "Per-call timeout")->default_val("30s");
  cmd->add_option("--output-limit", f->output_limit, "stdout+stderr cap")->default_val("16m");
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
  cmd->add_option("--proxy-resolve", f->proxy_resolve,
                  "For tests: the proxy resolves NAME to ADDR without DNS (NAME=ADDR, repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--egress-connections", f->egress_connections,
                  "With --network proxy: connections open at once")
      ->default_val("64");
  cmd->add_option("--egress-bytes", f->egress_bytes,
                  "With --network proxy: bytes the sandbox may send (0: no cap)")
      ->default_val("0");
  cmd->add_flag("--json", f->json, "Print a JSON result object at the end");
}

Error flag_error(const std::string& flag, const Error& e) {
  return make_error(flag, e.message.empty() ? e.to_string() : e.where + ": " + e.message);
}

// Turns flags into a spec; every error names the flag.
Result<SandboxSpec> to_spec(const SandboxFlags& f) {
  SandboxSpec s;
  s.backend = f.backend;
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
  auto cpus = parse_decimal(f.cpu);
  if (!cpus) return flag_error("--cpu", cpus.error());
  s.limits.cpus = *cpus;
  auto mem = parse_size(f.mem);
  if (!mem) return flag_error("--mem", mem.error());
  s.limits.memory_bytes = *mem;
  auto pids = parse_decimal(f.pids);
  if (!pids || *pids != static_cast<double>(static_cast<uint64_t>(*pids))) {
    return make_error("--pids \"" + f.pids + "\"", "expected a whole number");
  }
  s.limits.pids = static_cast<uint64_t>(*pids);
  auto disk = parse_size(f.disk);
  if (!disk) return flag_error("--disk", disk.error());
  s.limits.disk_bytes = *disk;
  auto timeout = parse_duration(f.timeout);
  if (!timeout) return flag_error("--timeout", timeout.error());
  s.limits.timeout = *timeout;
  auto out = parse_size(f.output_limit);
  if (!out) return flag_error("--output-limit", out.error());
  s.limits.output_bytes = *out;
  s.network = f.network;
  s.allow = f.allow;
  auto conns = parse_decimal(f.egress_connections);
  if (!conns || *conns != static_cast<double>(static_cast<uint64_t>(*conns))) {
    return make_error("--egress-connections \"" + f.egress_connections + "\"",
                      "expected a whole number");
  }
  s.limits.egress_connections = static_cast<uint64_t>(*conns);
  auto egress_bytes = parse_size(f.egress_bytes);
  if (!egress_bytes) return flag_error("--egress-bytes", egress_bytes.error());
  s.limits.egress_bytes = *egress_bytes;
  if (auto v = validate_spec(s); !v) {
    static const std::map<std::string, std::string> kFlagOf = {
        {"limits.cpus", "--cpu"},
        {"limits.memory", "--mem"},
        {"limits.pids", "--pids"},
        {"limits.disk", "--disk"},
        {"limits.timeout", "--timeout"},
        {"limits.output", "--output-limit"},
        {"network", "--network"},
        {"image", "--image"},
        {"workspace", "--workspace"},
        {"env", "--env"},
        {"backend", "--backend"},
        {"allow", "--allow"},
        {"limits.egress_connections", "--egress-connections"}};
    Error e = v.error();
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
  std::string detail;
  if (r.limit == "timeout") detail = "timed out after " + format_duration(spec.limits.timeout);
  if (r.limit == "memory")
    detail = "killed: memory limit " + format_size(spec.limits.memory_bytes) + " reached";
  if (r.limit == "pids") detail = "process limit " + std::to_string(spec.limits.pids) + " reached";
  if (r.limit == "output") detail = "output truncated at " + format_size(spec.limits.output_bytes);
  if (r.limit == "disk") detail = "disk limit " + format_size(spec.limits.disk_bytes) + " reached";
  std::fprintf(stderr, "ringfence: %s (limit: %s)\n", detail.c_str(), r.limit.c_str());
}

int run(const SandboxFlags& flags, bool shell) {
  auto spec = to_spec(flags);
  if (!spec) {
    std::fprintf(stderr, "ringfence: %s\n", spec.error().to_string().c_str());
    return kExitUsage;
  }
  // The forwarder takes the signals through a signalfd: blocked before any thread starts.
  StdioForwarder::block_signals();

  if (!flags.proxy_resolve.empty()) {
    std::string joined;
    for (const auto& r : flags.proxy_resolve) joined += (joined.empty() ? "" : ",") + r;
    if (auto parsed = native::parse_resolve_override(joined); !parsed) {
      std::fprintf(stderr, "ringfence: --proxy-resolve: %s\n", parsed.error().to_string().c_str());
      return kExitUsage;
    }
    ::setenv("RINGFENCE_PROXY_RESOLVE", joined.c_str(),
             1);  // the proxy's own config (native/egress.h)
  }
  worker::register_backends({flags.docker_host});
  auto backend = make_backend(spec->backend);
  if (!backend) {
    std::fprintf(stderr, "ringfence: %s\n", backend.error().to_string().c_str());
    return kExitRuntime;
  }
  auto sandbox = (*backend)->create(*spec);
  if (!sandbox) {
    std::fprintf(stderr, "ringfence: %s\n", sandbox.error().to_string().c_str());
    return kExitRuntime;
  }
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
    (void)(*sandbox)->destroy();
    return kExitRuntime;
  }

  std::optional<RawTerminal> raw;
  if (shell) raw.emplace(STDIN_FILENO);
  auto result = (*sandbox)->exec(call, **forwarder);
  (*forwarder)->stop();
  raw.reset();
  if (!result) {
    std::fprintf(stderr, "ringfence: %s\n", result.error().to_string().c_str());
    (void)(*sandbox)->destroy();
    return kExitRuntime;
  }
  if (result->exec_errno != 0) std::fprintf(stderr, "ringfence: %s\n", result->error.c_str());
  report_limit(*spec, *result);
  if (flags.json) (void)write_all(STDOUT_FILENO, result_json(**sandbox, *result));
  if (auto s = (*sandbox)->destroy(); !s) {
    std::fprintf(stderr, "ringfence: destroy: %s\n", s.error().to_string().c_str());
  }
  return result->exit_code;
}

}  // namespace

std::vector<std::string> command_words(const std::vector<std::string>& positional,
                                       const CommandResult& result) {
  std::vector<std::string> words = positional;
  words.insert(words.end(), result.command_tail.begin(), result.command_tail.end());
  return words;
}

void add_sandbox_commands(CLI::App& app, CommandResult* result) {
  auto* sandbox = app.add_subcommand("sandbox", "Run commands in sandboxes");
  sandbox->require_subcommand(1);

  auto exec_flags = std::make_shared<SandboxFlags>();
  auto* exec = sandbox->add_subcommand(
      "exec", "Run one command in a fresh sandbox: exec [options] -- CMD [ARG...]");
  add_sandbox_flags(exec, exec_flags.get());
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
  auto* shell =
      sandbox->add_subcommand("shell", "An interactive shell in a fresh sandbox, on its own pty");
  add_sandbox_flags(shell, shell_flags.get());
  shell->callback([shell_flags, result] { result->exit_code = run(*shell_flags, /*shell=*/true); });

  add_sandbox_admin_commands(sandbox, result);
  add_sandbox_validate_command(sandbox, result);
}

}  // namespace rf::cli
