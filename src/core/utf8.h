// UTF-8 validation (RFC 3629): what JSON can carry as a string unaltered.
#pragma once

#include <string_view>

namespace rf {

// True when `s` is well-formed UTF-8: no overlong forms, no surrogates, nothing
// past U+10FFFF. A NUL byte is UTF-8 (U+0000).
bool valid_utf8(std::string_view s);

}  // namespace rf
