// The egress proxy's side of ringfence-egress-tls (issue 13): starts the
// helper, tells it the sandboxes' credentials, asks it for their CAs, hands
// it connections, and hears how each ended. One per EgressProxy, started with
// the first sandbox that needs it.
//
// If the helper dies, every connection it held ends (its Done is made here,
// saying so) and the link is dead: the proxy starts a new one at the next
// need and tells it the credentials again. The CAs died with it, so TLS to
// the sandboxes that trusted them fails closed from then on.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "core/result.h"
#include "core/unique_fd.h"
#include "proxy/edge_messages.h"

namespace rf::proxy {

struct EdgeLinkOptions {
  std::string helper;   // ringfence-egress-tls; "" = find it (RINGFENCE_EGRESS_TLS, next to us)
  std::string ca_file;  // the CAs upstreams are verified against; "" = the system's
  // Who the helper runs as once it has read the CAs (nobody by default).
  std::optional<std::pair<uid_t, gid_t>> run_as = std::make_pair(uid_t{65534}, gid_t{65534});
};

class EdgeLink {
 public:
  using OnDone = std::function<void(const edge::Done&)>;
  // `on_done` runs on the link's reader thread: it must only queue.
  static Result<std::unique_ptr<EdgeLink>> start(const EdgeLinkOptions& options, OnDone on_done);
  // Closes the socket (the helper ends its connections and exits), then
  // waits for the helper and the reader.
  ~EdgeLink();
  EdgeLink(const EdgeLink&) = delete;
  EdgeLink& operator=(const EdgeLink&) = delete;

  bool alive() const;
  // The sandbox's CA certificate (PEM), made on the first ask.
  Result<std::string> make_ca(const std::string& sandbox, std::chrono::milliseconds timeout);
  Status send(const edge::Message& message);
  // Hands `conn` over with the sandbox's connection and the upstream's (the
  // kernel passes copies; the caller closes its own).
  Status hand_over(const edge::Conn& conn, int client_fd, int upstream_fd);

 private:
  EdgeLink(UniqueFd fd, pid_t pid, OnDone on_done);
  void read_loop();
  Status send_bytes(const std::string& bytes, const int* fds, size_t nfds);

  UniqueFd fd_;
  const pid_t pid_;
  const OnDone on_done_;
  std::thread reader_;
  std::mutex send_mu_;
  mutable std::mutex mu_;  // guards what follows
  std::condition_variable cv_;
  bool dead_ = false;
  std::map<std::string, edge::CaAnswer> ca_answers_;
  std::set<uint64_t> in_flight_;
};

}  // namespace rf::proxy
