#include "proxy/resolver.h"

#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <system_error>
#include <thread>

namespace rf::proxy {

namespace {

std::string normalise(std::string_view name) {
  std::string out(name);
  if (!out.empty() && out.back() == '.') out.pop_back();
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

Result<Resolver::Addresses> system_lookup(const std::string& name) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = ::getaddrinfo(name.c_str(), nullptr, &hints, &res);
  if (rc != 0) {
    return make_error("resolve", name + " does not resolve: " + ::gai_strerror(rc));
  }
  Resolver::Addresses out;
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    net::IpAddress a;
    if (ai->ai_family == AF_INET) {
      a = net::IpAddress::from_in(reinterpret_cast<const sockaddr_in*>(ai->ai_addr)->sin_addr);
    } else if (ai->ai_family == AF_INET6) {
      a = net::IpAddress::from_in6(reinterpret_cast<const sockaddr_in6*>(ai->ai_addr)->sin6_addr);
    } else {
      continue;
    }
    if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
  }
  ::freeaddrinfo(res);
  if (out.empty()) return make_error("resolve", name + " does not resolve: no address");
  return out;
}

}  // namespace

Resolver::Resolver(std::map<std::string, Addresses> overrides, bool system_dns,
                   std::function<void(const std::string&)> on_lookup, int threads)
    : system_dns_(system_dns),
      on_lookup_(std::move(on_lookup)),
      max_threads_(static_cast<size_t>(std::max(1, threads))) {
  for (auto& [name, addrs] : overrides) overrides_[normalise(name)] = std::move(addrs);
}

Resolver::~Resolver() {
  shutdown();
  // No thread starts once stopping_ is set: the list is final.
  for (auto& t : threads_) t.join();
}

void Resolver::shutdown() {
  std::deque<Job> dropped;  // destroyed outside the lock
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    dropped.swap(jobs_);
  }
  cv_.notify_all();
}

void Resolver::lookup_loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    ++idle_;
    cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
    --idle_;
    if (stopping_) return;
    Job job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    auto result = system_lookup(job.name);
    lock.lock();
    // Posted under the lock: shutdown() sets stopping_ before `job.io` goes.
    if (stopping_) return;
    boost::asio::post(*job.io, [done = std::move(job.done), r = std::move(result)]() mutable {
      done(std::move(r));
    });
  }
}

void Resolver::resolve(boost::asio::io_context& io, const std::string& name, Callback done) {
  const std::string key = normalise(name);
  if (on_lookup_) on_lookup_(key);
  if (auto it = overrides_.find(key); it != overrides_.end() || !system_dns_) {
    Result<Addresses> r = it != overrides_.end()
                              ? Result<Addresses>(it->second)
                              : Result<Addresses>(make_error(
                                    "resolve", key + " does not resolve: not in the proxy's "
                                                     "resolver overrides, and system DNS is off"));
    if (r.ok() && r->empty()) r = make_error("resolve", key + " does not resolve: no address");
    boost::asio::post(io,
                      [done = std::move(done), r = std::move(r)]() mutable { done(std::move(r)); });
    return;
  }
  std::lock_guard lock(mu_);
  if (stopping_) return;
  jobs_.push_back({&io, key, std::move(done)});
  if (jobs_.size() > idle_ && threads_.size() < max_threads_) {
    try {
      threads_.emplace_back([this] { lookup_loop(); });
    } catch (const std::system_error&) {
      // Out of threads: the lookup waits for a running one (or the connect timeout).
    }
  }
  cv_.notify_one();
}

}  // namespace rf::proxy
