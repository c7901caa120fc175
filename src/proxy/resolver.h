// Name resolution for the egress proxy: the owner's override map first (tests
// map names to loopback addresses with it; never /etc/hosts), then, when
// enabled, the system resolver (getaddrinfo) on threads of its own, never on
// the proxy's I/O threads. Only names the policy allowed ever get here.
#pragma once

#include <boost/asio/io_context.hpp>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "net/egress_policy.h"

namespace rf::proxy {

class Resolver {
 public:
  using Addresses = std::vector<net::IpAddress>;
  using Callback = std::function<void(Result<Addresses>)>;

  // `overrides` keys are compared lower-cased without a trailing dot.
  // `on_lookup` is told every name looked up (override or system), before the
  // lookup; it must be thread-safe.
  Resolver(std::map<std::string, Addresses> overrides, bool system_dns,
           std::function<void(const std::string&)> on_lookup, int threads = 4);
  ~Resolver();  // does not wait for system lookups in flight; their results are dropped
  Resolver(const Resolver&) = delete;
  Resolver& operator=(const Resolver&) = delete;

  // Resolves `name`; `done` runs on `io`, never inside this call. The error
  // reads "<name> does not resolve: <gai_strerror>". `done` may be destroyed
  // on a resolver thread: it must not own anything tied to `io` (capture a
  // weak_ptr).
  void resolve(boost::asio::io_context& io, const std::string& name, Callback done);

  // Drops queued lookups and results still to come. Call before `io` goes.
  void shutdown();

 private:
  struct Shared;
  std::map<std::string, Addresses> overrides_;
  bool system_dns_;
  std::function<void(const std::string&)> on_lookup_;
  int max_threads_;
  std::shared_ptr<Shared> shared_;
};

}  // namespace rf::proxy
