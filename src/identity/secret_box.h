// Sealing builtin secrets at rest (host side): XChaCha20-Poly1305 (libsodium)
// with a fresh random nonce per seal, and the secret's name and version as
// associated data, so a sealed value moved to another name or version does not
// open. sealed = nonce (24 bytes) || ciphertext and tag.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.h"
#include "identity/key_file.h"
#include "identity/secret_value.h"

namespace rf::identity {

std::string seal(const SealingKey& key, std::string_view name, int64_t version,
                 std::string_view plaintext);
// Fails closed: a wrong key (key_id not the key's) or a changed sealed value
// gives an error naming the secret, the version and the key file, never a value.
Result<SecretValue> open_sealed(const SealingKey& key, std::string_view name, int64_t version,
                                std::string_view sealed, std::string_view key_id);

}  // namespace rf::identity
