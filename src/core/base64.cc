#include "core/base64.h"

#include <array>
#include <cstdint>

namespace rf {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// Each byte's 6-bit value, or -1 for a byte outside the alphabet.
constexpr std::array<int8_t, 256> kValues = [] {
  std::array<int8_t, 256> t{};
  for (auto& v : t) v = -1;
  for (int i = 0; i < 64; ++i) t[static_cast<uint8_t>(kAlphabet[i])] = static_cast<int8_t>(i);
  return t;
}();

}  // namespace

std::string base64_encode(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  auto byte = [&](size_t k) { return static_cast<uint32_t>(static_cast<uint8_t>(in[k])); };
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t n = (byte(i) << 16) | (byte(i + 1) << 8) | byte(i + 2);
    out += kAlphabet[n >> 18];
    out += kAlphabet[(n >> 12) & 63];
    out += kAlphabet[(n >> 6) & 63];
    out += kAlphabet[n & 63];
  }
  if (i + 1 == in.size()) {
    const uint32_t n = byte(i) << 16;
    out += kAlphabet[n >> 18];
    out += kAlphabet[(n >> 12) & 63];
    out += "==";
  } else if (i + 2 == in.size()) {
    const uint32_t n = (byte(i) << 16) | (byte(i + 1) << 8);
    out += kAlphabet[n >> 18];
    out += kAlphabet[(n >> 12) & 63];
    out += kAlphabet[(n >> 6) & 63];
    out += '=';
  }
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  size_t end = text.size();
  while (end > 0 && text[end - 1] == '=' && text.size() - end < 2) --end;
  if (text.size() % 4 != 0 && end != text.size()) return std::nullopt;  // padded, badly
  if (end % 4 == 1) return std::nullopt;
  // Four characters at a time into a string sized once: the report's
  // envelope (~11 KB) is decoded on every verification.
  const size_t tail = end % 4;
  std::string out(end / 4 * 3 + (tail == 0 ? 0 : tail - 1), '\0');
  auto v = [&](size_t k) { return static_cast<int32_t>(kValues[static_cast<uint8_t>(text[k])]); };
  size_t i = 0, o = 0;
  for (; i + 4 <= end; i += 4) {
    const int32_t a = v(i), b = v(i + 1), c = v(i + 2), d = v(i + 3);
    if ((a | b | c | d) < 0) return std::nullopt;
    const uint32_t n = static_cast<uint32_t>(a << 18 | b << 12 | c << 6 | d);
    out[o++] = static_cast<char>(n >> 16);
    out[o++] = static_cast<char>((n >> 8) & 0xff);
    out[o++] = static_cast<char>(n & 0xff);
  }
  if (tail != 0) {  // 2 or 3 characters: 1 or 2 bytes (bits past them ignored)
    uint32_t n = 0;
    for (size_t k = 0; k < tail; ++k) {
      const int32_t x = v(i + k);
      if (x < 0) return std::nullopt;
      n |= static_cast<uint32_t>(x) << (18 - 6 * k);
    }
    out[o++] = static_cast<char>(n >> 16);
    if (tail == 3) out[o++] = static_cast<char>((n >> 8) & 0xff);
  }
  return out;
}

}  // namespace rf
