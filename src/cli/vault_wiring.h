// The Vault client the CLI and the worker hand to the identity layer (cli
// side, the composition root): vault_api's KV v2 client, its token from
// VAULT_TOKEN (never argv).
#pragma once

#include <memory>

#include "identity/vault_access.h"

namespace rf::cli {

std::unique_ptr<identity::VaultAccess> make_vault_access();

}  // namespace rf::cli
