#include "proxy/connection.h"

#include <boost/asio/write.hpp>

#include "core/log.h"
#include "proxy/request_head.h"
#include "proxy/responses.h"
#include "proxy/socks5.h"

namespace rf::proxy {

namespace asio = boost::asio;
using boost::system::error_code;
using std::chrono::steady_clock;

namespace {

constexpr std::chrono::milliseconds kAnswerTimeout{5000};
constexpr size_t kMaxSocksBytes = 512;  // a greeting or request never needs more

asio::ip::address to_asio(const net::IpAddress& a) {
  if (!a.v6) return asio::ip::address_v4({a.bytes[0], a.bytes[1], a.bytes[2], a.bytes[3]});
  asio::ip::address_v6::bytes_type b;
  std::copy(a.bytes.begin(), a.bytes.end(), b.begin());
  return asio::ip::address_v6(b);
}

uint8_t socks_code_for(int status) {
  switch (status) {
    case 403:
    case 429:
      return socks5::kNotAllowed;
    case 502:
      return socks5::kHostUnreachable;
    case 504:
      return socks5::kTtlExpired;
    default:
      return socks5::kGeneralFailure;
  }
}

std::string bad_request_body(const std::string& why) {
  return "ringfence egress proxy: bad request: " + why + "\n";
}

}  // namespace

Connection::Connection(std::shared_ptr<ProxyCore> core, std::shared_ptr<SandboxState> sandbox,
                       asio::io_context& io, ClientSocket client, Admission admission)
    : core_(std::move(core)),
      sb_(std::move(sandbox)),
      io_(io),
      client_(std::move(client)),
      upstream_(io),
      timer_(io),
      admission_(admission),
      started_(steady_clock::now()) {
  ev_.sandbox_id = sb_->id;
}

Connection::~Connection() {
  if (phase_ != Phase::done) finish(Outcome::closed_by_owner);
}

void Connection::start() {
  if (phase_ != Phase::head) return;
  if (admission_ == Admission::flood) {
    ev_.reason = "sandbox " + sb_->id + " has far more than " +
                 std::to_string(sb_->max_connections) + " connections open: closed unread";
    finish(Outcome::over_capacity);
    return;
  }
  error_code ec;
  client_.native_non_blocking(true, ec);
  arm(core_->opts.head_timeout, &Connection::on_head_timeout);
  read_more();
}

void Connection::abort() {
  if (phase_ != Phase::done) finish(Outcome::closed_by_owner);
}

void Connection::read_more() {
  client_.async_read_some(asio::buffer(rbuf_), [self = shared_from_this()](const error_code& ec,
                                                                           size_t n) {
    if (self->phase_ != Phase::head) return;
    if (ec) {
      self->ev_.error = ec == asio::error::eof ? "closed before a complete request" : ec.message();
      self->finish(Outcome::bad_request);
      return;
    }
    self->buf_.append(self->rbuf_.data(), n);
    self->on_bytes();
  });
}

void Connection::on_bytes() {
  if (proto_ == Proto::unknown) {
    const auto first = static_cast<uint8_t>(buf_[0]);
    if (first == socks5::kVersion && core_->opts.socks5) {
      proto_ = Proto::socks5;
    } else if (first == 4 || first == socks5::kVersion) {
      ev_.reason = first == 4 ? "SOCKS4 is not supported" : "SOCKS5 is not enabled";
      finish(Outcome::bad_request);
      return;
    } else {
      proto_ = Proto::http;
    }
  }
  if (proto_ == Proto::socks5) {
    on_socks_bytes();
  } else {
    on_http_bytes();
  }
}

void Connection::on_http_bytes() {
  const HeadLimits& limits = core_->opts.head_limits;
  auto end = find_head_end(buf_, limits);
  if (!end) {
    ev_.reason = end.error().message;
    answer(400, Outcome::bad_request, bad_request_body(ev_.reason));
    return;
  }
  if (*end == 0) {
    read_more();
    return;
  }
  const std::string head_bytes = buf_.substr(0, *end);
  leftover_ = buf_.substr(*end);
  buf_.clear();
  auto head = parse_request_head(head_bytes, limits);
  if (head) {
    if (auto gw = parse_gateway_target(head->target)) {
      proto_ = Proto::http_plain;
      start_gateway(*gw, head_bytes + leftover_);
      return;
    }
  }
  auto req = head ? interpret_request(*head) : Result<ProxyRequest>(head.take_error());
  if (!req) {
    ev_.reason = req.error().message;
    answer(400, Outcome::bad_request, bad_request_body(ev_.reason));
    return;
  }
  proto_ = req->kind == RequestKind::connect ? Proto::http_connect : Proto::http_plain;
  origin_head_ = std::move(req->origin_head);
  if (auto creds = sb_->credentials()) {
    if (proto_ == Proto::http_plain) {
      // The edge swaps nothing in plain HTTP: a placeholder here is misplaced.
      if (auto r = check_plain_request(head_bytes + leftover_, req->target, *creds)) {
        target_ = req->target;
        ev_.host = target_.host;
        ev_.port = target_.port;
        refuse_placeholder(*r);
        return;
      }
    } else if (intercepts(req->target)) {
      edge_ = EdgeKind::intercept;
    }
  }
  decide(std::move(req->target));
}

bool Connection::intercepts(const net::Authority& target) const {
  auto creds = sb_->credentials();
  if (!creds) return false;
  for (const auto& c : *creds) {
    if (c.binds(target)) return true;
  }
  return false;
}

void Connection::start_gateway(const GatewayTarget& gw, std::string head_bytes) {
  ev_.credential = gw.key;
  ev_.delivery = "gateway";
  auto creds = sb_->credentials();
  const net::EdgeCredential* cred = nullptr;
  if (creds) {
    for (const auto& c : *creds) {
      if (c.key == gw.key && c.delivery() == net::EdgeDelivery::kGateway) cred = &c;
    }
  }
  if (cred == nullptr) {
    target_ = {"127.0.0.1", 3128};
    ev_.reason = "no gateway " + gw.key + " in sandbox " + sb_->id +
                 " (its call has no such key delivered by gateway, or it was revoked)";
    refuse(403, Outcome::refused, ev_.reason);
    return;
  }
  edge_ = EdgeKind::gateway;
  edge_key_ = gw.key;
  edge_initial_ = std::move(head_bytes);
  // The upstream goes through the sandbox's policy like any other target.
  decide(cred->settings.upstream);
}

void Connection::refuse_placeholder(const EdgeRefusal& r) {
  ev_.credential = r.key;
  ev_.placeholder_refused = true;
  if (auto creds = sb_->credentials()) {
    for (const auto& c : *creds) {
      if (c.key == r.key) ev_.delivery = std::string(net::to_string(c.delivery()));
    }
  }
  ev_.reason = r.reason;
  refuse(403, Outcome::refused, r.reason);
}

void Connection::hand_over(std::string initial) {
  auto link = core_->edge();
  if (!link) {
    ev_.error = "cannot start ringfence-egress-tls: " + link.error().to_string();
    if (edge_ == EdgeKind::gateway) {
      answer(502, Outcome::upstream_failed, "ringfence egress proxy: " + ev_.error + "\n");
    } else {
      finish(Outcome::upstream_failed);
    }
    return;
  }
  edge::Conn c;
  c.id = edge_id_ = core_->next_conn_id++;
  c.sandbox = sb_->id;
  c.kind = edge_ == EdgeKind::gateway ? edge::ConnKind::kGateway : edge::ConnKind::kIntercept;
  c.key = edge_key_;
  c.target = target_;
  if (sb_->budget.cap() != 0)
    c.max_up = sb_->budget.cap() - std::min(sb_->budget.cap(), sb_->budget.used());
  c.initial = std::move(initial);
  phase_ = Phase::edge;
  ++timer_gen_;
  timer_.cancel();
  core_->handed_over(c.id, shared_from_this());
  if (auto s = (*link)->hand_over(c, client_.native_handle(), upstream_.native_handle()); !s) {
    core_->take_back(c.id);
    ev_.error = s.error().to_string();
    finish(Outcome::upstream_failed);
    return;
  }
  // The helper holds its own copies now; ours close.
  error_code ec;
  client_.close(ec);
  upstream_.close(ec);
}

void Connection::on_edge_done(const edge::Done& d) {
  if (phase_ != Phase::edge || d.id != edge_id_) return;
  ev_.status = d.status;
  ev_.bytes_sent = d.bytes_up;
  ev_.bytes_received = d.bytes_down;
  if (!d.reason.empty()) ev_.reason = d.reason;
  ev_.error = d.error;
  if (!d.key.empty()) ev_.credential = d.key;
  if (ev_.delivery.empty() && !ev_.credential.empty()) {
    ev_.delivery = edge_ == EdgeKind::gateway ? "gateway" : "proxy";
  }
  ev_.placeholder_refused = d.refused;
  ev_.substitutions = d.substitutions;
  ev_.restored = d.restored;
  if (d.refused) ev_.allowed = false;
  // Charged after the fact: the helper was told how much was left.
  if (d.bytes_up > 0) sb_->budget.reserve(d.bytes_up);
  finish(outcome_from(d.outcome).value_or(Outcome::completed));
}

void Connection::on_socks_bytes() {
  if (buf_.size() > kMaxSocksBytes) {
    ev_.reason = "SOCKS5 handshake longer than " + std::to_string(kMaxSocksBytes) + " bytes";
    answer(400, Outcome::bad_request, "");
    return;
  }
  if (socks_greeting_len_ == 0) {
    auto g = socks5::parse_greeting(buf_);
    if (!g) {
      ev_.reason = g.error().message;
      finish(Outcome::bad_request);
      return;
    }
    if (g->length == 0) {
      read_more();
      return;
    }
    socks_greeting_len_ = g->length;
    buf_.erase(0, g->length);
    out_ = socks5::method_reply(g->no_auth);
    const bool no_auth = g->no_auth;
    asio::async_write(client_, asio::buffer(out_),
                      [self = shared_from_this(), no_auth](const error_code& ec, size_t) {
                        if (self->phase_ != Phase::head) return;
                        if (ec || !no_auth) {
                          self->ev_.reason = ec ? ec.message()
                                                : "no acceptable SOCKS5 authentication method "
                                                  "(only \"no authentication\" is)";
                          self->finish(Outcome::bad_request);
                          return;
                        }
                        self->on_socks_bytes();
                      });
    return;
  }
  auto r = socks5::parse_request(buf_);
  if (!r) {
    ev_.reason = r.error().message;
    answer(400, Outcome::bad_request, "");
    return;
  }
  if (r->length == 0) {
    read_more();
    return;
  }
  leftover_ = buf_.substr(r->length);
  buf_.clear();
  if (r->unsupported != 0) {
    socks_code_ = r->unsupported;
    ev_.reason = r->unsupported == socks5::kCommandNotSupported
                     ? "only the SOCKS5 CONNECT command is supported"
                     : "unsupported SOCKS5 address type";
    answer(400, Outcome::bad_request, "");
    return;
  }
  auto a = net::parse_authority(r->authority, std::nullopt);
  if (!a) {
    ev_.reason = a.error().to_string();
    answer(400, Outcome::bad_request, "");
    return;
  }
  if (intercepts(*a)) edge_ = EdgeKind::intercept;
  decide(std::move(*a));
}

void Connection::decide(net::Authority target) {
  target_ = std::move(target);
  ev_.host = target_.host;
  ev_.port = target_.port;
  if (admission_ == Admission::over_capacity) {
    ev_.reason = "sandbox " + sb_->id + " already has " + std::to_string(sb_->max_connections) +
                 " connections open, the most it may";
    refuse(429, Outcome::over_capacity, ev_.reason);
    return;
  }
  const net::Verdict v = sb_->policy.check_name(target_);
  ev_.reason = v.reason;
  if (!v.allowed) {
    refuse(403, Outcome::refused, v.reason);
    return;
  }
  if (sb_->budget.exhausted()) {
    ev_.error =
        "sandbox " + sb_->id + " has sent " + std::to_string(sb_->budget.cap()) + " bytes, its cap";
    refuse(403, Outcome::byte_cap, ev_.error);
    return;
  }
  ev_.allowed = true;
  phase_ = Phase::resolving;
  arm(core_->opts.connect_timeout, &Connection::on_connect_timeout);
  if (auto literal = net::parse_ip_literal(target_.host)) {
    on_resolved(Resolver::Addresses{*literal});  // no DNS for a literal
    return;
  }
  core_->resolver.resolve(io_, target_.host,
                          [weak = weak_from_this()](Result<Resolver::Addresses> r) {
                            if (auto self = weak.lock()) self->on_resolved(std::move(r));
                          });
}

void Connection::on_resolved(Result<Resolver::Addresses> r) {
  if (phase_ != Phase::resolving) return;
  if (!r) {
    ev_.error = r.error().message;
    answer(502, Outcome::upstream_failed,
           "ringfence egress proxy: cannot reach " + format_authority(target_.host, target_.port) +
               ": " + ev_.error + "\n");
    return;
  }
  std::string refusals;
  for (const net::IpAddress& a : *r) {
    const net::Verdict v = sb_->policy.check_address(target_.host, a, target_.port);
    if (v.allowed) {
      candidates_.push_back(a);
      continue;
    }
    if (!refusals.empty()) refusals += "; ";
    refusals += v.reason;
  }
  if (candidates_.empty()) {
    ev_.allowed = false;
    ev_.reason = refusals;
    refuse(403, Outcome::refused, refusals);
    return;
  }
  phase_ = Phase::connecting;
  connect_next();
}

void Connection::connect_next() {
  if (next_candidate_ == candidates_.size()) {
    ev_.error = connect_error_;
    answer(502, Outcome::upstream_failed,
           "ringfence egress proxy: cannot reach " + format_authority(target_.host, target_.port) +
               ": " + connect_error_ + "\n");
    return;
  }
  const net::IpAddress addr = candidates_[next_candidate_++];
  const asio::ip::tcp::endpoint ep(to_asio(addr), target_.port);
  error_code ec;
  upstream_.close(ec);
  upstream_.open(ep.protocol(), ec);
  if (ec) {
    connect_error_ = "socket: " + ec.message();
    connect_next();
    return;
  }
  upstream_.async_connect(ep, [self = shared_from_this(), addr](const error_code& ec) {
    if (self->phase_ != Phase::connecting) return;
    if (ec) {
      self->connect_error_ = "connect to " +
                             format_authority(addr.to_string(), self->target_.port) + ": " +
                             ec.message();
      self->connect_next();
      return;
    }
    self->on_connected(addr);
  });
}

void Connection::on_connected(const net::IpAddress& addr) {
  ++timer_gen_;
  timer_.cancel();
  ev_.address = addr.to_string();
  error_code ec;
  upstream_.set_option(asio::ip::tcp::no_delay(true), ec);
  upstream_.native_non_blocking(true, ec);
  phase_ = Phase::tunnel;
  ev_.status = 200;
  if (edge_ == EdgeKind::gateway) {
    hand_over(std::move(edge_initial_));
    return;
  }
  if (proto_ == Proto::http_plain) {
    start_tunnel(origin_head_ + leftover_);
    return;
  }
  out_ = proto_ == Proto::socks5 ? socks5::reply(socks5::kSucceeded)
                                 : std::string(kConnectEstablished);
  asio::async_write(client_, asio::buffer(out_),
                    [self = shared_from_this()](const error_code& ec, size_t) {
                      if (self->phase_ != Phase::tunnel) return;
                      if (ec) {
                        self->ev_.error = ec.message();
                        self->finish(Outcome::completed);
                        return;
                      }
                      if (self->edge_ == EdgeKind::intercept) {
                        self->hand_over(std::move(self->leftover_));
                        return;
                      }
                      self->start_tunnel(std::move(self->leftover_));
                    });
}

void Connection::start_tunnel(std::string initial_up) {
  TunnelOptions to;
  to.splice = core_->opts.splice;
  to.pipe_size = core_->opts.pipe_size;
  to.idle_timeout = core_->opts.idle_timeout;
  to.end_on_down_eof = proto_ == Proto::http_plain;
  tunnel_ = std::make_unique<Tunnel>(client_, upstream_, &sb_->budget, to);
  tunnel_->start(shared_from_this(), std::move(initial_up), [this](Tunnel::End e, std::string err) {
    switch (e) {
      case Tunnel::End::closed:
        finish(Outcome::completed);
        return;
      case Tunnel::End::byte_cap:
        ev_.error = "cut: sandbox " + sb_->id + " reached its cap of " +
                    std::to_string(sb_->budget.cap()) + " bytes sent";
        finish(Outcome::byte_cap);
        return;
      case Tunnel::End::idle:
        ev_.error = "nothing moved for " + std::to_string(core_->opts.idle_timeout.count()) + " ms";
        finish(Outcome::idle_timeout);
        return;
      case Tunnel::End::error:
        ev_.error = std::move(err);
        finish(Outcome::completed);
        return;
    }
  });
}

void Connection::answer(int status, Outcome outcome, std::string body) {
  ev_.status = status;
  phase_ = Phase::answering;
  answer_outcome_ = outcome;
  error_code ec;
  upstream_.close(ec);
  if (proto_ == Proto::socks5) {
    out_ = socks5::reply(socks_code_ != 0 ? socks_code_ : socks_code_for(status));
  } else {
    out_ = http_response(status, body);
  }
  arm(kAnswerTimeout, &Connection::on_answer_timeout);
  asio::async_write(client_, asio::buffer(out_),
                    [self = shared_from_this()](const error_code&, size_t) {
                      if (self->phase_ != Phase::answering) return;
                      error_code ec;
                      self->client_.shutdown(ClientSocket::shutdown_send, ec);
                      self->finish(self->answer_outcome_);
                    });
}

void Connection::refuse(int status, Outcome outcome, const std::string& reason) {
  answer(status, outcome, refusal_body(target_.host, target_.port, reason));
}

void Connection::arm(std::chrono::milliseconds after, void (Connection::*on_expiry)()) {
  const uint64_t gen = ++timer_gen_;
  timer_.expires_after(after);
  timer_.async_wait([self = shared_from_this(), gen, on_expiry](const error_code& ec) {
    if (ec || gen != self->timer_gen_) return;
    ((*self).*on_expiry)();
  });
}

void Connection::on_head_timeout() {
  if (phase_ != Phase::head) return;
  ev_.reason =
      "no complete request within " + std::to_string(core_->opts.head_timeout.count()) + " ms";
  if (proto_ == Proto::socks5) {
    finish(Outcome::head_timeout);
    return;
  }
  answer(408, Outcome::head_timeout, "ringfence egress proxy: " + ev_.reason + "\n");
}

void Connection::on_connect_timeout() {
  if (phase_ != Phase::resolving && phase_ != Phase::connecting) return;
  ev_.error = std::string(phase_ == Phase::resolving ? "resolving" : "connecting") +
              " took more than " + std::to_string(core_->opts.connect_timeout.count()) + " ms";
  answer(504, Outcome::upstream_timeout,
         "ringfence egress proxy: timed out reaching " +
             format_authority(target_.host, target_.port) + ": " + ev_.error + "\n");
}

void Connection::on_answer_timeout() {
  if (phase_ == Phase::answering) finish(answer_outcome_);
}

void Connection::finish(Outcome outcome) {
  if (phase_ == Phase::done) return;
  phase_ = Phase::done;
  ++timer_gen_;
  timer_.cancel();
  if (tunnel_) {
    ev_.bytes_sent = tunnel_->bytes_up();
    ev_.bytes_received = tunnel_->bytes_down();
    tunnel_->stop();
  }
  error_code ec;
  client_.close(ec);
  upstream_.close(ec);
  ev_.outcome = outcome;
  ev_.duration =
      std::chrono::duration_cast<std::chrono::microseconds>(steady_clock::now() - started_);
  switch (proto_) {
    case Proto::unknown:
      break;
    case Proto::http:
    case Proto::http_plain:
      ev_.protocol = "http";
      break;
    case Proto::http_connect:
      ev_.protocol = "connect";
      break;
    case Proto::socks5:
      ev_.protocol = "socks5";
      break;
  }
  if (edge_id_ != 0) core_->take_back(edge_id_);
  sb_->open.fetch_sub(1, std::memory_order_relaxed);
  {
    std::lock_guard lock(sb_->mu);
    sb_->live.erase(this);
  }
  if (!ev_.credential.empty()) {
    std::function<void(const net::EdgeEvent&)> hear;
    {
      std::lock_guard lock(sb_->edge_mu);
      hear = sb_->on_edge_event;
    }
    if (hear) {
      net::EdgeEvent e;
      e.sandbox_id = ev_.sandbox_id;
      e.key = ev_.credential;
      e.delivery =
          ev_.delivery == "proxy" ? net::EdgeDelivery::kProxy : net::EdgeDelivery::kGateway;
      e.host = ev_.host;
      e.port = ev_.port;
      e.refused = ev_.placeholder_refused || ev_.outcome == Outcome::refused;
      e.status = ev_.status;
      e.reason = ev_.placeholder_refused || !ev_.allowed ? ev_.reason : ev_.error;
      e.substitutions = ev_.substitutions;
      e.restored = ev_.restored;
      if (auto creds = sb_->credentials()) {
        for (const auto& c : *creds) {
          if (c.key == e.key) e.secret = c.secret;
        }
      }
      try {
        hear(e);
      } catch (const std::exception& ex) {
        spdlog::warn("egress proxy: on_edge_event threw: {}", ex.what());
      }
    }
  }
  spdlog::debug("egress {} {} {} -> {}: {} ({}), {} B up, {} B down", ev_.sandbox_id, ev_.protocol,
                format_authority(ev_.host, ev_.port), ev_.address, to_string(outcome), ev_.reason,
                ev_.bytes_sent, ev_.bytes_received);
  if (core_->opts.on_event) {
    try {
      core_->opts.on_event(ev_);
    } catch (const std::exception& e) {
      spdlog::warn("egress proxy: on_event threw: {}", e.what());
    }
  }
}

Result<EdgeLink*> ProxyCore::edge() {
  std::unique_ptr<EdgeLink> dead;  // destroyed outside the lock
  std::lock_guard lock(edge_mu_);
  if (edge_stopped_) return make_error("egress TLS", "the egress proxy is stopping");
  if (edge_ && edge_->alive()) return edge_.get();
  if (edge_) {
    spdlog::error(
        "egress TLS: ringfence-egress-tls exited; starting it again (the sandboxes' "
        "CAs died with it: their intercepted TLS fails from now on)");
    dead = std::move(edge_);
  }
  auto link = EdgeLink::start(opts.edge, [this](const edge::Done& d) { on_edge_done(d); });
  if (!link) return link.take_error();
  edge_ = std::move(*link);
  for (auto it = with_creds_.begin(); it != with_creds_.end();) {
    auto sb = it->second.lock();
    if (!sb) {
      it = with_creds_.erase(it);
      continue;
    }
    if (auto creds = sb->credentials(); creds && !creds->empty()) {
      warn_unless_ok(edge_->send(edge::Bind{sb->id, *creds}),
                     "egress TLS: telling the credentials of sandbox " + sb->id);
    }
    ++it;
  }
  return edge_.get();
}

void ProxyCore::stop_edge() {
  std::unique_ptr<EdgeLink> gone;
  {
    std::lock_guard lock(edge_mu_);
    edge_stopped_ = true;
    gone = std::move(edge_);
  }
}

void ProxyCore::tell_edge(const edge::Message& m) {
  std::lock_guard lock(edge_mu_);
  if (edge_ && edge_->alive()) warn_unless_ok(edge_->send(m), "egress TLS");
}

void ProxyCore::track_credentials(const std::shared_ptr<SandboxState>& sb) {
  std::lock_guard lock(edge_mu_);
  with_creds_[sb->id] = sb;
}

void ProxyCore::handed_over(uint64_t id, const std::shared_ptr<Connection>& c) {
  std::lock_guard lock(handed_mu_);
  handed_[id] = c;
}

void ProxyCore::take_back(uint64_t id) {
  std::shared_ptr<Connection> gone;  // released outside the lock
  std::lock_guard lock(handed_mu_);
  if (auto it = handed_.find(id); it != handed_.end()) {
    gone = std::move(it->second);
    handed_.erase(it);
  }
}

void ProxyCore::on_edge_done(const edge::Done& d) {
  std::shared_ptr<Connection> c;
  {
    std::lock_guard lock(handed_mu_);
    auto it = handed_.find(d.id);
    if (it == handed_.end()) return;
    c = std::move(it->second);
    handed_.erase(it);
  }
  if (c) asio::post(c->io(), [c, d] { c->on_edge_done(d); });
}

}  // namespace rf::proxy
