#pragma once

#include <CLI/CLI.hpp>
#include <span>
#include <string>
#include <vector>

#include "policy/principal.h"

namespace rf::cli {

// --project's check: a name every door accepts (policy::check_project_name).
inline CLI::Validator project_name() {
  return CLI::Validator(
      [](std::string& v) {
        auto st = policy::check_project_name(v);
        return st ? std::string() : st.error().message;
      },
      "PROJECT");
}

// Exit codes: the command's own; 125 runtime failure; 126/127 not executable /
// not found; 2 usage errors; 124 (`call`) no worker claimed the call within
// --wait-timeout, so it was cancelled; 122 (`call`) the call was never
// queued (the store could not be reached: nothing ran, retrying is safe);
// 123 (`call`) it was queued, and the store was lost while waiting for its
// outcome (it may have run: `run show RUN` says how it ended).
inline constexpr int kExitUsage = 2;
inline constexpr int kExitNeverQueued = 122;
inline constexpr int kExitOutcomeUnknown = 123;
inline constexpr int kExitWaitTimeout = 124;
inline constexpr int kExitRuntime = 125;

// Prints "ringfence: WHAT" to stderr and returns CODE: a command's failure.
int fail(const std::string& what, int code);

struct CommandResult {
  int exit_code = 0;
  // What followed the first "--" on the command line: the command of `sandbox
  // exec` and `call`, verbatim (never parsed as options).
  std::vector<std::string> command_tail;
};

// The command of `sandbox exec` / `call`: its positional words, then what
// followed "--". Empty: the caller reports the usage error.
std::vector<std::string> command_words(const std::vector<std::string>& positional,
                                       const CommandResult& result);

// The top-level commands. main() adds each one by name and description, and
// builds the options and subcommands of the one on the command line only, so a
// command never pays for the others' (issue 10: the CLI's start).
struct TopCommand {
  const char* name;
  const char* description;
  void (*build)(CLI::App* command, CommandResult* result);
};
std::span<const TopCommand> top_commands();

// The builders: each fills in its top-level command, made by the caller.
void add_sandbox_commands(CLI::App* sandbox, CommandResult* result);
// `sandbox doctor | list | reap`, under the `sandbox` command.
void add_sandbox_admin_commands(CLI::App* sandbox, CommandResult* result);
// `sandbox validate IMAGE`: does an image meet the contract (docs/images.md)?
void add_sandbox_validate_command(CLI::App* sandbox, CommandResult* result);
// cmd_sandbox_api.cc: create, find, set-timeout, delete through serve (--api).
void add_sandbox_api_commands(CLI::App* sandbox, CommandResult* result);
// `volume create|list|delete --api` (cmd_sandbox_api.cc).
void add_volume_commands(CLI::App* volume, CommandResult* result);
void add_call_command(CLI::App* call, CommandResult* result);
void add_run_commands(CLI::App* run, CommandResult* result);
void add_worker_commands(CLI::App* worker, CommandResult* result);
// `secret ...` and `identity ...` (issue 11).
void add_secret_commands(CLI::App* secret, CommandResult* result);
void add_identity_commands(CLI::App* identity, CommandResult* result);
void add_audit_commands(CLI::App* audit, CommandResult* result);
// `workflow validate | run` (issue 12).
void add_workflow_commands(CLI::App* workflow, CommandResult* result);
void add_approvals_commands(CLI::App* approvals, CommandResult* result);
// `serve` (the HTTP API) and `token create | list | revoke` (issue 14).
void add_serve_command(CLI::App* serve, CommandResult* result);
void add_token_commands(CLI::App* token, CommandResult* result);
// `policy set | show | clear` (issue 39): the operator's policy.
void add_policy_commands(CLI::App* policy, CommandResult* result);
// `keys show | rotate`: the proof signing key (issue 15).
void add_keys_commands(CLI::App* keys, CommandResult* result);
// `fleet status`: the workers sharing a store (issue 16).
void add_fleet_commands(CLI::App* fleet, CommandResult* result);
// `store migrate`: a store moved to the other engine (issue 16).
void add_store_commands(CLI::App* store, CommandResult* result);
// `mcp`: the MCP server on stdio (issue 14).
void add_mcp_command(CLI::App* mcp, CommandResult* result);

}  // namespace rf::cli
