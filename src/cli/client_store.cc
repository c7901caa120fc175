#include "cli/client_store.h"

#include <cstdlib>

#include "worker/config_file.h"
#include "worker/settings.h"
#include "worker/worker.h"

namespace rf::cli {

std::string state_dir_or_default(const std::string& flag) {
  return flag.empty() ? worker::default_settings(worker::home_directory()).state_dir.value : flag;
}

std::string store_target(const std::string& store_flag, const std::string& state_dir) {
  if (!store_flag.empty()) return store_flag;
  const char* env = std::getenv("RINGFENCE_STORE");
  if (env != nullptr && *env != 0) return env;
  return worker::store_path(state_dir);
}

std::vector<std::pair<std::string_view, std::string_view>> store_flags_in(int argc,
                                                                          const char* const* argv) {
  std::vector<std::pair<std::string_view, std::string_view>> out;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") break;
    for (std::string_view flag : {"--store", "--from", "--to"}) {
      if (arg == flag && i + 1 < argc) {
        out.emplace_back(flag, argv[i + 1]);
      } else if (arg.starts_with(flag) && arg.size() > flag.size() && arg[flag.size()] == '=') {
        out.emplace_back(flag, arg.substr(flag.size() + 1));
      }
    }
  }
  return out;
}

std::optional<std::string> store_password_refusal(int argc, const char* const* argv) {
  const std::string remedy =
      "put the password in libpq's password file (PGPASSFILE, or ~/.pgpass) and name the "
      "store without it";
  for (const auto& [flag, value] : store_flags_in(argc, argv)) {
    if (store::holds_password(value))
      return std::string(flag) + " " + store::engine::redact_uri(value) +
             ": the URI holds a password, which any process on this host can read in argv; " +
             remedy;
  }
  const char* env = std::getenv("RINGFENCE_STORE");
  if (env != nullptr && store::holds_password(env))
    return "RINGFENCE_STORE holds a password, which every process of this user can read in " +
           std::string("/proc/PID/environ; ") + remedy;
  return std::nullopt;
}

Result<std::unique_ptr<store::Store>> open_client_store(const std::string& state_dir) {
  return store::Store::open(store_target("", state_dir));
}

}  // namespace rf::cli
