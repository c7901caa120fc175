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
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
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
};

// A sandbox's place at the proxy; destroying it closes its socket and its
// connections (egress fails closed from then on).
class EgressLease {
 public:
  EgressLease(std::shared_ptr<proxy::EgressProxy> proxy, std::string id, std::string socket_path)
      : proxy_(std::move(proxy)), id_(std::move(id)), socket_path_(std::move(socket_path)) {}
  ~EgressLease() { proxy_->remove_sandbox(id_); }
  EgressLease(const EgressLease&) = delete;
  EgressLease& operator=(const EgressLease&) = delete;
  const std::string& socket_path() const { return socket_path_; }
  proxy::EgressProxy& proxy() { return *proxy_; }

 private:
  std::shared_ptr<proxy::EgressProxy> proxy_;
  std::string id_, socket_path_;
};

class EgressHub {
 public:
  explicit EgressHub(EgressOptions options) : options_(std::move(options)) {}
  // Listens for the sandbox (spec.id, spec.allow, spec.limits.egress_*) on a
  // socket that `uid`/`gid` may connect to.
  Result<std::unique_ptr<EgressLease>> add(const SandboxSpec& spec, uid_t uid, gid_t gid);

 private:
  Result<std::shared_ptr<proxy::EgressProxy>> proxy();

  const EgressOptions options_;
  std::mutex mu_;
  std::shared_ptr<proxy::EgressProxy> proxy_;
};

}  // namespace rf::host
