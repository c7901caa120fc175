// The proof signing key (host side): an Ed25519 pair under the state dir.
//   <state dir>/keys/proof.key      the 32-byte seed, mode 0600, made on first use
//   <state dir>/keys/proof.pub      the public key, PEM (SubjectPublicKeyInfo)
//   <state dir>/keys/retired/ID.pub the public keys `keys rotate` replaced
// Signatures are Ed25519 (RFC 8032, libsodium): what `openssl pkeyutl -verify
// -rawin` checks with the PEM. A missing seed is made; an unreadable, short or
// too-open one fails closed, naming the file.
//
// Signing ahead (docs/proof.md, "Signing"): most of an Ed25519 signature's
// work does not depend on the message. Its nonce r and the point R = rB (a
// fixed-base scalar multiplication, ~20 us here) can be made before the
// message exists; the rest, S = r + H(R || A || M) a, is one hash of the
// message and a scalar multiply-add (~5 us). prepare() makes nonces ahead,
// off a call's path (a worker's recorder thread when idle, the CLI beside a
// sandbox's creation); sign() takes one, used once and wiped, or signs the
// whole way without one. A verifier cannot tell the two apart: RFC 8032's
// verification never sees how r was chosen. r is SHA-512 of the key's secret
// prefix (as RFC 8032's own r is) with fresh random bytes, the pid, a serial
// and the time instead of the message, so it is secret, uniform and never the
// same twice, even should the random bytes repeat; nonces made in a process
// are dropped in a fork of it.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <mutex>
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
  // The Ed25519 signature of `message`; with a nonce made ahead, if any.
  // Thread-safe.
  std::string sign(std::string_view message) const;
  // Makes nonces ahead until `n` (at most kMaxPrepared) are ready. Thread-safe.
  void prepare(size_t n) const;
  // How many nonces are ready now (tests, benchmarks).
  size_t prepared() const;
  static constexpr size_t kMaxPrepared = 32;

 private:
  // A signature's message-independent half: the nonce scalar and its point.
  struct Nonce {
    unsigned char r[32], R[32];
  };
  SigningKey() = default;
  // Fills scalar_ and prefix_ from secret_'s seed.
  void expand();
  Nonce make_nonce(uint64_t serial) const;
  // Under mu_: forgets the nonces when this is a fork of the process that made them.
  void drop_if_forked() const;

  unsigned char secret_[64] = {};  // libsodium's seed || public key
  unsigned char scalar_[32] = {};  // the secret scalar a (reduced mod L)
  unsigned char prefix_[32] = {};  // the seed hash's second half (RFC 8032)
  PublicKey public_;
  mutable std::mutex mu_;
  mutable std::array<Nonce, kMaxPrepared> nonces_{};
  mutable size_t ready_ = 0;
  mutable pid_t made_in_ = 0;
  mutable uint64_t serial_ = 0;
};

std::string key_dir(const std::string& state_dir);
std::string public_key_path(const std::string& state_dir);

}  // namespace rf::proof
