#include "identity/key_file.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "core/io.h"
#include "core/unique_fd.h"

namespace rf::identity {
namespace {

std::string key_id_of(std::string_view key) {
  unsigned char md[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(md, reinterpret_cast<const unsigned char*>(key.data()), key.size());
  char hex[2 * sizeof md + 1];
  sodium_bin2hex(hex, sizeof hex, md, sizeof md);
  return std::string(hex, 16);
}

Error key_error(const std::string& path, std::string what) {
  return make_error("key file " + path, std::move(what));
}

}  // namespace

std::string key_file_path(const std::string& state_dir) { return state_dir + "/secrets.key"; }

Result<SealingKey> load_key(const std::string& path) {
  if (sodium_init() < 0) return key_error(path, "libsodium cannot start");
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) {
    if (errno == ENOENT) {
      return key_error(path,
                       "is missing: the builtin secrets sealed with it cannot be opened "
                       "(restore the file, or set the secrets again)");
    }
    return sys_error("key file " + path);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return sys_error("key file " + path);
  if (!S_ISREG(st.st_mode)) return key_error(path, "is not a regular file");
  if ((st.st_mode & 077) != 0) {
    return key_error(path, "is readable by others (mode " +
                               std::to_string((st.st_mode & 0777) >> 6) +
                               std::to_string((st.st_mode & 077) >> 3) +
                               std::to_string(st.st_mode & 07) + "); it must be 0600");
  }
  if (st.st_uid != ::geteuid()) return key_error(path, "belongs to another user");
  std::string bytes(kKeyBytes + 1, '\0');
  const ssize_t n = ::read(fd.get(), bytes.data(), bytes.size());
  if (n < 0) return sys_error("key file " + path);
  if (static_cast<size_t>(n) != kKeyBytes) {
    sodium_memzero(bytes.data(), bytes.size());
    return key_error(path, "is corrupt: it holds " + std::to_string(n) + " bytes, a key is " +
                               std::to_string(kKeyBytes));
  }
  bytes.resize(kKeyBytes);
  SealingKey key{path, SecretValue(std::move(bytes)), ""};
  key.id = key_id_of(key.key.reveal());
  return key;
}

SealingKey new_key(const std::string& path) {
  // sodium_init fails only without a source of randomness: no key can be made then.
  if (sodium_init() < 0) std::abort();
  std::string bytes(kKeyBytes, '\0');
  randombytes_buf(bytes.data(), bytes.size());
  SealingKey key{path, SecretValue(std::move(bytes)), ""};
  key.id = key_id_of(key.key.reveal());
  return key;
}

Status write_key(const SealingKey& key, const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (ec) return make_error("key file " + path, "cannot create its directory: " + ec.message());
  return write_file_atomic(path, key.key.reveal(), 0600);
}

Result<SealingKey> load_or_create_key(const std::string& path) {
  if (::access(path.c_str(), F_OK) == 0 || errno != ENOENT) return load_key(path);
  if (auto made = make_private_dirs(std::filesystem::path(path).parent_path()); !made)
    return key_error(path, "cannot create its directory: " + made.error().to_string());
  // Written whole under a name of its own, then linked into place: link()
  // never replaces a key file another process made meanwhile (a rename
  // would, leaving what it sealed unopenable); on EEXIST theirs is loaded.
  std::string tmp = path + ".new.XXXXXX";
  UniqueFd fd(::mkostemp(tmp.data(), O_CLOEXEC));
  if (!fd) return sys_error("key file " + tmp);
  const SealingKey key = new_key(path);
  Status written = write_all(fd.get(), key.key.reveal());  // mkostemp made it 0600
  if (!written.ok()) {
    written = make_error("key file " + tmp, written.error().to_string());
  } else if (::fsync(fd.get()) != 0) {
    written = sys_error("key file " + tmp);
  }
  const int linked = written.ok() ? ::link(tmp.c_str(), path.c_str()) : 0;
  const int link_errno = errno;
  ::unlink(tmp.c_str());
  if (!written.ok()) return written.take_error();
  if (linked != 0 && link_errno != EEXIST) return sys_error("key file " + path, link_errno);
  return load_key(path);
}

Result<KeyLock> KeyLock::take(const std::string& key_path, Mode mode) {
  const std::string path = key_path + ".lock";
  if (mode == Mode::exclusive) {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    if (ec) return make_error("key lock " + path, "cannot create its directory: " + ec.message());
  }
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd && mode == Mode::shared) {
    if (errno == ENOENT) return KeyLock(UniqueFd());
    // A state dir this process may read but not write: an flock needs no write.
    if (errno == EACCES || errno == EROFS)
      fd.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  }
  if (!fd) return sys_error("key lock " + path);
  while (::flock(fd.get(), mode == Mode::exclusive ? LOCK_EX : LOCK_SH) != 0) {
    if (errno != EINTR) return sys_error("lock " + path);
  }
  return KeyLock(std::move(fd));
}

}  // namespace rf::identity
