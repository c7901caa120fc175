// Signed checkpoints of the audit log's Merkle tree, in the C2SP formats
// (c2sp.org/tlog-checkpoint inside a c2sp.org/signed-note):
//   <origin>\n<tree size>\n<base64 root hash>\n
//   \n
//   — <origin> <base64(key hash || signature)>\n
// The key hash is the first 4 bytes of SHA-256(origin || "\n" || 0x01 || key),
// 0x01 naming Ed25519; the signature covers the text above the blank line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.h"
#include "proof/signing_key.h"

namespace rf::proof {

struct Checkpoint {
  std::string origin;  // the log's name, e.g. "ringfence/build-host/audit"
  uint64_t size = 0;
  std::string root;  // 32 raw bytes
};

std::string checkpoint_body(const Checkpoint& c);
// The signed note (origin is also the signer's name).
std::string sign_checkpoint(const Checkpoint& c, const SigningKey& key);
// Parses a signed note and checks that `key` signed it under its origin's
// name; the error says what did not hold.
Result<Checkpoint> verify_checkpoint(std::string_view note, const PublicKey& key);

}  // namespace rf::proof
