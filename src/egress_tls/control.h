// ringfence-egress-tls's side of its socket to the egress proxy: the
// sandboxes' credentials and CAs, and a thread per connection handed over
// (proxy/edge_messages.h has the messages). When the proxy closes the socket
// (the worker ended, or died), every connection is ended and serve() returns.
#pragma once

#include <atomic>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/unique_fd.h"
#include "egress_tls/edge_connection.h"
#include "egress_tls/tls_side.h"
#include "proxy/edge_messages.h"

namespace rf::egress_tls {

class Control {
 public:
  Control(int fd, std::unique_ptr<TlsContexts> tls) : fd_(fd), tls_(std::move(tls)) {}
  // Until the proxy's end closes; then every connection is ended and joined.
  void serve();

 private:
  struct Live {
    std::string sandbox;
    UniqueFd client, upstream;  // closed only after the thread is joined
    std::thread thread;
    std::atomic<bool> upstream_kept{false};  // its socket serves the pool now
    std::atomic<bool> finished{false};
  };
  void on_message(proxy::edge::Message message, std::vector<UniqueFd> fds);
  void send(const proxy::edge::Message& message);
  void start(proxy::edge::Conn conn, UniqueFd client, UniqueFd upstream);
  void end_connections_of(const std::string& sandbox);  // empty: all
  void reap(bool all);

  const int fd_;
  std::unique_ptr<TlsContexts> tls_;
  std::mutex mu_;  // guards sandboxes_ and live_
  std::map<std::string, std::shared_ptr<const SandboxEntry>> sandboxes_;
  std::map<std::string, std::shared_ptr<UpstreamPool>> pools_;  // by sandbox
  std::list<std::unique_ptr<Live>> live_;
  std::mutex send_mu_;
};

}  // namespace rf::egress_tls
