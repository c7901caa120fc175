#include "cli/worker_flags.h"

namespace rf::cli {

void add_worker_settings_flags(CLI::App* cmd, worker::WorkerFlags* flags) {
  cmd->add_option_function<std::string>(
      "--config", [flags](const std::string& path) { flags->config = path; },
      "Worker config file (default ~/.ringfence/worker.yaml when it exists)");
  for (const worker::SettingFlag& f : worker::setting_flags()) {
    if (!f.list) {
      cmd->add_option_function<std::string>(
          f.flag, [flags, flag = f.flag](const std::string& text) { flags->given[flag] = text; },
          f.help);
      continue;
    }
    cmd->add_option_function<std::vector<std::string>>(
           f.flag,
           [flags, flag = f.flag](const std::vector<std::string>& texts) {
             std::string joined;
             for (const auto& t : texts) joined += (joined.empty() ? "" : ",") + t;
             flags->given[flag] = joined;
           },
           f.help)
        ->expected(1)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  }
}

}  // namespace rf::cli
