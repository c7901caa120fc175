#include "identity/secret_box.h"

#include <sodium.h>

namespace rf::identity {
namespace {

std::string associated_data(std::string_view name, int64_t version) {
  return "ringfence secret " + std::string(name) + " v" + std::to_string(version);
}

const unsigned char* bytes(std::string_view s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}

}  // namespace

std::string seal(const SealingKey& key, std::string_view name, int64_t version,
                 std::string_view plaintext) {
  const std::string ad = associated_data(name, version);
  constexpr size_t kNonce = crypto_aead_xchacha20poly1305_ietf_NPUBBYTES;
  std::string out(kNonce + plaintext.size() + crypto_aead_xchacha20poly1305_ietf_ABYTES, '\0');
  auto* o = reinterpret_cast<unsigned char*>(out.data());
  randombytes_buf(o, kNonce);
  unsigned long long written = 0;
  crypto_aead_xchacha20poly1305_ietf_encrypt(o + kNonce, &written, bytes(plaintext),
                                             plaintext.size(), bytes(ad), ad.size(), nullptr, o,
                                             bytes(key.key.reveal()));
  out.resize(kNonce + written);
  return out;
}

Result<SecretValue> open_sealed(const SealingKey& key, std::string_view name, int64_t version,
                                std::string_view sealed, std::string_view key_id) {
  const std::string where = "secret " + std::string(name) + " version " + std::to_string(version);
  if (key_id != key.id) {
    return make_error(where, "was sealed by key " + std::string(key_id) + ", but key file " +
                                 key.path + " holds key " + key.id +
                                 " (a wrong or replaced key file)");
  }
  constexpr size_t kNonce = crypto_aead_xchacha20poly1305_ietf_NPUBBYTES;
  constexpr size_t kTag = crypto_aead_xchacha20poly1305_ietf_ABYTES;
  if (sealed.size() < kNonce + kTag) return make_error(where, "its sealed value is truncated");
  const std::string ad = associated_data(name, version);
  std::string plain(sealed.size() - kNonce - kTag, '\0');
  unsigned long long n = 0;
  if (crypto_aead_xchacha20poly1305_ietf_decrypt(reinterpret_cast<unsigned char*>(plain.data()), &n,
                                                 nullptr, bytes(sealed) + kNonce,
                                                 sealed.size() - kNonce, bytes(ad), ad.size(),
                                                 bytes(sealed), bytes(key.key.reveal())) != 0) {
    return make_error(where, "does not open with key file " + key.path +
                                 " (the stored value or the key file was changed)");
  }
  plain.resize(n);
  return SecretValue(std::move(plain));
}

}  // namespace rf::identity
