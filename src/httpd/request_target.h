// A request's target (path and query) as the API routes it: split into
// percent-decoded path segments and query parameters. Bytes from any client,
// so fuzzed (fuzz/api_request_fuzz.cc).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rf::httpd {

struct Target {
  std::vector<std::string> segments;  // of the path, without empty ones
  std::map<std::string, std::string> query;
  bool ok = true;  // false: bad percent-encoding somewhere
};

Target split_target(std::string_view target);

// A path or value for a query string: every byte but the unreserved ones
// and '/' as %XX.
std::string query_escaped(std::string_view text);

// "%2F" and "+" decoded; nullopt on a "%" not followed by two hex digits.
std::optional<std::string> percent_decode(std::string_view in);

// An Origin header (RFC 6454: scheme "://" host [":" port], nothing else) of
// a page on this host's loopback: http or https, host localhost, an address
// in 127.0.0.0/8 or [::1]. Parsed, never matched as a prefix:
// "http://127.0.0.1.evil.example" and "http://localhost@evil.example" are not.
bool is_loopback_origin(std::string_view origin);

}  // namespace rf::httpd
