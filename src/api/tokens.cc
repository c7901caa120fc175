#include "api/tokens.h"

#include <sodium.h>

#include <cstdio>

#include "core/base64.h"

namespace rf::api {

std::string hash_token(std::string_view token) {
  unsigned char md[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(md, reinterpret_cast<const unsigned char*>(token.data()), token.size());
  return std::string(reinterpret_cast<const char*>(md), sizeof md);
}

NewToken make_token() {
  unsigned char bytes[32];
  randombytes_buf(bytes, sizeof bytes);
  unsigned char id_bytes[6];
  randombytes_buf(id_bytes, sizeof id_bytes);
  NewToken t;
  // base64url without padding: 43 characters.
  std::string text = base64_encode(std::string_view(reinterpret_cast<char*>(bytes), sizeof bytes));
  while (!text.empty() && text.back() == '=') text.pop_back();
  for (char& c : text) c = c == '+' ? '-' : c == '/' ? '_' : c;
  t.token = "rft_" + text;
  sodium_memzero(bytes, sizeof bytes);
  t.id = "tok_";
  for (unsigned char b : id_bytes) {
    char hex[3];
    std::snprintf(hex, sizeof hex, "%02x", b);
    t.id += hex;
  }
  t.hash = hash_token(t.token);
  return t;
}

bool looks_like_token(std::string_view token) {
  if (token.size() != 47 || token.substr(0, 4) != "rft_") return false;
  for (char c : token.substr(4)) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_';
    if (!ok) return false;
  }
  return true;
}

}  // namespace rf::api
