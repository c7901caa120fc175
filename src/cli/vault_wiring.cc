#include "cli/vault_wiring.h"

#include "vault_api/vault_backend.h"

namespace rf::cli {

Result<std::unique_ptr<identity::VaultAccess>> make_vault_access() {
  auto options = vault::vault_options_from_env();
  if (!options) return options.take_error();
  return std::unique_ptr<identity::VaultAccess>(
      std::make_unique<vault::VaultBackend>(std::move(*options)));
}

}  // namespace rf::cli
