// Credentials swapped in at the egress edge (issue 13): the `gateway` and
// `proxy` deliveries of an identity profile entry, as the egress proxy and its
// TLS helper use them. Pure data and functions, no I/O.
//
// The sandbox holds a placeholder, never the value:
//   gateway  `KEY=gateway:SECRET[,preset=anthropic|openai|github][,upstream=URL]
//            [,header=NAME][,scheme=raw|bearer|basic][,user=NAME][,base_env=VAR][,git=true]`
//            The sandbox gets base_env=http://127.0.0.1:3128/.rf/gw/KEY and
//            KEY=<placeholder>. A plain-HTTP request to that base URL is sent
//            to the upstream over verified TLS, with the header set to the
//            real value (whatever the client put there). git=true also points
//            git at the gateway for the upstream (url.<gateway>/.insteadOf).
//   proxy    `KEY=proxy:SECRET,host=RULE[,host=RULE...][,in=PLACE...]`
//            The sandbox gets KEY=<placeholder> and trusts a CA of its own;
//            the proxy terminates TLS for the bound hosts only (RULE as in
//            --allow: api.example.com, api.example.com:8443, *.example.com)
//            and swaps the placeholder for the value where the entry says:
//            header:NAME (anywhere in that header's value), basic (the user
//            or password of Authorization: Basic), query, body (opt-in).
//            Default: header:authorization and basic.
// Either way a placeholder found anywhere else (another header, the path, the
// body, another host, plain HTTP) refuses the request with a 403 naming the
// key, and the real value in a response from the upstream comes back as the
// placeholder. A placeholder is as long as its value (at least 16 bytes), so
// swapping one for the other never changes a message's length: Content-Length
// and chunk sizes stay true and streams pass as they arrive.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "net/egress_policy.h"

namespace rf::net {

enum class EdgeDelivery { kGateway, kProxy };
std::string_view to_string(EdgeDelivery d);  // "gateway", "proxy"

// Where a proxy-delivered placeholder is swapped.
struct EdgePlace {
  enum class Kind { kHeader, kBasic, kQuery, kBody };
  Kind kind = Kind::kHeader;
  std::string header;             // kHeader: the name, lower case
  std::string to_string() const;  // "header:authorization", "basic", "query", "body"
};

// How the gateway writes the header.
enum class EdgeScheme { kRaw, kBearer, kBasic };

// A delivery's settings, as a profile entry gives them (no key, no value).
struct EdgeSettings {
  EdgeDelivery delivery = EdgeDelivery::kGateway;
  // gateway
  Authority upstream;                    // host and port (443 unless given)
  std::string upstream_path;             // "" or "/v1": prefixed to what follows the gateway URL
  std::string header = "authorization";  // lower case
  EdgeScheme scheme = EdgeScheme::kBearer;
  std::string user = "x-access-token";  // kBasic
  std::string base_env;                 // "" = none
  bool git = false;
  // proxy
  std::vector<std::string> hosts;  // --allow rules
  std::vector<EdgePlace> places;
  EgressPolicy bound;  // `hosts`, parsed once (binds() asks it per connection)

  // The upstream as a URL prefix: "https://host[:port][/path]".
  std::string upstream_url() const;
};

// Parses "opt=value,opt=value" (what follows `gateway:SECRET,` or
// `proxy:SECRET,` in a profile entry). Errors name the option.
Result<EdgeSettings> parse_edge_options(EdgeDelivery delivery, std::string_view options);
// The settings as the store keeps them (profile_entries.delivery_json), and back.
std::string edge_settings_json(const EdgeSettings& s);
Result<EdgeSettings> edge_settings_from_json(EdgeDelivery delivery, std::string_view json);

inline constexpr size_t kMinEdgeValueBytes = 16;
// Where a sandbox with network proxy finds the proxy (sandbox/spec.h's
// kEgressListen: the tool runner listens there and relays to the host).
inline constexpr std::string_view kSandboxProxyAuthority = "127.0.0.1:3128";
inline constexpr std::string_view kPlaceholderPrefix = "rfph_";
inline constexpr std::string_view kGatewayPathPrefix = "/.rf/gw/";

// A fresh placeholder as long as the value it stands for: "rfph_" then
// random letters and digits. Errors when `length` < kMinEdgeValueBytes.
Result<std::string> make_placeholder(size_t length);

// One credential bound to a sandbox at the egress edge.
struct EdgeCredential {
  std::string key;     // the profile key: ANTHROPIC_API_KEY
  std::string secret;  // its secret's name (for events; never the value)
  EdgeSettings settings;
  std::string placeholder;  // what the sandbox holds
  std::string value;        // the real value: host memory only, never logged

  EdgeCredential() = default;
  EdgeCredential(const EdgeCredential&) = default;
  EdgeCredential& operator=(const EdgeCredential&) = default;
  EdgeCredential(EdgeCredential&&) = default;
  EdgeCredential& operator=(EdgeCredential&&) = default;
  ~EdgeCredential();  // zeroes the value

  EdgeDelivery delivery() const { return settings.delivery; }
  // proxy: whether TLS to `target` is terminated for this credential.
  bool binds(const Authority& target) const;
  // gateway: the header's value with the real value in it.
  std::string gateway_header_value() const;
};

// The environment a call gets for a credential: KEY=<placeholder>; for a
// gateway, base_env=<gateway URL>, and with git=true the GIT_CONFIG_KEY_n /
// GIT_CONFIG_VALUE_n pair that sends git to the gateway (n from `*git_index`,
// advanced; the caller sets GIT_CONFIG_COUNT to the final index).
std::vector<std::pair<std::string, std::string>> edge_environment(const EdgeCredential& c,
                                                                  int* git_index);
// "http://127.0.0.1:3128/.rf/gw/KEY"
std::string gateway_url(std::string_view key);

// What a request at the edge did with a credential, for the audit log.
struct EdgeEvent {
  std::string sandbox_id;
  std::string key;
  std::string secret;
  EdgeDelivery delivery = EdgeDelivery::kGateway;
  std::string host;
  uint16_t port = 0;
  bool refused = false;
  int status = 0;         // what the sandbox was answered (the upstream's, or 403)
  std::string reason;     // a refusal: why, naming the key and the place
  int substitutions = 0;  // placeholders swapped in the request
  int restored = 0;       // values swapped back to placeholders in the response
};

}  // namespace rf::net
