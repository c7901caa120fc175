// The proof signing key (host side): an Ed25519 pair under the state dir.
//   <state dir>/keys/proof.key      the 32-byte seed, mode 0600, made on first use
//   <state dir>/keys/proof.pub      the public key, PEM (SubjectPublicKeyInfo)
//   <state dir>/keys/retired/ID.pub the public keys `keys rotate` replaced
// Signatures are RFC 8032 Ed25519 (libsodium): what `openssl pkeyutl -verify
// -rawin` checks with the PEM. A missing seed is made; an unreadable, short or
// too-open one fails closed, naming the file.
#pragma once

#include <string>
#include <string_view>

#include "core/result.h"

namespace rf::proof {

inline constexpr size_t kPublicKeyBytes = 32;
inline constexpr size_t kSignatureBytes = 64;

struct PublicKey {
  std::string raw;  // 32 bytes

  // "-----BEGIN PUBLIC KEY-----\n...\n-----END PUBLIC KEY-----\n"
  std::string pem() const;
  // hex SHA-256 of the raw key: the DSSE keyid.
  std::string key_id() const;
};

// A PEM (or bare base64 DER) Ed25519 SubjectPublicKeyInfo; the error says
// what is wrong with it ("not an Ed25519 key").
Result<PublicKey> parse_public_key_pem(std::string_view text);
Result<PublicKey> read_public_key_file(const std::string& path);

// Whether `sig` is `key`'s Ed25519 signature of `message`.
bool verify_signature(const PublicKey& key, std::string_view message, std::string_view sig);

class SigningKey {
 public:
  SigningKey(SigningKey&& other) noexcept;
  SigningKey& operator=(SigningKey&&) = delete;
  SigningKey(const SigningKey&) = delete;
  ~SigningKey();

  // The pair under `state_dir`, made (atomically, once even when processes
  // race) when there is none.
  static Result<SigningKey> load_or_create(const std::string& state_dir);
  // Only an existing pair.
  static Result<SigningKey> load(const std::string& state_dir);
  // A new pair replaces the old; the old public key goes to keys/retired/.
  static Result<SigningKey> rotate(const std::string& state_dir);
  // A pair in memory only (tests, benchmarks).
  static SigningKey generate();

  const PublicKey& public_key() const { return public_; }
  std::string sign(std::string_view message) const;

 private:
  SigningKey() = default;
  unsigned char secret_[64] = {};  // libsodium's seed || public key
  PublicKey public_;
};

std::string key_dir(const std::string& state_dir);
std::string public_key_path(const std::string& state_dir);

}  // namespace rf::proof
