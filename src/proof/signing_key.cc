#include "proof/signing_key.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <utility>

#include "core/base64.h"
#include "core/io.h"
#include "core/unique_fd.h"
#include "proof/digest.h"

namespace rf::proof {
namespace {

// DER of SubjectPublicKeyInfo { AlgorithmIdentifier { id-Ed25519 }, BIT STRING }
// before the 32 key bytes (RFC 8410).
constexpr unsigned char kSpkiPrefix[] = {0x30, 0x2a, 0x30, 0x05, 0x06, 0x03,
                                         0x2b, 0x65, 0x70, 0x03, 0x21, 0x00};
constexpr size_t kSeedBytes = crypto_sign_SEEDBYTES;

std::string seed_path(const std::string& state_dir) { return key_dir(state_dir) + "/proof.key"; }

Error key_error(const std::string& path, std::string what) {
  return make_error("signing key " + path, std::move(what));
}

Status ensure_sodium() {
  if (sodium_init() < 0) return make_error("signing key", "libsodium cannot start");
  return ok_status();
}

// Writes `bytes` to `path` through a temporary file: atomically, never half.
// With `exclusive`, an existing `path` is kept and EEXIST returned.
Status write_file_atomic(const std::string& path, std::string_view bytes, mode_t mode,
                         bool exclusive) {
  if (auto made = make_private_dirs(std::filesystem::path(path).parent_path()); !made)
    return make_error(path, "cannot make its directory: " + made.error().to_string());
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode));
    if (!fd) return sys_error(tmp);
    // Any failure from here removes the temporary file, and names the file
    // being written: "write: ..." alone says neither what nor where.
    auto give_up = [&](const std::string& step, int err) {
      ::unlink(tmp.c_str());
      return Status(sys_error(path + ": " + step, err));
    };
    if (::fchmod(fd.get(), mode) != 0) return give_up("chmod " + tmp, errno);
    if (auto w = write_all(fd.get(), bytes); !w) return give_up("write", w.error().sys_errno);
    if (::fsync(fd.get()) != 0) return give_up("fsync", errno);
  }
  const int rc =
      exclusive ? ::link(tmp.c_str(), path.c_str()) : ::rename(tmp.c_str(), path.c_str());
  const int err = errno;
  ::unlink(tmp.c_str());
  if (rc != 0) return sys_error(path, err);
  return ok_status();
}

Result<std::string> read_seed(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) {
    if (errno == ENOENT) {
      return Error{"signing key " + path,
                   "is missing (`ringfence keys rotate` makes one; any command that signs "
                   "makes one on first use)",
                   ENOENT, ErrorCode::kNotFound};
    }
    return sys_error("signing key " + path);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return sys_error("signing key " + path);
  if (!S_ISREG(st.st_mode)) return key_error(path, "is not a regular file");
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", st.st_mode & 0777);
    return key_error(path,
                     std::string("is readable by others (mode ") + mode + "); it must be 0600");
  }
  if (st.st_uid != ::geteuid()) return key_error(path, "belongs to another user");
  std::string seed(kSeedBytes + 1, '\0');
  const ssize_t n = ::read(fd.get(), seed.data(), seed.size());
  if (n < 0) return sys_error("signing key " + path);
  if (static_cast<size_t>(n) != kSeedBytes) {
    sodium_memzero(seed.data(), seed.size());
    return key_error(path, "is corrupt: it holds " + std::to_string(n) + " bytes, a seed is " +
                               std::to_string(kSeedBytes));
  }
  seed.resize(kSeedBytes);
  return seed;
}

}  // namespace

std::string key_dir(const std::string& state_dir) { return state_dir + "/keys"; }
std::string public_key_path(const std::string& state_dir) {
  return key_dir(state_dir) + "/proof.pub";
}

std::string PublicKey::pem() const {
  std::string der(reinterpret_cast<const char*>(kSpkiPrefix), sizeof kSpkiPrefix);
  der += raw;
  return "-----BEGIN PUBLIC KEY-----\n" + base64_encode(der) + "\n-----END PUBLIC KEY-----\n";
}

std::string PublicKey::key_id() const { return sha256_hex(raw); }

Result<PublicKey> parse_public_key_pem(std::string_view text) {
  constexpr std::string_view kBegin = "-----BEGIN PUBLIC KEY-----";
  constexpr std::string_view kEnd = "-----END PUBLIC KEY-----";
  std::string_view body = text;
  if (const auto b = text.find(kBegin); b != std::string_view::npos) {
    const auto e = text.find(kEnd, b);
    if (e == std::string_view::npos) return make_error("public key", "PEM without its END line");
    body = text.substr(b + kBegin.size(), e - b - kBegin.size());
  }
  std::string b64;
  for (const char c : body) {
    if (c != '\n' && c != '\r' && c != ' ' && c != '\t') b64.push_back(c);
  }
  auto der = base64_decode(b64);
  if (!der) return make_error("public key", "not PEM: its body is not base64");
  if (der->size() != sizeof kSpkiPrefix + kPublicKeyBytes ||
      std::memcmp(der->data(), kSpkiPrefix, sizeof kSpkiPrefix) != 0) {
    return make_error("public key", "not an Ed25519 public key (SubjectPublicKeyInfo, RFC 8410)");
  }
  return PublicKey{der->substr(sizeof kSpkiPrefix)};
}

Result<PublicKey> read_public_key_file(const std::string& path) {
  auto text = read_file(path);
  if (!text) return Error{"public key " + path, text.error().message, text.error().sys_errno};
  auto key = parse_public_key_pem(*text);
  if (!key) return make_error("public key " + path, key.error().message);
  return key;
}

bool verify_signature(const PublicKey& key, std::string_view message, std::string_view sig) {
  if (key.raw.size() != kPublicKeyBytes || sig.size() != kSignatureBytes) return false;
  if (sodium_init() < 0) return false;
  return crypto_sign_verify_detached(reinterpret_cast<const unsigned char*>(sig.data()),
                                     reinterpret_cast<const unsigned char*>(message.data()),
                                     message.size(),
                                     reinterpret_cast<const unsigned char*>(key.raw.data())) == 0;
}

SigningKey::SigningKey(SigningKey&& other) noexcept : public_(std::move(other.public_)) {
  std::lock_guard lock(other.mu_);
  std::memcpy(secret_, other.secret_, sizeof secret_);
  std::memcpy(scalar_, other.scalar_, sizeof scalar_);
  std::memcpy(prefix_, other.prefix_, sizeof prefix_);
  nonces_ = other.nonces_;
  ready_ = std::exchange(other.ready_, 0);
  made_in_ = other.made_in_;
  serial_ = other.serial_;
  sodium_memzero(other.secret_, sizeof other.secret_);
  sodium_memzero(other.scalar_, sizeof other.scalar_);
  sodium_memzero(other.prefix_, sizeof other.prefix_);
  sodium_memzero(other.nonces_.data(), sizeof other.nonces_);
}

SigningKey::~SigningKey() {
  sodium_memzero(secret_, sizeof secret_);
  sodium_memzero(scalar_, sizeof scalar_);
  sodium_memzero(prefix_, sizeof prefix_);
  sodium_memzero(nonces_.data(), sizeof nonces_);
}

void SigningKey::expand() {
  // RFC 8032 5.1.5: SHA-512 of the seed; its first half clamped is the
  // scalar (kept reduced mod L here), its second half the nonce prefix.
  unsigned char h[64];
  crypto_hash_sha512(h, secret_, crypto_sign_SEEDBYTES);
  h[0] &= 248;
  h[31] &= 127;
  h[31] |= 64;
  unsigned char wide[64] = {};
  std::memcpy(wide, h, 32);
  crypto_core_ed25519_scalar_reduce(scalar_, wide);
  std::memcpy(prefix_, h + 32, 32);
  sodium_memzero(h, sizeof h);
  sodium_memzero(wide, sizeof wide);
}

SigningKey SigningKey::generate() {
  if (sodium_init() < 0) std::abort();  // no randomness: no key can be made
  SigningKey k;
  unsigned char pk[crypto_sign_PUBLICKEYBYTES];
  crypto_sign_keypair(pk, k.secret_);
  k.public_.raw.assign(reinterpret_cast<const char*>(pk), sizeof pk);
  k.expand();
  return k;
}

Result<SigningKey> SigningKey::load(const std::string& state_dir) {
  if (auto s = ensure_sodium(); !s) return s.take_error();
  auto seed = read_seed(seed_path(state_dir));
  if (!seed) return seed.take_error();
  SigningKey k;
  unsigned char pk[crypto_sign_PUBLICKEYBYTES];
  crypto_sign_seed_keypair(pk, k.secret_, reinterpret_cast<const unsigned char*>(seed->data()));
  sodium_memzero(seed->data(), seed->size());
  k.public_.raw.assign(reinterpret_cast<const char*>(pk), sizeof pk);
  k.expand();
  // The PEM beside it is for readers; the seed is the truth. Rewrite a missing one.
  const std::string pub = public_key_path(state_dir);
  if (::access(pub.c_str(), F_OK) != 0) (void)write_file_atomic(pub, k.public_.pem(), 0644, false);
  return k;
}

Result<SigningKey> SigningKey::load_or_create(const std::string& state_dir) {
  auto k = load(state_dir);
  if (k || k.error().code != ErrorCode::kNotFound) return k;
  std::string seed(kSeedBytes, '\0');
  randombytes_buf(seed.data(), seed.size());
  const Status made = write_file_atomic(seed_path(state_dir), seed, 0600, /*exclusive=*/true);
  sodium_memzero(seed.data(), seed.size());
  // EEXIST: another process made it first; take theirs.
  if (!made && made.error().sys_errno != EEXIST) return made.error();
  return load(state_dir);
}

Result<SigningKey> SigningKey::rotate(const std::string& state_dir) {
  if (auto s = ensure_sodium(); !s) return s.take_error();
  if (auto old = load(state_dir); old) {
    const std::string retired =
        key_dir(state_dir) + "/retired/" + old->public_key().key_id().substr(0, 16) + ".pub";
    if (auto kept = write_file_atomic(retired, old->public_key().pem(), 0644, false); !kept)
      return kept.error();
  } else if (old.error().code != ErrorCode::kNotFound) {
    return old.take_error();
  }
  std::string seed(kSeedBytes, '\0');
  randombytes_buf(seed.data(), seed.size());
  const Status made = write_file_atomic(seed_path(state_dir), seed, 0600, /*exclusive=*/false);
  sodium_memzero(seed.data(), seed.size());
  if (!made) return made.error();
  ::unlink(public_key_path(state_dir).c_str());
  return load(state_dir);
}

void SigningKey::drop_if_forked() const {
  const pid_t self = ::getpid();
  if (made_in_ == self) return;
  sodium_memzero(nonces_.data(), sizeof nonces_);
  ready_ = 0;
  made_in_ = self;
}

SigningKey::Nonce SigningKey::make_nonce(uint64_t serial) const {
  struct {
    unsigned char random[32];
    int64_t pid, serial, ns;
  } input{};
  randombytes_buf(input.random, sizeof input.random);
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  input.pid = ::getpid();
  input.serial = static_cast<int64_t>(serial);
  input.ns = int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
  unsigned char h[64];
  crypto_hash_sha512_state st;
  crypto_hash_sha512_init(&st);
  crypto_hash_sha512_update(&st, prefix_, sizeof prefix_);
  crypto_hash_sha512_update(&st, reinterpret_cast<const unsigned char*>(&input), sizeof input);
  crypto_hash_sha512_final(&st, h);
  Nonce n;
  crypto_core_ed25519_scalar_reduce(n.r, h);
  // Fails only for r = 0 (a chance of 2^-252): then the caller signs the whole way.
  if (crypto_scalarmult_ed25519_base_noclamp(n.R, n.r) != 0) sodium_memzero(&n, sizeof n);
  sodium_memzero(h, sizeof h);
  sodium_memzero(&input, sizeof input);
  sodium_memzero(&st, sizeof st);
  return n;
}

void SigningKey::prepare(size_t n) const {
  n = std::min(n, kMaxPrepared);
  for (;;) {
    uint64_t serial = 0;
    {
      std::lock_guard lock(mu_);
      drop_if_forked();
      if (ready_ >= n) return;
      serial = ++serial_;
    }
    // Made outside the lock: a signer does not wait for it.
    Nonce fresh = make_nonce(serial);
    {
      std::lock_guard lock(mu_);
      drop_if_forked();
      if (ready_ < kMaxPrepared && !sodium_is_zero(fresh.R, sizeof fresh.R)) {
        nonces_[ready_++] = fresh;
      }
    }
    sodium_memzero(&fresh, sizeof fresh);
  }
}

size_t SigningKey::prepared() const {
  std::lock_guard lock(mu_);
  drop_if_forked();
  return ready_;
}

std::string SigningKey::sign(std::string_view message) const {
  std::string sig(crypto_sign_BYTES, '\0');
  auto* out = reinterpret_cast<unsigned char*>(sig.data());
  const auto* m = reinterpret_cast<const unsigned char*>(message.data());
  Nonce n;
  {
    std::lock_guard lock(mu_);
    drop_if_forked();
    if (ready_ == 0) {
      crypto_sign_detached(out, nullptr, m, message.size(), secret_);
      return sig;
    }
    n = nonces_[--ready_];  // each nonce signs once: taken out and wiped
    sodium_memzero(&nonces_[ready_], sizeof(Nonce));
  }
  // RFC 8032 5.1.6 steps 4-6: k = H(R || A || M) mod L, S = r + k a mod L.
  unsigned char h[64], k[32], ka[32];
  crypto_hash_sha512_state st;
  crypto_hash_sha512_init(&st);
  crypto_hash_sha512_update(&st, n.R, sizeof n.R);
  crypto_hash_sha512_update(&st, reinterpret_cast<const unsigned char*>(public_.raw.data()),
                            public_.raw.size());
  crypto_hash_sha512_update(&st, m, message.size());
  crypto_hash_sha512_final(&st, h);
  crypto_core_ed25519_scalar_reduce(k, h);
  crypto_core_ed25519_scalar_mul(ka, k, scalar_);
  std::memcpy(out, n.R, 32);
  crypto_core_ed25519_scalar_add(out + 32, n.r, ka);
  sodium_memzero(&n, sizeof n);
  sodium_memzero(ka, sizeof ka);
  return sig;
}

}  // namespace rf::proof
