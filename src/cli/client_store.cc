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

Result<std::unique_ptr<store::Store>> open_client_store(const std::string& state_dir) {
  return store::Store::open(store_target("", state_dir));
}

}  // namespace rf::cli
