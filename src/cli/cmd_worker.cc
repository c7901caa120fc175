// `ringfence worker config [settings flags] [--explain]`: the worker's settings as
// they resolve from the flags, the config file and the defaults.
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "worker/config_file.h"
#include "worker/settings_flags.h"

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

}  // namespace

void add_worker_commands(CLI::App& app, CommandResult* result) {
  auto* worker = app.add_subcommand("worker", "Worker settings");
  worker->require_subcommand(1);
  auto* config = worker->add_subcommand(
      "config",
      "Print the resolved worker settings (as worker.yaml, or with --explain their sources)");
  auto flags = std::make_shared<worker::WorkerFlags>();
  auto explain = std::make_shared<bool>(false);
  worker::add_worker_settings_flags(config, flags.get());
  config->add_flag("--explain", *explain, "Print each setting and where it came from");
  config->callback([flags, explain, result] { result->exit_code = run_config(*flags, *explain); });
}

}  // namespace rf::cli
