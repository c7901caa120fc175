// Egress for native sandboxes with network proxy (host side). One egress
// proxy (src/proxy/egress_proxy.h) per backend, started with the first such
// sandbox and shared by all of them; each sandbox gets its own listening socket
// <socket_dir>/<id>.sock, owned by the sandbox user's host uid (the runner's
// bridge connects to it from inside, where it is bound at
// /.ringfence/proxy.sock). Each connection is logged as one JSON line (INFO).
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "net/edge_credential.h"
#include "net/egress_policy.h"
#include "net/resolve_override.h"
#include "proxy/egress_proxy.h"
#include "sandbox/spec.h"

namespace rf::host {

struct EgressOptions {
  std::string socket_dir = "/run/ringfence/egress";  // made 0711, root's
  // The proxy's resolver override, for tests: names mapped to addresses here
  // are never looked up in DNS (the addresses still pass the policy).
  net::ResolveOverride resolve;
  // ringfence-egress-tls (the gateway and proxy deliveries): where it is and
  // the CAs upstreams are verified against ("" = the system's).
  proxy::EdgeLinkOptions edge;
  // The trust bundle a sandbox with tls_intercept gets, with its CA added.
  std::string system_bundle = "/etc/ssl/certs/ca-certificates.crt";
};

// What a sandbox with tls_intercept trusts: a file on the host the backend
// binds read-only over the image's bundle (kTrustBundleInSandbox), holding
// the host's bundle with the sandbox's CA added.
struct SandboxTrust {
  std::string bundle;  // <socket_dir>/<id>.trust.pem
};

// A sandbox's place at the proxy; destroying it closes its socket and its
// connections (egress fails closed from then on) and removes its trust files.
class EgressLease {
 public:
  EgressLease(std::shared_ptr<proxy::EgressProxy> proxy, std::string id, std::string socket_path)
      : proxy_(std::move(proxy)), id_(std::move(id)), socket_path_(std::move(socket_path)) {}
  ~EgressLease();
  EgressLease(const EgressLease&) = delete;
  EgressLease& operator=(const EgressLease&) = delete;
  const std::string& socket_path() const { return socket_path_; }
  proxy::EgressProxy& proxy() { return *proxy_; }
  // tls_intercept only.
  const std::optional<SandboxTrust>& trust() const { return trust_; }
  // The credentials the proxy swaps in for this sandbox (replaces).
  Status bind_credentials(std::vector<net::EdgeCredential> creds,
                          std::function<void(const net::EdgeEvent&)> on_event) {
    return proxy_->bind_credentials(id_, std::move(creds), std::move(on_event));
  }

 private:
  friend class EgressHub;
  std::shared_ptr<proxy::EgressProxy> proxy_;
  std::string id_, socket_path_;
  std::optional<SandboxTrust> trust_;
};

class EgressHub {
 public:
  explicit EgressHub(EgressOptions options) : options_(std::move(options)) {}
  // Listens for the sandbox (spec.id, spec.allow, spec.limits.egress_*) on a
  // socket that `uid`/`gid` may connect to; with spec.tls_intercept, has its
  // CA made and writes its trust files.
  Result<std::unique_ptr<EgressLease>> add(const SandboxSpec& spec, uid_t uid, gid_t gid);

 private:
  Result<std::shared_ptr<proxy::EgressProxy>> proxy();
  Status write_trust(EgressLease& lease);

  const EgressOptions options_;
  std::mutex mu_;
  std::shared_ptr<proxy::EgressProxy> proxy_;
};

}  // namespace rf::host
