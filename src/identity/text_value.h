// What a secret's value must be to reach a sandbox unaltered (host side).
#pragma once

#include <string_view>

namespace rf::identity {

// True when `bytes` is UTF-8 text without a NUL byte. Values travel to the
// runner in JSON (exec env, set_env), where bytes that are not UTF-8 would
// become U+FFFD: the sandbox would hold bytes the redactor was never given.
// A NUL cannot be in an environment variable at all.
bool is_text_value(std::string_view bytes);

}  // namespace rf::identity
