#include "core/printable.h"

#include <cstdint>
#include <cstdio>

namespace rf {
namespace {

// The code point at s[i] and its length in bytes; 0 when the bytes there are
// not UTF-8 (a stray continuation byte, a sequence cut short, an overlong
// form, a surrogate, past U+10FFFF).
size_t decode(std::string_view s, size_t i, uint32_t* cp) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  size_t n = 0;
  if ((c & 0xe0) == 0xc0) {
    n = 2;
    *cp = c & 0x1f;
  } else if ((c & 0xf0) == 0xe0) {
    n = 3;
    *cp = c & 0x0f;
  } else if ((c & 0xf8) == 0xf0) {
    n = 4;
    *cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    const auto d = static_cast<unsigned char>(s[i + k]);
    if ((d & 0xc0) != 0x80) return 0;
    *cp = (*cp << 6) | (d & 0x3f);
  }
  if ((n == 2 && *cp < 0x80) || (n == 3 && *cp < 0x800) || (n == 4 && *cp < 0x10000) ||
      *cp > 0x10ffff || (*cp >= 0xd800 && *cp <= 0xdfff)) {
    return 0;
  }
  return n;
}

// Code points past ASCII that a terminal acts on or that reorder or break
// what is shown around them: C1 controls, bidi embeddings, overrides,
// isolates and marks, and the Unicode line and paragraph separators.
bool unicode_control(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9f) || (cp >= 0x202a && cp <= 0x202e) ||
         (cp >= 0x2066 && cp <= 0x2069) || cp == 0x200e || cp == 0x200f || cp == 0x061c ||
         cp == 0x2028 || cp == 0x2029;
}

std::string hex_byte(unsigned char b) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "\\x%02x", b);
  return buf;
}

std::string u_escape(uint32_t cp) {  // cp < 0x10000: four digits
  char buf[16];
  std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
  return buf;
}

// What printable() shows for the code point `cp`; empty: the bytes as they are.
std::string escape_for_line(uint32_t cp) {
  switch (cp) {
    case '\\':
      return "\\\\";
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    default:
      break;
  }
  if (cp < 0x20 || cp == 0x7f) return hex_byte(static_cast<unsigned char>(cp));
  if (unicode_control(cp)) return u_escape(cp);
  return {};
}

}  // namespace

std::string printable(std::string_view text, size_t max_bytes) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    uint32_t cp = 0;
    const size_t n = decode(text, i, &cp);
    std::string escaped =
        n == 0 ? hex_byte(static_cast<unsigned char>(text[i])) : escape_for_line(cp);
    const std::string_view unit = escaped.empty() ? text.substr(i, n) : std::string_view(escaped);
    if (out.size() + unit.size() > max_bytes) return out + "...";
    out.append(unit);
    i += n == 0 ? 1 : n;
  }
  return out;
}

std::string printable_json_text(std::string_view json_text) {
  std::string out;
  out.reserve(json_text.size());
  size_t i = 0;
  while (i < json_text.size()) {
    uint32_t cp = 0;
    const size_t n = decode(json_text, i, &cp);
    if (n == 0) {
      out += "\\ufffd";
      ++i;
      continue;
    }
    // Raw \n, \r and \t can only be whitespace between a dump's tokens
    // (inside its strings they are escaped): kept, or an indented dump
    // would stop being JSON.
    const bool whitespace = cp == '\n' || cp == '\r' || cp == '\t';
    if ((cp < 0x20 && !whitespace) || cp == 0x7f || unicode_control(cp)) {
      out += u_escape(cp);
    } else {
      out.append(json_text.substr(i, n));
    }
    i += n;
  }
  return out;
}

}  // namespace rf
