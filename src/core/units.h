// Parsing of human quantities: sizes ("512m", "1g", "4096") and durations
// ("30s", "250ms", "2m", "1h"). Errors name the offending text.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.h"

namespace rf {

// Bytes. Suffixes k, m, g, t (powers of 1024), optionally followed by "b"/"ib";
// case-insensitive. No suffix means bytes.
Result<uint64_t> parse_size(std::string_view text);

// Milliseconds. Suffixes ms, s, m, h; a bare number means seconds.
Result<std::chrono::milliseconds> parse_duration(std::string_view text);

// A positive decimal such as "1.5" (cpus).
Result<double> parse_decimal(std::string_view text);

// A count such as "64": digits only, at most 18 of them (it fits a uint64_t).
Result<uint64_t> parse_whole_number(std::string_view text);

// Exact: "512m", "1g", or bytes when no unit divides evenly (for settings).
std::string format_size(uint64_t bytes);
// For people, rounded to one decimal: "812 B", "3.2 MiB", "41.0 GiB".
std::string format_size_human(uint64_t bytes);
std::string format_duration(std::chrono::milliseconds ms);

}  // namespace rf
