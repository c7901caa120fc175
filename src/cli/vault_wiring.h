// The Vault client the CLI and the worker hand to the identity layer (cli
// side, the composition root): vault_api's KV v2 backend, its token from
// VAULT_TOKEN (never argv) and its cache TTL from RINGFENCE_VAULT_CACHE_TTL_MS.
#pragma once

#include <memory>

#include "core/result.h"
#include "identity/vault_access.h"

namespace rf::cli {

// Fails only on a bad RINGFENCE_VAULT_CACHE_TTL_MS. With no VAULT_TOKEN the
// backend is still made: builtin secrets need none, and a vault secret then
// fails closed naming VAULT_TOKEN.
Result<std::unique_ptr<identity::VaultAccess>> make_vault_access();

}  // namespace rf::cli
