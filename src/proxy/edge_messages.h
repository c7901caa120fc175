// The messages between the egress proxy (in the worker) and its TLS helper,
// ringfence-egress-tls (issue 13). One message per SOCK_SEQPACKET datagram: a
// JSON object, then, for `conn`, a newline and the raw bytes the proxy already
// read from the sandbox; a `conn` carries two fds (SCM_RIGHTS): the sandbox's
// connection, then the upstream's, connected after the policy allowed it.
//
//   proxy -> helper
//     {"op":"ca","sandbox":ID}                     make the sandbox's CA (once)
//     {"op":"bind","sandbox":ID,"creds":[...]}     the sandbox's credentials, all
//                                                  of them (replaces; values base64)
//     {"op":"forget","sandbox":ID}                 drop them and the CA, end its
//                                                  connections
//     {"op":"conn","id":N,"sandbox":ID,"kind":"gateway"|"intercept",
//      "key":K,"host":H,"port":P,"max_up":B}\n<bytes>   + 2 fds
//   helper -> proxy
//     {"op":"ca","sandbox":ID,"pem":PEM} or {"op":"ca","sandbox":ID,"error":TEXT}
//     {"op":"done","id":N,...}                     how connection N ended
//
// Both sides check every field; a message that does not parse is an error
// naming the field, never a crash (fuzz/edge_messages_fuzz.cc).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/result.h"
#include "net/edge_credential.h"

namespace rf::proxy::edge {

inline constexpr size_t kMaxMessage = 256 * 1024;

struct CaRequest {
  std::string sandbox;
};
struct CaAnswer {
  std::string sandbox;
  std::string pem;    // the CA certificate
  std::string error;  // or why there is none
};
struct Bind {
  std::string sandbox;
  std::vector<net::EdgeCredential> creds;
};
struct Forget {
  std::string sandbox;
};
enum class ConnKind { kGateway, kIntercept };
struct Conn {
  uint64_t id = 0;
  std::string sandbox;
  ConnKind kind = ConnKind::kGateway;
  std::string key;        // gateway: the credential named in the URL
  net::Authority target;  // the upstream (gateway) or the CONNECT target (intercept)
  uint64_t max_up = 0;    // bytes it may still send upstream; 0: no cap
  std::string initial;    // bytes already read from the sandbox (gateway: the head and more)
};
struct Done {
  uint64_t id = 0;
  int status = 0;           // what the sandbox was answered (0: none)
  std::string outcome;      // proxy::Outcome's name
  uint64_t bytes_up = 0;    // to the upstream, after the swaps
  uint64_t bytes_down = 0;  // to the sandbox
  std::string reason;       // a refusal, or the rule that allowed it
  std::string error;        // what ended it, if not the ends closing
  std::string key;          // the credential used or misused ("" when none)
  bool refused = false;     // a placeholder was misplaced (403)
  int substitutions = 0;
  int restored = 0;
};

using Message = std::variant<CaRequest, CaAnswer, Bind, Forget, Conn, Done>;

std::string encode(const Message& m);
Result<Message> decode(std::string_view bytes);

}  // namespace rf::proxy::edge
