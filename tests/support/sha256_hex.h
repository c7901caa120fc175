// SHA-256 of a text, as lowercase hex: tests compare secrets by it, never by value.
#pragma once

#include <sodium.h>

#include <string>

namespace rf::testing {

inline std::string sha256_hex(const std::string& s) {
  unsigned char md[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(md, reinterpret_cast<const unsigned char*>(s.data()), s.size());
  char hex[2 * sizeof md + 1];
  sodium_bin2hex(hex, sizeof hex, md, sizeof md);
  return hex;
}

}  // namespace rf::testing
