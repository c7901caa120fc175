#include "artifact/sigv4.h"

#include <sodium.h>

#include <algorithm>
#include <cctype>

namespace rf::artifact {
namespace {

std::string hex(const unsigned char* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) {
    out += digits[p[i] >> 4];
    out += digits[p[i] & 15];
  }
  return out;
}

std::string hmac(std::string_view key, std::string_view data) {
  crypto_auth_hmacsha256_state st;
  crypto_auth_hmacsha256_init(&st, reinterpret_cast<const unsigned char*>(key.data()), key.size());
  crypto_auth_hmacsha256_update(&st, reinterpret_cast<const unsigned char*>(data.data()),
                                data.size());
  unsigned char out[crypto_auth_hmacsha256_BYTES];
  crypto_auth_hmacsha256_final(&st, out);
  return std::string(reinterpret_cast<char*>(out), sizeof out);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Header values: leading and trailing spaces go, inner runs become one.
std::string trim_value(std::string_view v) {
  std::string out;
  bool space = false;
  for (char c : v) {
    if (c == ' ' || c == '\t') {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

std::string encode(std::string_view s, bool keep_slash) {
  static const char* digits = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' ||
        (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += digits[c >> 4];
      out += digits[c & 15];
    }
  }
  return out;
}

}  // namespace

std::string uri_encode(std::string_view s) { return encode(s, false); }
std::string uri_encode_path(std::string_view s) { return encode(s, true); }

std::string sha256_hex(std::string_view data) {
  unsigned char h[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(h, reinterpret_cast<const unsigned char*>(data.data()), data.size());
  return hex(h, sizeof h);
}

std::string amz_date(std::time_t when) {
  std::tm tm{};
  ::gmtime_r(&when, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

SigV4Result sign_v4(const SigV4Request& r, const AwsCredentials& c, const std::string& region,
                    const std::string& service, const std::string& date_time) {
  SigV4Result out;
  const std::string date = date_time.substr(0, 8);
  std::vector<std::pair<std::string, std::string>> headers;
  headers.emplace_back("host", r.host);
  headers.emplace_back("x-amz-content-sha256", r.payload_sha256);
  headers.emplace_back("x-amz-date", date_time);
  if (!c.session_token.empty()) headers.emplace_back("x-amz-security-token", c.session_token);
  for (const auto& [k, v] : r.headers) headers.emplace_back(lower(k), trim_value(v));
  std::sort(headers.begin(), headers.end());
  std::string canonical_headers;
  for (size_t i = 0; i < headers.size(); ++i) {
    // A header given twice is signed once, with its values joined by commas.
    if (i > 0 && headers[i].first == headers[i - 1].first) {
      canonical_headers.pop_back();
      canonical_headers += "," + headers[i].second + "\n";
      continue;
    }
    canonical_headers += headers[i].first + ":" + headers[i].second + "\n";
    out.signed_headers += (out.signed_headers.empty() ? "" : ";") + headers[i].first;
  }
  std::vector<std::pair<std::string, std::string>> query;
  for (const auto& [k, v] : r.query) query.emplace_back(uri_encode(k), uri_encode(v));
  std::sort(query.begin(), query.end());
  std::string canonical_query;
  for (const auto& [k, v] : query) {
    canonical_query += (canonical_query.empty() ? "" : "&") + k + "=" + v;
  }
  out.canonical_request = r.method + "\n" + (r.path.empty() ? "/" : r.path) + "\n" +
                          canonical_query + "\n" + canonical_headers + "\n" + out.signed_headers +
                          "\n" + r.payload_sha256;
  const std::string scope = date + "/" + region + "/" + service + "/aws4_request";
  out.string_to_sign =
      "AWS4-HMAC-SHA256\n" + date_time + "\n" + scope + "\n" + sha256_hex(out.canonical_request);
  const std::string k_date = hmac("AWS4" + c.secret_key, date);
  const std::string k_region = hmac(k_date, region);
  const std::string k_service = hmac(k_region, service);
  const std::string k_signing = hmac(k_service, "aws4_request");
  const std::string sig = hmac(k_signing, out.string_to_sign);
  const std::string signature = hex(reinterpret_cast<const unsigned char*>(sig.data()), sig.size());
  out.headers.emplace_back("x-amz-date", date_time);
  out.headers.emplace_back("x-amz-content-sha256", r.payload_sha256);
  if (!c.session_token.empty()) out.headers.emplace_back("x-amz-security-token", c.session_token);
  out.headers.emplace_back("Authorization", "AWS4-HMAC-SHA256 Credential=" + c.access_key + "/" +
                                                scope + ", SignedHeaders=" + out.signed_headers +
                                                ", Signature=" + signature);
  return out;
}

}  // namespace rf::artifact
