// One connection the egress proxy handed to ringfence-egress-tls, run to its
// end on a thread of its own, blocking:
//   gateway    the sandbox's plain-HTTP request to /.rf/gw/KEY/... goes to the
//              credential's upstream over verified TLS with the real header;
//   intercept  TLS from the sandbox is terminated with its CA's certificate
//              for the CONNECT target, the request's placeholders are swapped
//              where their credentials say, and it goes on over verified TLS;
//              with no credential bound to the target any more, the bytes are
//              only relayed (the sandbox then speaks TLS to the real host).
// A request whose whole body is in hand goes on a connection to the upstream
// kept from the sandbox's earlier requests when there is one
// (egress_tls/upstream_pool.h), and its connection is kept in turn when both
// messages ended by their framing. Either way the request's head is searched for every placeholder
// of the sandbox (a misplaced one: 403, nothing sent on), and so is an intercepted request's body
// (a gateway's body goes only to its own upstream and may quote a placeholder: a model's
// conversation holding a tool's output); the response's heads say `Connection: close`, and a value
// the upstream sends back reaches the sandbox as its placeholder.
#pragma once

#include <memory>
#include <vector>

#include "egress_tls/sandbox_ca.h"
#include "egress_tls/tls_side.h"
#include "egress_tls/upstream_pool.h"
#include "net/edge_credential.h"
#include "proxy/edge_messages.h"

namespace rf::egress_tls {

// What the helper knows of one sandbox; a connection keeps the snapshot it
// started with (a revocation applies from the next request).
struct SandboxEntry {
  std::vector<net::EdgeCredential> creds;
  std::shared_ptr<SandboxCa> ca;
};

struct EdgeConnectionInput {
  proxy::edge::Conn conn;
  int client_fd = -1;                           // borrowed: the caller closes it after this returns
  int upstream_fd = -1;                         // borrowed
  std::shared_ptr<const SandboxEntry> sandbox;  // null: the sandbox is unknown here
  TlsContexts* tls = nullptr;
  std::shared_ptr<UpstreamPool> pool;  // the sandbox's kept upstream connections
};

// How the connection ended; *upstream_kept says whether the upstream socket it
// was handed now serves the pool (a duplicate of it: shutting it down would
// end that connection too).
proxy::edge::Done run_edge_connection(const EdgeConnectionInput& in, bool* upstream_kept);

}  // namespace rf::egress_tls
