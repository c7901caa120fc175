// What the egress proxy reports about every connection it was handed, allowed
// or not: one event per connection, when it ends.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace rf::proxy {

// How a connection ended.
enum class Outcome {
  completed,         // allowed, tunnelled, closed by either side (or reset)
  refused,           // the policy said no (403; SOCKS5 reply 2)
  over_capacity,     // the sandbox had its maximum of connections open (429)
  bad_request,       // a request the proxy does not accept (400)
  head_timeout,      // no complete request head in time (408)
  upstream_failed,   // the name did not resolve, or no address accepted a connection (502)
  upstream_timeout,  // resolving and connecting took longer than connect_timeout (504)
  byte_cap,          // the sandbox's cap on bytes sent was reached: the connection was cut
  idle_timeout,      // nothing moved either way for idle_timeout
  closed_by_owner,   // remove_sandbox or the proxy's destructor closed it
};
std::string_view to_string(Outcome o);

struct ConnectionEvent {
  std::string sandbox_id;
  std::string protocol;  // "connect", "http", "socks5"; "" when the head was unreadable
  std::string host;      // as requested, normalised (lower case, no trailing dot); "" if unknown
  uint16_t port = 0;
  std::string address;  // the address connected to ("127.0.0.1", "::1"); "" if none
  // The policy's verdict: true when both the name and the address passed. Its
  // reason is the rule that allowed it, or why it was refused or failed.
  bool allowed = false;
  std::string reason;
  // The HTTP status the client was answered (200, 400, 403, 408, 429, 502,
  // 504); for SOCKS5 the HTTP status of the same meaning. 0: none was sent
  // (the connection was closed before a request was complete).
  int status = 0;
  Outcome outcome = Outcome::completed;
  std::string error;                      // a socket error that ended the tunnel, else ""
  uint64_t bytes_sent = 0;                // sandbox -> origin, as written to the origin
  uint64_t bytes_received = 0;            // origin -> sandbox, as written to the sandbox
  std::chrono::microseconds duration{0};  // from accept to close
  // A credential at the edge (issue 13): the key a gateway or proxy delivery
  // used, or whose misplaced placeholder refused the request; never a value.
  std::string credential;
  std::string delivery;  // "gateway", "proxy"
  bool placeholder_refused = false;
  int substitutions = 0;  // placeholders swapped for values in the request
  int restored = 0;       // values swapped back to placeholders in the response
};

// The Outcome named `name` (what to_string gives), if any.
std::optional<Outcome> outcome_from(std::string_view name);

// One line of JSON with every field (duration as "duration_us").
std::string to_json(const ConnectionEvent& e);

}  // namespace rf::proxy
