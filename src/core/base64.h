// Base64 (RFC 4648, the standard alphabet, with padding).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace rf {

std::string base64_encode(std::string_view bytes);
// Accepts padded or unpadded input; nullopt on a byte outside the alphabet,
// padding anywhere but the end, or a length no encoding has.
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace rf
