#include "redact/forms.h"

#include <algorithm>

namespace rf::redact {
namespace {

constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
constexpr char kB64Url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

// The characters of base64(`align` zero bytes + value) whose 6 bits all come
// from the value; `at_end`: the value ends the stream, so the last partial
// character (the value's last bits and zeros) and the padding ('=' for
// base64, none for base64url) are its too: `printf %s "$V" | base64`.
std::string base64_aligned(std::string_view value, size_t align, const char* alphabet,
                           bool at_end = false) {
  const size_t bits_from = 8 * align, bits_to = 8 * (align + value.size());
  auto bit = [&](size_t i) -> int {  // bit i of (align zero bytes + value), MSB first
    if (i < bits_from || i >= bits_to) return 0;
    const auto byte = static_cast<unsigned char>(value[(i - bits_from) / 8]);
    return (byte >> (7 - (i - bits_from) % 8)) & 1;
  };
  std::string out;
  for (size_t j = 0; at_end ? 6 * j < bits_to : 6 * j + 6 <= bits_to; ++j) {
    if (6 * j < bits_from) continue;
    int v = 0;
    for (size_t b = 0; b < 6; ++b) v = (v << 1) | bit(6 * j + b);
    out.push_back(alphabet[v]);
  }
  if (at_end && alphabet[62] == '+') out.append((3 - (align + value.size()) % 3) % 3, '=');
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

}  // namespace

std::string url_encoded(std::string_view value, const char* digits, std::string_view keep,
                        bool plus) {
  std::string out;
  for (unsigned char c : value) {
    const bool unreserved = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                            (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~';
    if (unreserved || keep.find(static_cast<char>(c)) != std::string_view::npos) {
      out.push_back(static_cast<char>(c));
    } else if (plus && c == ' ') {
      out.push_back('+');
    } else {
      out.push_back('%');
      out.push_back(digits[c >> 4]);
      out.push_back(digits[c & 15]);
    }
  }
  return out;
}

namespace {

// Inside a shell's double quotes, as `export -p` and `declare -p` print a
// value: \ " $ and ` get a backslash.
std::string shell_quoted(std::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"' || c == '$' || c == '`') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

// JSON as some encoders write it beyond what JSON needs: PHP's json_encode
// escapes '/'; Go's encoding/json escapes <, > and & (as \u003c, \u003e,
// \u0026).
std::string json_more(std::string_view escaped, bool slash, bool html) {
  std::string out;
  for (char c : escaped) {
    if (slash && c == '/') {
      out += "\\/";
    } else if (html && (c == '<' || c == '>' || c == '&')) {
      out += c == '<' ? "\\u003c" : c == '>' ? "\\u003e" : "\\u0026";
    } else {
      out.push_back(c);
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
    case Form::base64_end:
      return "base64";
    case Form::base64url_end:
      return "base64url";
    case Form::hex_lower:
      return "hex";
    case Form::hex_upper:
      return "HEX";
    case Form::url:
      return "url";
    case Form::json:
      return "json";
    case Form::url_lower:
      return "url_lower";
    case Form::url_slash:
      return "url_slash";
    case Form::url_plus:
      return "url_plus";
    case Form::json_slash:
      return "json_slash";
    case Form::json_html:
      return "json_html";
    case Form::shell:
      return "shell";
  }
  return "?";
}

namespace {

// Every form of `value`, in one order whatever the value (so two values'
// lists pair up), equal and short ones kept.
std::vector<std::pair<Form, std::string>> every_form(std::string_view value) {
  std::vector<std::pair<Form, std::string>> out;
  out.emplace_back(Form::raw, std::string(value));
  for (size_t align = 0; align < 3; ++align)
    out.emplace_back(Form::base64, base64_aligned(value, align, kB64));
  for (size_t align = 0; align < 3; ++align)
    out.emplace_back(Form::base64url, base64_aligned(value, align, kB64Url));
  // At the stream's end; empty where that adds no partial character (kept,
  // for the order; too_short drops it).
  for (size_t align = 0; align < 3; ++align) {
    const bool partial = (align + value.size()) % 3 != 0;
    out.emplace_back(Form::base64_end, partial ? base64_aligned(value, align, kB64, true) : "");
    out.emplace_back(Form::base64url_end,
                     partial ? base64_aligned(value, align, kB64Url, true) : "");
  }
  out.emplace_back(Form::hex_lower, hex(value, "0123456789abcdef"));
  out.emplace_back(Form::hex_upper, hex(value, "0123456789ABCDEF"));
  out.emplace_back(Form::url, url_encoded(value));
  out.emplace_back(Form::json, json_escaped(value));
  // Forms that differ from the ones above only for a value holding bytes
  // they treat otherwise ('/', ' ', '&', '$'...): for most tokens they are
  // the same text as one above, and forms_of keeps one.
  out.emplace_back(Form::url_lower, url_encoded(value, "0123456789abcdef"));
  out.emplace_back(Form::url_slash, url_encoded(value, "0123456789ABCDEF", "/"));
  out.emplace_back(Form::url_plus, url_encoded(value, "0123456789ABCDEF", "", /*plus=*/true));
  out.emplace_back(Form::json_slash, json_more(json_escaped(value), true, false));
  out.emplace_back(Form::json_html, json_more(json_escaped(value), false, true));
  out.emplace_back(Form::shell, shell_quoted(value));
  return out;
}

bool too_short(Form f, const std::string& text) {
  return f != Form::raw && text.size() < kMinDerivedForm;
}

}  // namespace

std::vector<std::pair<Form, std::string>> forms_of(std::string_view value) {
  std::vector<std::pair<Form, std::string>> out;
  if (value.empty()) return out;
  for (auto& [f, text] : every_form(value)) {
    if (too_short(f, text)) continue;
    bool known = false;
    for (const auto& [_, have] : out) known = known || have == text;
    if (!known) out.emplace_back(f, std::move(text));
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> paired_forms(std::string_view from,
                                                              std::string_view to) {
  std::vector<std::pair<std::string, std::string>> out;
  if (from.empty()) return out;
  auto a = every_form(from);
  auto b = every_form(to);
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].second == b[i].second || too_short(a[i].first, a[i].second) ||
        too_short(b[i].first, b[i].second))
      continue;
    bool known = false;
    for (const auto& [have, _] : out) known = known || have == a[i].second;
    if (!known) out.emplace_back(std::move(a[i].second), std::move(b[i].second));
  }
  return out;
}

}  // namespace rf::redact
