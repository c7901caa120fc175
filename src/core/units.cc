#include "core/units.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <string_view>

namespace rf {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Splits "12.5ms" into the number "12.5" and the suffix "ms".
bool split_number(std::string_view text, double* number, std::string* suffix) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) {
    ++i;
  }
  if (i == 0) return false;
  std::string digits(text.substr(0, i));
  if (digits.find('.') != digits.rfind('.')) return false;
  char* end = nullptr;
  *number = std::strtod(digits.c_str(), &end);
  if (end != digits.c_str() + digits.size() || !std::isfinite(*number)) return false;
  *suffix = lower(text.substr(i));
  return true;
}

struct Unit {
  const char* suffix;
  double factor;
};

// The factor of `suffix` in `units`; nullopt if it is none of them.
template <size_t N>
std::optional<double> factor_of(const std::string& suffix, const Unit (&units)[N]) {
  for (const Unit& u : units) {
    if (suffix == u.suffix) return u.factor;
  }
  return std::nullopt;
}

constexpr Unit kSizeUnits[] = {{"", 1},
                               {"b", 1},
                               {"k", 1024.0},
                               {"m", 1024.0 * 1024},
                               {"g", 1024.0 * 1024 * 1024},
                               {"t", 1024.0 * 1024 * 1024 * 1024}};
constexpr Unit kDurationUnits[] = {{"ms", 1},     {"", 1000},       {"s", 1000},
                                   {"m", 60'000}, {"h", 3'600'000}, {"d", 86'400'000}};

}  // namespace

Result<uint64_t> parse_size(std::string_view text) {
  double n = 0;
  std::string suffix;
  const std::string quoted = "\"" + std::string(text) + "\"";
  if (!split_number(text, &n, &suffix)) {
    return make_error(quoted, "not a size (examples: 4096, 512k, 512m, 1g)");
  }
  // "512mib" and "512mb" are "512m" (and no more: not "512bb" or "512ib").
  const bool unit_letter =
      !suffix.empty() && std::string_view("kmgt").find(suffix[0]) != std::string_view::npos;
  if (unit_letter && (suffix.substr(1) == "ib" || suffix.substr(1) == "b")) suffix.resize(1);
  const auto mult = factor_of(suffix, kSizeUnits);
  if (!mult) {
    return make_error(quoted, "unknown size suffix \"" + suffix + "\" (use k, m, g or t)");
  }
  const double bytes = n * *mult;
  if (bytes >= static_cast<double>(std::numeric_limits<int64_t>::max())) {
    return make_error(quoted, "size too large");
  }
  // Not rounded down: "0.4" as 0 bytes would read as "no cap" where 0 means that.
  if (bytes != std::floor(bytes)) return make_error(quoted, "not a whole number of bytes");
  return static_cast<uint64_t>(bytes);
}

Result<std::chrono::milliseconds> parse_duration(std::string_view text) {
  double n = 0;
  std::string suffix;
  const std::string quoted = "\"" + std::string(text) + "\"";
  if (!split_number(text, &n, &suffix)) {
    return make_error(quoted, "not a duration (examples: 30s, 250ms, 2m, 1h)");
  }
  const auto unit_ms = factor_of(suffix, kDurationUnits);
  if (!unit_ms) {
    return make_error(quoted, "unknown duration suffix \"" + suffix + "\" (use ms, s, m, h or d)");
  }
  const double ms = n * *unit_ms;
  if (ms > 365.0 * 24 * 3'600'000) return make_error(quoted, "duration too long");
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(ms)));
}

Result<double> parse_decimal(std::string_view text) {
  double n = 0;
  std::string suffix;
  if (!split_number(text, &n, &suffix) || !suffix.empty()) {
    return make_error("\"" + std::string(text) + "\"", "not a number");
  }
  return n;
}

Result<uint64_t> parse_whole_number(std::string_view text) {
  bool ok = !text.empty() && text.size() <= 18;
  uint64_t n = 0;
  for (char c : text) {
    ok = ok && c >= '0' && c <= '9';
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  if (!ok) return make_error("\"" + std::string(text) + "\"", "not a whole number");
  return n;
}

std::string format_size(uint64_t bytes) {
  static const char* kUnits[] = {"", "k", "m", "g", "t"};
  int u = 0;
  while (u < 4 && bytes >= 1024 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++u;
  }
  return std::to_string(bytes) + kUnits[u];
}

std::string format_size_human(uint64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes);
  int u = 0;
  while (u < 5 && v >= 1024) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, kUnits[u]);
  return buf;
}

std::string format_duration(std::chrono::milliseconds ms) {
  const auto n = ms.count();
  if (n % 3'600'000 == 0 && n != 0) return std::to_string(n / 3'600'000) + "h";
  if (n % 60'000 == 0 && n != 0) return std::to_string(n / 60'000) + "m";
  if (n % 1000 == 0) return std::to_string(n / 1000) + "s";
  return std::to_string(n) + "ms";
}

}  // namespace rf
