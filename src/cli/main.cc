// ringfence: the command line. A thin layer over the library; each verb group
// lives in its own cmd_*.cc.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string_view>

#include "cli/commands.h"
#include "core/log.h"

int main(int argc, char** argv) {
  CLI::App app{"ringfence: run AI agents' tool calls in disposable sandboxes"};
  app.name("ringfence");
  app.set_version_flag("--version", std::string("ringfence ") + RF_VERSION);
  app.require_subcommand(1);
  std::string log_level = "warn";
  app.add_option("--log-level", log_level, "debug, info, warn or error")
      ->default_val("warn")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  app.parse_complete_callback([&] { rf::init_logging(log_level); });

  rf::cli::CommandResult result;
  // Everything after the first "--" is a command, never options: CLI11 keeps
  // parsing "-la" in "-- ls -la" as an option once a repeatable option came first.
  int cli_argc = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--") {
      cli_argc = i;
      result.command_tail.assign(argv + i + 1, argv + argc);
      break;
    }
  }
  rf::cli::add_sandbox_commands(app, &result);
  rf::cli::add_call_commands(app, &result);
  rf::cli::add_worker_commands(app, &result);
  auto* help = app.add_subcommand("help", "Show this help");
  const std::string usage = app.help();  // before parsing picks a subcommand to describe
  help->callback([&] { std::fputs(usage.c_str(), stdout); });

  try {
    app.parse(cli_argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "ringfence: %s\nRun 'ringfence help' for usage.\n", e.what());
    return 2;
  }
  return result.exit_code;
}
