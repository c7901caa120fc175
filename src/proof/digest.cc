#include "proof/digest.h"

#include <sodium.h>

#include <cstring>

namespace rf::proof {

static_assert(sizeof(crypto_hash_sha256_state) <= 512);

std::string sha256(std::string_view data) {
  std::string md(crypto_hash_sha256_BYTES, '\0');
  crypto_hash_sha256(reinterpret_cast<unsigned char*>(md.data()),
                     reinterpret_cast<const unsigned char*>(data.data()), data.size());
  return md;
}

std::string to_hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

std::string sha256_hex(std::string_view data) { return to_hex(sha256(data)); }

std::optional<std::string> from_hex(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out(hex.size() / 2, '\0');
  for (size_t i = 0; i < out.size(); ++i) {
    const int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out[i] = static_cast<char>(hi << 4 | lo);
  }
  return out;
}

Sha256Stream::Sha256Stream() {
  crypto_hash_sha256_init(reinterpret_cast<crypto_hash_sha256_state*>(state_));
}

void Sha256Stream::update(std::string_view data) {
  crypto_hash_sha256_update(reinterpret_cast<crypto_hash_sha256_state*>(state_),
                            reinterpret_cast<const unsigned char*>(data.data()), data.size());
  bytes_ += data.size();
}

std::string Sha256Stream::hex() const {
  crypto_hash_sha256_state copy;
  std::memcpy(&copy, state_, sizeof copy);
  unsigned char md[crypto_hash_sha256_BYTES];
  crypto_hash_sha256_final(&copy, md);
  return to_hex(std::string_view(reinterpret_cast<const char*>(md), sizeof md));
}

}  // namespace rf::proof
