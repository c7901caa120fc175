#include "identity/secret_value.h"

#include <sodium.h>

#include "core/utf8.h"
#include "identity/text_value.h"

namespace rf::identity {

void SecretValue::wipe() {
  // The whole buffer, not only size(): a value that shrank leaves bytes behind.
  if (bytes_.capacity() > 0) sodium_memzero(bytes_.data(), bytes_.capacity());
  bytes_.clear();
}

bool is_text_value(std::string_view s) {
  return s.find('\0') == std::string_view::npos && valid_utf8(s);
}

}  // namespace rf::identity
