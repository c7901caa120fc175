#include <cstdio>

#include "cli/commands.h"

namespace rf::cli {

std::span<const TopCommand> top_commands() {
  static constexpr TopCommand kCommands[] = {
      {"sandbox", "Run commands in sandboxes", add_sandbox_commands},
      {"call",
       "Send a tool call to the workers and wait for it: call --project P --run R -- CMD...",
       add_call_command},
      {"run", "Runs: show, end, cancel, replay, artifact", add_run_commands},
      {"worker", "Worker settings", add_worker_commands},
      {"fleet", "The workers sharing the store: status [--json]", add_fleet_commands},
      {"store", "The store: migrate --from sqlite:PATH --to postgres://... (moves its data)",
       add_store_commands},
      {"secret", "Secrets: set (value from stdin), list, revoke, rotate-key", add_secret_commands},
      {"identity", "Identity profiles and their cascade: profile set|show|list, resolve",
       add_identity_commands},
      {"audit",
       "The audit log: show, verify (the chain, a receipt offline, or a run's receipts), receipt, "
       "checkpoint",
       add_audit_commands},
      {"keys", "The key that signs boundary reports, receipts and checkpoints: show, rotate",
       add_keys_commands},
      {"workflow", "Workflows: validate FILE, run FILE", add_workflow_commands},
      {"approvals", "Requests waiting for a human: list, approve ID, deny ID --reason TEXT",
       add_approvals_commands},
      {"serve", "The HTTP API for agents and operators: serve --listen 127.0.0.1:8080",
       add_serve_command},
      {"token", "API tokens of a project: create, list, revoke", add_token_commands},
      {"volume", "A project's named volumes on a fleet, through serve: create, list, delete",
       add_volume_commands},
      {"policy", "The operator's policy of a project (or --default): set, show [--explain], clear",
       add_policy_commands},
      {"mcp", "The MCP server on stdio, for agents: mcp --project P", add_mcp_command},
  };
  return kCommands;
}

int fail(const std::string& what, int code) {
  std::fprintf(stderr, "ringfence: %s\n", what.c_str());
  return code;
}

}  // namespace rf::cli
