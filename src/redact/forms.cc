#include "redact/forms.h"

#include <algorithm>

namespace rf::redact {
namespace {

constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
constexpr char kB64Url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

// The characters of base64(`align` zero bytes + value) whose 6 bits all come
// from the value.
std::string base64_aligned(std::string_view value, size_t align, const char* alphabet) {
  const size_t bits_from = 8 * align, bits_to = 8 * (align + value.size());
  auto bit = [&](size_t i) -> int {  // bit i of (align zero bytes + value), MSB first
    if (i < bits_from || i >= bits_to) return 0;
    const auto byte = static_cast<unsigned char>(value[(i - bits_from) / 8]);
    return (byte >> (7 - (i - bits_from) % 8)) & 1;
  };
  std::string out;
  for (size_t j = 0; 6 * j + 6 <= bits_to; ++j) {
    if (6 * j < bits_from) continue;
    int v = 0;
    for (size_t b = 0; b < 6; ++b) v = (v << 1) | bit(6 * j + b);
    out.push_back(alphabet[v]);
  }
  return out;
}

std::string hex(std::string_view value, const char* digits) {
  std::string out;
  out.reserve(2 * value.size());
  for (unsigned char c : value) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

std::string url_encoded(std::string_view value) {
  std::string out;
  for (unsigned char c : value) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back("0123456789ABCDEF"[c >> 4]);
      out.push_back("0123456789ABCDEF"[c & 15]);
    }
  }
  return out;
}

std::string json_escaped(std::string_view value) {
  std::string out;
  for (unsigned char c : value) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out.push_back("0123456789abcdef"[c >> 4]);
          out.push_back("0123456789abcdef"[c & 15]);
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  return out;
}

}  // namespace

std::string_view to_string(Form f) {
  switch (f) {
    case Form::raw:
      return "raw";
    case Form::base64:
      return "base64";
    case Form::base64url:
      return "base64url";
    case Form::hex_lower:
      return "hex";
    case Form::hex_upper:
      return "HEX";
    case Form::url:
      return "url";
    case Form::json:
      return "json";
  }
  return "?";
}

std::vector<std::pair<Form, std::string>> forms_of(std::string_view value) {
  std::vector<std::pair<Form, std::string>> out;
  auto add = [&](Form f, std::string text) {
    if (f != Form::raw && text.size() < kMinDerivedForm) return;
    for (const auto& [_, have] : out) {
      if (have == text) return;
    }
    out.emplace_back(f, std::move(text));
  };
  if (value.empty()) return out;
  add(Form::raw, std::string(value));
  for (size_t align = 0; align < 3; ++align) add(Form::base64, base64_aligned(value, align, kB64));
  for (size_t align = 0; align < 3; ++align)
    add(Form::base64url, base64_aligned(value, align, kB64Url));
  add(Form::hex_lower, hex(value, "0123456789abcdef"));
  add(Form::hex_upper, hex(value, "0123456789ABCDEF"));
  add(Form::url, url_encoded(value));
  add(Form::json, json_escaped(value));
  return out;
}

std::vector<std::pair<std::string, std::string>> paired_forms(std::string_view from,
                                                              std::string_view to) {
  std::vector<std::pair<std::string, std::string>> out;
  auto add = [&](Form f, std::string a, std::string b) {
    if (a == b || (f != Form::raw && a.size() < kMinDerivedForm)) return;
    for (const auto& [have, _] : out) {
      if (have == a) return;
    }
    out.emplace_back(std::move(a), std::move(b));
  };
  if (from.empty()) return out;
  add(Form::raw, std::string(from), std::string(to));
  for (size_t align = 0; align < 3; ++align) {
    add(Form::base64, base64_aligned(from, align, kB64), base64_aligned(to, align, kB64));
    add(Form::base64url, base64_aligned(from, align, kB64Url), base64_aligned(to, align, kB64Url));
  }
  add(Form::hex_lower, hex(from, "0123456789abcdef"), hex(to, "0123456789abcdef"));
  add(Form::hex_upper, hex(from, "0123456789ABCDEF"), hex(to, "0123456789ABCDEF"));
  add(Form::url, url_encoded(from), url_encoded(to));
  add(Form::json, json_escaped(from), json_escaped(to));
  return out;
}

}  // namespace rf::redact
