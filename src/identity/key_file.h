// The key that seals builtin secrets at rest (host side): 32 random bytes in
// <state dir>/secrets.key, mode 0600, owned by the user running ringfence.
// A missing, unreadable, short or too-open key file fails closed, and the
// error names the file. Its id (the first 16 hex digits of SHA-256 of the key)
// is stored with every sealed version, so a wrong key is named as such.
#pragma once

#include <string>

#include "core/result.h"
#include "core/unique_fd.h"
#include "identity/secret_value.h"

namespace rf::identity {

constexpr size_t kKeyBytes = 32;

struct SealingKey {
  std::string path;
  SecretValue key;  // kKeyBytes
  std::string id;   // 16 hex digits
};

std::string key_file_path(const std::string& state_dir);

// Reads the key file.
Result<SealingKey> load_key(const std::string& path);
// Reads it, or creates a new one when there is none (first secret): written
// whole with mode 0600, then linked into place, so that of several processes
// making it at once, one key is made and all of them get it.
Result<SealingKey> load_or_create_key(const std::string& path);
// A new random key, not yet written anywhere.
SealingKey new_key(const std::string& path);
// Writes the key to `path` atomically (mode 0600).
Status write_key(const SealingKey& key, const std::string& path);

// An flock on <key path>.lock (made with mode 0600), held while this lives:
// exclusive by whoever changes the key file or seals with it (secret set,
// rotate-key, finishing a rotation a crash interrupted), shared by those who
// only open with it. So a rotation runs alone, from writing secrets.key.next
// to renaming it into place, and no value is sealed with a key it retires.
// Waits until it is had. Locks in one process exclude each other too (each
// take() opens the file anew).
class KeyLock {
 public:
  enum class Mode { shared, exclusive };
  // Shared, where the key file's directory does not exist: no lock (there is
  // no key to open, and load_key says so).
  static Result<KeyLock> take(const std::string& key_path, Mode mode);

 private:
  explicit KeyLock(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

}  // namespace rf::identity
