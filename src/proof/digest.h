// SHA-256 and hex, the two encodings every proof (reports, receipts, the
// Merkle log) is made of. libsodium, as everywhere else in ringfence.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace rf::proof {

inline constexpr size_t kHashBytes = 32;

// The 32 raw bytes of SHA-256(data).
std::string sha256(std::string_view data);
// The same, as 64 lowercase hex digits.
std::string sha256_hex(std::string_view data);
std::string to_hex(std::string_view bytes);
// nullopt on an odd length or a character outside [0-9a-fA-F].
std::optional<std::string> from_hex(std::string_view hex);

// SHA-256 over a stream of parts (a call's stdout as it arrives).
class Sha256Stream {
 public:
  Sha256Stream();
  void update(std::string_view data);
  // The hex digest of everything so far; the stream can go on after it.
  std::string hex() const;
  uint64_t bytes() const { return bytes_; }

 private:
  alignas(64) unsigned char state_[512];
  uint64_t bytes_ = 0;
};

}  // namespace rf::proof
