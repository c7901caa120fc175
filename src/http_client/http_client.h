// An HTTP/1.1 client for the worker's own requests (issue 12): in_process
// http and llm steps, S3 artifacts. Boost.Beast parses; docker_api's
// transports carry it (TLS through the ringfence-docker-tls relay, so OpenSSL
// stays out of the worker). One request per connection.
//
// With an egress policy, a request goes only where a sandbox with the same
// allow rules could go: the name is checked before any DNS query, every
// address it resolves to is checked before connecting (the policy's step 2:
// loopback, link-local and private space only when a rule allows them), and
// the connection is made here, to the checked address; TLS then verifies the
// certificate against the name. Redirects are not followed.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"
#include "net/egress_policy.h"
#include "net/resolve_override.h"

namespace rf::http {

struct Url {
  bool tls = false;
  std::string host;  // a name, or an IP literal without brackets
  uint16_t port = 0;
  std::string target;             // path and query, "/" at least
  std::string text;               // as given
  std::string authority() const;  // host[:port] for the Host header
  std::string origin() const;     // scheme://host[:port], without the path
};

// Parses http:// and https:// URLs. Refused, naming the URL: another scheme,
// userinfo, a bad port, a fragment, spaces or control bytes.
Result<Url> parse_url(std::string_view text);

using Headers = std::vector<std::pair<std::string, std::string>>;

struct Request {
  std::string method = "GET";
  std::string url;
  Headers headers;
  std::string body;
};

struct Response {
  unsigned status = 0;
  Headers headers;
  std::string body;
  // The first header of that name (case-insensitive), "" when none.
  std::string header(std::string_view name) const;
};

struct Options {
  std::chrono::milliseconds timeout{60'000};  // connect and the whole exchange
  uint64_t body_limit = 32ull << 20;
  const net::EgressPolicy* policy = nullptr;
  // Names resolved without DNS (the worker's sandbox.proxy_resolve, as its
  // egress proxy uses it); the addresses still pass the policy.
  net::ResolveOverride resolve;
  std::string ca_file;  // TLS: verify against this CA; "" = the system's
  bool tls_verify = true;
  // When set, the body is handed over piece by piece as it arrives (an event
  // stream) instead of kept in Response::body; returning false ends the
  // exchange there (the answer so far is returned). `timeout` still bounds the
  // whole exchange.
  std::function<bool(std::string_view)> on_body;
};

// What failed, for callers that retry or explain.
enum class Failure { kNone, kRefused, kUnreachable, kTimeout, kBadAnswer };

// One exchange. Errors name the method and URL ("POST https://x/v1: ...");
// `failure` says which kind.
Result<Response> fetch(const Request& request, const Options& options, Failure* failure = nullptr);

}  // namespace rf::http
