// AWS Signature Version 4 (issue 12: S3 artifacts), written here on
// libsodium's SHA-256 and HMAC-SHA-256, so the worker needs no AWS SDK. The
// tests check it against botocore's signatures for the same requests
// (tests/artifacts/sigv4_golden.py) and against AWS's published example.
#pragma once

#include <ctime>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rf::artifact {

struct AwsCredentials {
  std::string access_key;
  std::string secret_key;
  std::string session_token;  // "" when none
};

struct SigV4Request {
  std::string method;  // GET, PUT, POST, DELETE
  std::string host;    // as sent in the Host header: host[:port]
  std::string path;    // as sent: each segment URI-encoded (uri_encode_path)
  std::vector<std::pair<std::string, std::string>> query;    // raw, encoded when signing
  std::vector<std::pair<std::string, std::string>> headers;  // more headers to sign
  std::string payload_sha256;                                // hex, or "UNSIGNED-PAYLOAD"
};

struct SigV4Result {
  // The headers to send: x-amz-date, x-amz-content-sha256,
  // x-amz-security-token (with a session token), Authorization.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string canonical_request;
  std::string string_to_sign;
  std::string signed_headers;
};

// `amz_date`: YYYYMMDDTHHMMSSZ (UTC).
SigV4Result sign_v4(const SigV4Request& request, const AwsCredentials& credentials,
                    const std::string& region, const std::string& service,
                    const std::string& amz_date);
std::string amz_date(std::time_t when);

// RFC 3986 unreserved characters stay, every other byte becomes %XX.
std::string uri_encode(std::string_view s);
// The same, keeping '/' (an S3 object key as a path).
std::string uri_encode_path(std::string_view s);
std::string sha256_hex(std::string_view data);

}  // namespace rf::artifact
