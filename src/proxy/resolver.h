// Name resolution for the egress proxy: the owner's override map first (tests
// map names to loopback addresses with it; never /etc/hosts), then, when
// enabled, the system resolver (getaddrinfo) on threads of its own, never on
// the proxy's I/O threads. Only names the policy allowed ever get here.
#pragma once

#include <boost/asio/io_context.hpp>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
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
  // Drops what is queued and joins the lookup threads, so none outlives the
  // resolver: it waits for the lookups in flight, which getaddrinfo's own
  // timeouts bound (resolv.conf's timeout and attempts); their results are dropped.
  // Never called on a lookup thread (`done` runs on `io`).
  ~Resolver();
  Resolver(const Resolver&) = delete;
  Resolver& operator=(const Resolver&) = delete;

  // Resolves `name`; `done` runs on `io`, never inside this call. The error
  // reads "<name> does not resolve: <gai_strerror>". `done` may be destroyed
  // on a resolver thread: it must not own anything tied to `io` (capture a
  // weak_ptr).
  void resolve(boost::asio::io_context& io, const std::string& name, Callback done);

  // Drops queued lookups and results still to come; does not wait. Call
  // before `io` goes.
  void shutdown();

 private:
  struct Job {
    boost::asio::io_context* io;
    std::string name;
    Callback done;
  };
  void lookup_loop();  // one lookup thread, until shutdown

  std::map<std::string, Addresses> overrides_;
  const bool system_dns_;
  const std::function<void(const std::string&)> on_lookup_;
  const size_t max_threads_;
  std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  bool stopping_ = false;
  size_t idle_ = 0;
  std::vector<std::thread> threads_;  // only grows until stopping_, then is joined
};

}  // namespace rf::proxy
