// API bearer tokens (issue 14): made here, shown once, stored only as their
// SHA-256 (store/token_store.h). A token reads "rft_" + 43 base64url
// characters (256 random bits); its id "tok_" + 12 hex digits is public.
#pragma once

#include <string>
#include <string_view>

namespace rf::api {

struct NewToken {
  std::string token;  // the secret: shown once
  std::string id;     // public handle
  std::string hash;   // 32 bytes
};

NewToken make_token();
std::string hash_token(std::string_view token);
// Has the shape of a token (so that a wrong kind of string gets a clear 401).
bool looks_like_token(std::string_view token);

}  // namespace rf::api
