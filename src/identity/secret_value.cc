#include "identity/secret_value.h"

#include <sodium.h>

namespace rf::identity {

void SecretValue::wipe() {
  // The whole buffer, not only size(): a value that shrank leaves bytes behind.
  if (bytes_.capacity() > 0) sodium_memzero(bytes_.data(), bytes_.capacity());
  bytes_.clear();
}

}  // namespace rf::identity
