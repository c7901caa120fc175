#include "cli/client_store.h"

#include "worker/config_file.h"
#include "worker/settings.h"
#include "worker/worker.h"

namespace rf::cli {

std::string state_dir_or_default(const std::string& flag) {
  return flag.empty() ? worker::default_settings(worker::home_directory()).state_dir.value : flag;
}

Result<std::unique_ptr<store::Store>> open_client_store(const std::string& state_dir) {
  return store::Store::open(worker::store_path(state_dir));
}

}  // namespace rf::cli
