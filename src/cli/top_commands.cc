#include "cli/commands.h"

namespace rf::cli {

std::span<const TopCommand> top_commands() {
  static constexpr TopCommand kCommands[] = {
      {"sandbox", "Run commands in sandboxes", add_sandbox_commands},
      {"call",
       "Send a tool call to the workers and wait for it: call --project P --run R -- CMD...",
       add_call_command},
      {"run", "Runs: end, show", add_run_commands},
      {"worker", "Worker settings", add_worker_commands},
  };
  return kCommands;
}

}  // namespace rf::cli
