// One connection a sandbox made to the egress proxy, from accept to close:
// read the request (HTTP head or SOCKS5), decide, resolve, connect, answer,
// tunnel, report. Internal to src/proxy. Everything of one connection runs on
// its io_context's thread; it reaches other threads only through the atomics
// and the mutex of SandboxState.
#pragma once

#include <array>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "net/edge_credential.h"
#include "proxy/edge_link.h"
#include "proxy/edge_messages.h"
#include "proxy/edge_rewrite.h"
#include "proxy/egress_proxy.h"
#include "proxy/resolver.h"
#include "proxy/tunnel.h"

namespace rf::proxy {

class Connection;

struct SandboxState;

// What every connection of the proxy shares.
struct ProxyCore {
  ProxyCore(ProxyOptions o)
      : opts(std::move(o)), resolver(opts.resolve_override, opts.system_dns, opts.on_lookup) {}
  const ProxyOptions opts;
  Resolver resolver;

  // ringfence-egress-tls: started with the first need, started again after
  // it died (and told every sandbox's credentials again).
  Result<EdgeLink*> edge();
  // Ends the helper; nothing is handed to it afterwards. Before the I/O
  // threads stop: its reader posts to them.
  void stop_edge();
  // Sends `m` if the helper runs (a sandbox's end needs no new one).
  void tell_edge(const edge::Message& m);
  // A sandbox whose credentials a restarted helper must hear of.
  void track_credentials(const std::shared_ptr<SandboxState>& sb);
  std::atomic<uint64_t> next_conn_id{1};
  void handed_over(uint64_t id, const std::shared_ptr<Connection>& c);
  void take_back(uint64_t id);

 private:
  void on_edge_done(const edge::Done& d);
  std::mutex edge_mu_;  // guards edge_, stopped_, with_creds_
  std::unique_ptr<EdgeLink> edge_;
  bool edge_stopped_ = false;
  std::map<std::string, std::weak_ptr<SandboxState>> with_creds_;
  std::mutex handed_mu_;  // the reader takes only this one
  // Held until the helper says the connection ended, or it is aborted: no
  // operation of its own keeps a handed-over connection alive.
  std::map<uint64_t, std::shared_ptr<Connection>> handed_;
};

// One sandbox: its policy and caps, and its open connections.
struct SandboxState {
  explicit SandboxState(SandboxEgress s)
      : id(std::move(s.sandbox_id)),
        policy(std::move(s.policy)),
        max_connections(s.max_connections),
        budget(s.max_bytes_sent) {}
  const std::string id;
  const net::EgressPolicy policy;
  const int max_connections;
  ByteBudget budget;
  std::atomic<int> open{0};  // accepted and not yet ended, over-cap ones included

  std::mutex mu;
  bool removed = false;
  std::map<Connection*, std::weak_ptr<Connection>> live;

  // The credentials swapped in at the edge for it (net/edge_credential.h),
  // and who hears what requests did with them.
  std::shared_ptr<const std::vector<net::EdgeCredential>> credentials() const {
    std::lock_guard lock(edge_mu);
    return creds;
  }
  mutable std::mutex edge_mu;  // guards what follows
  std::shared_ptr<const std::vector<net::EdgeCredential>> creds;
  std::function<void(const net::EdgeEvent&)> on_edge_event;
  bool has_ca = false;
};

// How a connection was let in, by the count of the sandbox's open connections.
enum class Admission {
  admit,
  over_capacity,  // more than max_connections: the request is read and answered 429
  flood,          // far more: closed unread
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  using ClientSocket = boost::asio::local::stream_protocol::socket;

  Connection(std::shared_ptr<ProxyCore> core, std::shared_ptr<SandboxState> sandbox,
             boost::asio::io_context& io, ClientSocket client, Admission admission);
  ~Connection();

  void start();
  // Closes at once (remove_sandbox, shutdown). On the io thread.
  void abort();
  // ringfence-egress-tls says how the connection it was handed ended. On the io thread.
  void on_edge_done(const edge::Done& d);
  boost::asio::io_context& io() { return io_; }

 private:
  enum class Phase { head, resolving, connecting, answering, tunnel, edge, done };
  enum class EdgeKind { none, gateway, intercept };
  enum class Proto { unknown, http, http_connect, http_plain, socks5 };

  void read_more();
  void on_bytes();
  void on_http_bytes();
  void on_socks_bytes();
  void decide(net::Authority target);
  void on_resolved(Result<Resolver::Addresses> r);
  void connect_next();
  void on_connected(const net::IpAddress& addr);
  void start_tunnel(std::string initial_up);
  // A request to /.rf/gw/KEY/...: the credential's upstream, through the policy.
  void start_gateway(const GatewayTarget& gw, std::string head_bytes);
  // A misplaced placeholder: 403 naming the credential.
  void refuse_placeholder(const EdgeRefusal& r);
  // CONNECT / SOCKS5 to a host a proxy-delivered credential is bound to.
  bool intercepts(const net::Authority& target) const;
  void hand_over(std::string initial);
  // Sends the error answer fitting the protocol (an HTTP response with
  // `body`, or the SOCKS5 reply that means `status`), then ends.
  void answer(int status, Outcome outcome, std::string body);
  void refuse(int status, Outcome outcome, const std::string& reason);
  void arm(std::chrono::milliseconds after, void (Connection::*on_expiry)());
  void on_head_timeout();
  void on_connect_timeout();
  void on_answer_timeout();
  void finish(Outcome outcome);

  std::shared_ptr<ProxyCore> core_;
  std::shared_ptr<SandboxState> sb_;
  boost::asio::io_context& io_;
  ClientSocket client_;
  boost::asio::ip::tcp::socket upstream_;
  boost::asio::steady_timer timer_;
  uint64_t timer_gen_ = 0;
  const Admission admission_;
  const std::chrono::steady_clock::time_point started_;

  Phase phase_ = Phase::head;
  Proto proto_ = Proto::unknown;
  std::array<char, 4096> rbuf_;
  std::string buf_;       // bytes read and not yet consumed
  std::string leftover_;  // client bytes after the request, for the origin
  std::string origin_head_;
  size_t socks_greeting_len_ = 0;
  net::Authority target_;
  std::vector<net::IpAddress> candidates_;
  size_t next_candidate_ = 0;
  std::string connect_error_;
  std::string out_;  // an answer being written
  Outcome answer_outcome_ = Outcome::completed;
  uint8_t socks_code_ = 0;  // a SOCKS5 reply code chosen before answer()
  std::unique_ptr<Tunnel> tunnel_;
  EdgeKind edge_ = EdgeKind::none;
  std::string edge_key_;      // gateway: the credential named in the URL
  std::string edge_initial_;  // gateway: the head and what followed it
  uint64_t edge_id_ = 0;
  ConnectionEvent ev_;
};

}  // namespace rf::proxy
