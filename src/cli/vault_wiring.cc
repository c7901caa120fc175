#include "cli/vault_wiring.h"

namespace rf::cli {

std::unique_ptr<identity::VaultAccess> make_vault_access() { return nullptr; }

}  // namespace rf::cli
