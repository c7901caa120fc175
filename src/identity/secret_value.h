// A secret's plaintext in memory (host side): wiped when destroyed, never
// printed. Values live only as long as a resolution or an injection needs them.
#pragma once

#include <string>
#include <string_view>

namespace rf::identity {

class SecretValue {
 public:
  SecretValue() = default;
  explicit SecretValue(std::string bytes) : bytes_(std::move(bytes)) {}
  ~SecretValue() { wipe(); }
  SecretValue(const SecretValue& other) : bytes_(other.bytes_) {}
  SecretValue& operator=(const SecretValue& other) {
    if (this != &other) {
      wipe();
      bytes_ = other.bytes_;
    }
    return *this;
  }
  SecretValue(SecretValue&& other) noexcept : bytes_(std::move(other.bytes_)) { other.wipe(); }
  SecretValue& operator=(SecretValue&& other) noexcept {
    if (this != &other) {
      wipe();
      bytes_ = std::move(other.bytes_);
      other.wipe();
    }
    return *this;
  }

  std::string_view reveal() const { return bytes_; }
  size_t size() const { return bytes_.size(); }
  bool empty() const { return bytes_.empty(); }

 private:
  void wipe();
  std::string bytes_;
};

}  // namespace rf::identity
