#include "egress_tls/edge_connection.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <array>
#include <cctype>
#include <functional>
#include <optional>

#include "proxy/edge_rewrite.h"
#include "proxy/request_head.h"
#include "proxy/responses.h"

namespace rf::egress_tls {
namespace {

using proxy::edge::ConnKind;
using proxy::edge::Done;

constexpr std::chrono::milliseconds kHandshakeTimeout{10000};
constexpr std::chrono::milliseconds kHeadTimeout{10000};
constexpr int kIdleTimeoutMs = 300000;
constexpr size_t kChunk = 16 * 1024;
// A body of at most this many bytes is read whole, and searched, before the
// upstream is contacted: a misplaced placeholder in it reaches nobody, and the
// request can go on a kept connection (and again on a fresh one if that one
// turns out closed).
constexpr size_t kWholeBody = 64 * 1024;

void set_blocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
}

void set_receive_timeout(int fd, std::chrono::milliseconds t) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(t.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((t.count() % 1000) * 1000);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

std::string body_text(std::string_view why) {
  return "ringfence egress proxy: " + std::string(why) + "\n";
}

// Answers the sandbox itself (nothing of the upstream's reached it), then ends.
void answer(Side& client, int status, std::string_view why, const char* outcome, Done& d) {
  std::string error;
  const std::string out = proxy::http_response(status, body_text(why));
  if (client.write_all(out, &error)) d.bytes_down += out.size();
  client.close_write();
  d.status = status;
  d.outcome = outcome;
  if (d.reason.empty()) d.reason = std::string(why);
}

void refuse(Side& client, const proxy::EdgeRefusal& r, Done& d) {
  d.refused = true;
  if (!r.key.empty()) d.key = r.key;
  d.reason = r.reason;
  answer(client, 403, "refused: " + r.reason, "refused", d);
}

proxy::EdgeRefusal body_refusal(const std::string& key, std::string_view host) {
  return {key, "the placeholder of " + key + " is in the body of a request to " +
                   std::string(host) +
                   ": refused (a body takes it only with in=body, and only for the hosts it "
                   "is bound to)"};
}

// How a relay ended.
enum class Relayed {
  kDone,   // the response ended by its framing
  kEnded,  // the upstream closed after answering, or the exchange broke (the sandbox was told)
  kStale,  // a kept connection failed before any byte of an answer: the request may go again
};

// One request and its response, until the response ends. `first` (the head
// and the body read so far, swapped) goes first; with `complete` that is the
// whole request, and the sandbox is not read any more. `retryable`: `up` is
// a kept connection, and a failure before the answer says nothing to the
// sandbox (kStale). `answered_whole` runs once the response has ended by its
// framing, before its last bytes go to the sandbox: `up` is not touched after
// it, so it may hand the connection on (the sandbox's next request, sent once
// it has read this answer, finds it).
Relayed relay(Side& client, Side& up, std::string_view host, std::string_view first, bool complete,
              bool retryable, proxy::EdgeStream& request, proxy::EdgeStream& response,
              proxy::ResponseHeads& heads, uint64_t max_up, Done& d,
              const std::function<void()>& answered_whole) {
  std::string error;
  bool client_done = complete, answered = false, got_any = false;
  auto to_upstream = [&](std::string_view bytes) {
    if (max_up != 0 && d.bytes_up + bytes.size() > max_up) {
      error = "cut: the sandbox reached its cap of " + std::to_string(max_up) + " bytes sent";
      d.outcome = "byte_cap";
      return false;
    }
    if (!up.write_all(bytes, &error)) return false;
    d.bytes_up += bytes.size();
    return true;
  };
  // The request's body so far: placeholders swapped or, misplaced, stopping it.
  auto from_client = [&](std::string_view chunk, bool end) {
    std::string out;
    auto stop = request.feed(chunk, &out);
    if (end && !stop) stop = request.finish(&out);
    if (!to_upstream(out)) return false;
    if (stop) {
      const proxy::EdgeRefusal r = body_refusal(request.pattern(*stop).key, host);
      error.clear();
      if (answered) {
        d.key = r.key;
        d.reason = r.reason;
        d.refused = true;
      } else {
        refuse(client, r, d);
      }
      return false;
    }
    return true;
  };
  // The response so far: heads rewritten, values swapped back, to the sandbox.
  auto to_client = [&](std::string_view chunk) {
    std::string framed, out;
    auto r = heads.feed(chunk, &framed);
    if (!r) {
      error = r.error().to_string();
      if (!answered) {
        answer(client, 502, "bad response from the upstream: " + error, "upstream_failed", d);
      }
      answered = true;
      return false;
    }
    response.feed(framed, &out);
    if (heads.done()) {
      response.finish(&out);
      answered_whole();
    }
    if (!out.empty()) answered = true;
    if (!client.write_all(out, &error)) return false;
    d.bytes_down += out.size();
    return true;
  };
  auto broke = [&] {
    if (d.outcome.empty()) d.outcome = "completed";
    if (!error.empty()) d.error = error;
    return Relayed::kEnded;
  };

  if (!to_upstream(first)) {
    if (retryable && d.outcome.empty()) return Relayed::kStale;
    if (!answered && d.outcome.empty()) {
      answer(client, 502, "cannot send to " + std::string(host) + ": " + error, "upstream_failed",
             d);
      return Relayed::kEnded;
    }
    return broke();
  }
  std::array<char, kChunk> buf;
  for (;;) {
    bool read_up = up.pending();
    bool read_client = !client_done && client.pending();
    if (!read_up && !read_client) {
      pollfd fds[2] = {{client_done ? -1 : client.fd(), POLLIN, 0}, {up.fd(), POLLIN, 0}};
      const int n = ::poll(fds, 2, kIdleTimeoutMs);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        d.outcome = "idle_timeout";
        d.error = "nothing moved for " + std::to_string(kIdleTimeoutMs) + " ms";
        return Relayed::kEnded;
      }
      read_up = fds[1].revents != 0;
      read_client = !client_done && fds[0].revents != 0;
    }
    if (read_up) {  // the upstream first: its answer may end the exchange
      const ssize_t n = up.read(buf.data(), buf.size(), &error);
      if (n == Side::kAgain) continue;
      if (n <= 0) {
        if (!got_any && retryable) return Relayed::kStale;
        if (!got_any) {
          answer(client, 502,
                 "the upstream closed without an answer" +
                     (error.empty() ? std::string() : ": " + error),
                 "upstream_failed", d);
          return Relayed::kEnded;
        }
        // Framed until the upstream closes: this is its end.
        std::string out;
        response.finish(&out);
        if (client.write_all(out, &error)) d.bytes_down += out.size();
        client.close_write();
        if (n < 0) d.error = error;
        if (d.outcome.empty()) d.outcome = "completed";
        d.status = heads.status();
        return Relayed::kEnded;
      }
      got_any = true;
      if (!to_client({buf.data(), static_cast<size_t>(n)})) {
        if (heads.status() != 0) d.status = heads.status();
        return broke();
      }
      if (heads.done()) {
        client.close_write();
        d.status = heads.status();
        if (d.outcome.empty()) d.outcome = "completed";
        return Relayed::kDone;
      }
      continue;
    }
    if (!read_client) continue;
    const ssize_t n = client.read(buf.data(), buf.size(), &error);
    if (n == Side::kAgain) continue;
    if (n <= 0) {
      // The sandbox sent all it will; its answer may still come.
      client_done = true;
      if (!from_client({}, /*end=*/true) || n < 0) {
        if (n < 0) d.error = error;
        if (d.outcome.empty()) d.outcome = "completed";
        return Relayed::kEnded;
      }
      continue;
    }
    if (!from_client({buf.data(), static_cast<size_t>(n)}, false)) return broke();
  }
}

// Bytes both ways as they are (an intercept target no credential binds any more).
void tunnel(int client, int up, std::string_view initial, uint64_t max_up, Done& d) {
  std::string error;
  Side c(client), u(up);
  if (!initial.empty()) {
    if (!u.write_all(initial, &error)) {
      d.outcome = "completed";
      d.error = error;
      return;
    }
    d.bytes_up += initial.size();
  }
  bool c_eof = false, u_eof = false;
  std::array<char, kChunk> buf;
  while (!c_eof || !u_eof) {
    pollfd fds[2] = {{c_eof ? -1 : client, POLLIN, 0}, {u_eof ? -1 : up, POLLIN, 0}};
    const int n = ::poll(fds, 2, kIdleTimeoutMs);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      d.outcome = "idle_timeout";
      return;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].revents == 0) continue;
      Side& from = i == 0 ? c : u;
      Side& to = i == 0 ? u : c;
      const ssize_t r = from.read(buf.data(), buf.size(), &error);
      if (r == Side::kAgain) continue;
      if (r <= 0) {
        (i == 0 ? c_eof : u_eof) = true;
        to.close_write();
        continue;
      }
      if (i == 0 && max_up != 0 && d.bytes_up + static_cast<uint64_t>(r) > max_up) {
        d.outcome = "byte_cap";
        return;
      }
      if (!to.write_all({buf.data(), static_cast<size_t>(r)}, &error)) {
        d.error = error;
        d.outcome = "completed";
        return;
      }
      (i == 0 ? d.bytes_up : d.bytes_down) += static_cast<uint64_t>(r);
    }
  }
  d.outcome = "completed";
  d.status = 200;
}

// Reads a request head from the sandbox (inside TLS); what came after it goes to *rest.
Result<proxy::RequestHead> read_head(Side& client, std::string* rest) {
  std::string buf;
  std::array<char, 4096> chunk;
  std::string error;
  for (;;) {
    auto end = proxy::find_head_end(buf);
    if (!end) return end.take_error();
    if (*end > 0) {
      auto head = proxy::parse_request_head(std::string_view(buf).substr(0, *end));
      *rest = buf.substr(*end);
      return head;
    }
    if (buf.starts_with("PRI * HTTP/2")) {
      return make_error("request", "HTTP/2 is not supported here (ALPN offers http/1.1 only)");
    }
    const ssize_t n = client.read_some(chunk.data(), chunk.size(), &error);
    if (n <= 0) {
      return make_error("request", n == 0 ? "closed before a complete request head" : error);
    }
    buf.append(chunk.data(), static_cast<size_t>(n));
  }
}

// The body's length when its head says it (Content-Length, no Transfer-Encoding).
std::optional<size_t> content_length(const proxy::RequestHead& head) {
  std::optional<size_t> n;
  for (const auto& h : head.headers) {
    std::string name = h.name;
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (name == "transfer-encoding") return std::nullopt;
    if (name == "content-length") n = std::strtoull(h.value.c_str(), nullptr, 10);
  }
  return n.value_or(0);
}

// What an exchange needs from its kind (gateway, intercept).
struct ExchangeKind {
  net::Authority upstream;
  // The head to send (keep-alive when the whole request is in hand).
  std::function<proxy::EdgeRequest(bool keep_alive)> rewrite;
  // What the body is searched for (and swapped).
  std::function<std::vector<proxy::EdgeStream::Pattern>(const proxy::EdgeRequest&)> body;
  std::vector<proxy::EdgeStream::Pattern> response;  // values swapped back
};

// One request from the sandbox to the upstream: read a small body whole,
// rewrite, search, then send it on a kept connection to the upstream if there
// is one (again on the fresh one if that turns out closed), else on the
// fresh one, and keep that connection for the next request if both messages
// ended by their framing.
void exchange(const EdgeConnectionInput& in, Side& client, const proxy::RequestHead& head,
              std::string rest, const ExchangeKind& kind, Done& d, bool* kept_fresh) {
  const auto length = content_length(head);
  bool complete = false;
  if (length && *length <= kWholeBody) {
    std::array<char, 4096> chunk;
    std::string error;
    while (rest.size() < *length) {
      const ssize_t n = client.read_some(chunk.data(), chunk.size(), &error);
      if (n <= 0) break;
      rest.append(chunk.data(), static_cast<size_t>(n));
    }
    if (rest.size() >= *length) {
      rest.resize(*length);  // the sandbox was told the connection closes: nothing follows
      complete = true;
    }
  }
  proxy::EdgeRequest r = kind.rewrite(complete);
  if (r.bad_request != 0) return answer(client, 400, "bad request: " + r.error, "bad_request", d);
  if (r.refused) return refuse(client, *r.refused, d);
  const std::string& host = kind.upstream.host;
  proxy::EdgeStream request(kind.body(r));
  std::string first = r.head;
  auto stop = request.feed(rest, &first);
  if (!stop && complete) stop = request.finish(&first);
  if (stop) return refuse(client, body_refusal(request.pattern(*stop).key, host), d);
  d.substitutions = r.substitutions;

  const std::string key = host + ":" + std::to_string(kind.upstream.port);
  std::unique_ptr<Side> kept = complete && in.pool ? in.pool->take(key) : nullptr;
  std::unique_ptr<Side> fresh;
  for (;;) {
    Side* up = kept.get();
    if (up == nullptr) {
      auto made = in.tls->connect(in.upstream_fd, kind.upstream, kHandshakeTimeout);
      if (!made) {
        return answer(client, 502, "cannot reach " + key + " over TLS: " + made.error().to_string(),
                      "upstream_failed", d);
      }
      fresh = std::move(*made);
      up = fresh.get();
    }
    proxy::ResponseHeads heads(head.method == "HEAD");
    proxy::EdgeStream response(kind.response);
    // Into the pool before the sandbox reads the end of the answer, or its
    // next request could come first and open a connection of its own.
    const auto keep_for_next = [&] {
      if (!heads.reusable() || !complete || !in.pool) return;
      const bool was_fresh = kept == nullptr;
      std::unique_ptr<Side>& used = was_fresh ? fresh : kept;
      if (!used->keep()) return;
      in.pool->give(key, std::move(used));
      *kept_fresh = was_fresh;
    };
    const uint64_t sent_before = d.bytes_up;
    const Relayed how = relay(client, *up, host, first, complete, /*retryable=*/kept != nullptr,
                              request, response, heads, in.conn.max_up, d, keep_for_next);
    d.restored = response.swapped();
    d.substitutions = r.substitutions + request.swapped();
    if (how == Relayed::kStale) {
      kept.reset();  // closed while it waited: the request goes again, fresh
      d.bytes_up = sent_before;
      continue;
    }
    return;
  }
}

std::vector<net::EdgeCredential> bound_to(const std::vector<net::EdgeCredential>& all,
                                          const net::Authority& target) {
  std::vector<net::EdgeCredential> out;
  for (const auto& c : all) {
    if (c.binds(target)) out.push_back(c);
  }
  return out;
}

void run_gateway(const EdgeConnectionInput& in, Side& client, Done& d, bool* kept) {
  const auto& creds = in.sandbox->creds;
  const net::EdgeCredential* gw = nullptr;
  for (const auto& c : creds) {
    if (c.key == in.conn.key && c.delivery() == net::EdgeDelivery::kGateway) gw = &c;
  }
  d.key = in.conn.key;
  if (gw == nullptr) {
    return answer(client, 403,
                  "no gateway " + in.conn.key + " in this sandbox (revoked, or never bound)",
                  "refused", d);
  }
  auto end = proxy::find_head_end(in.conn.initial);
  auto head = end && *end > 0
                  ? proxy::parse_request_head(std::string_view(in.conn.initial).substr(0, *end))
                  : Result<proxy::RequestHead>(make_error("request", "no complete head"));
  if (!head) return answer(client, 400, "bad request: " + head.error().message, "bad_request", d);
  const auto target = proxy::parse_gateway_target(head->target);
  if (!target || target->key != gw->key) {
    return answer(client, 400, "bad request: not a gateway URL", "bad_request", d);
  }
  ExchangeKind kind;
  kind.upstream = gw->settings.upstream;
  kind.rewrite = [&](bool keep_alive) {
    return proxy::rewrite_gateway_request(*head, *target, *gw, creds, keep_alive);
  };
  // The body goes only to the credential's own upstream, and may well quote a
  // placeholder (a model's conversation holding a tool's output): it is not
  // searched. The target and the headers were.
  kind.body = [](const proxy::EdgeRequest&) { return std::vector<proxy::EdgeStream::Pattern>{}; };
  std::vector<net::EdgeCredential> mine{*gw};
  kind.response = proxy::response_patterns(mine);
  exchange(in, client, *head, in.conn.initial.substr(*end), kind, d, kept);
  if (!d.refused) d.reason = "gateway " + gw->key + " to " + gw->settings.upstream_url();
}

void run_intercept(const EdgeConnectionInput& in, Done& d, bool* kept) {
  const auto& creds = in.sandbox->creds;
  const net::Authority& target = in.conn.target;
  const auto bound = bound_to(creds, target);
  if (bound.empty()) {
    // Nothing to swap for this host any more: the sandbox talks TLS to it itself.
    d.reason = "no credential is bound to " + target.host + " any more: tunnelled";
    return tunnel(in.client_fd, in.upstream_fd, in.conn.initial, in.conn.max_up, d);
  }
  d.key = bound.front().key;
  if (!in.sandbox->ca) {
    d.outcome = "bad_request";
    d.error = "the sandbox has no CA of its own (tls_intercept was off when it started)";
    return;
  }
  auto leaf = in.sandbox->ca->leaf_for(target.host);
  if (!leaf) {
    d.outcome = "bad_request";
    d.error = leaf.error().to_string();
    return;
  }
  std::string sni;
  auto client = in.tls->accept(in.client_fd, in.conn.initial, **leaf, kHandshakeTimeout, &sni);
  if (!client) {
    // An HTTP/2-only client lands here (no ALPN in common): it sees the alert.
    d.outcome = "bad_request";
    d.error = client.error().to_string();
    return;
  }
  Side& c = **client;
  if (!sni.empty()) {
    auto named = net::parse_authority(sni, target.port);
    if (!named || named->host != target.host) {
      return refuse(
          c, {"", "the TLS server name " + sni + " is not the CONNECT target " + target.host}, d);
    }
  }
  std::string rest;
  set_receive_timeout(in.client_fd, kHeadTimeout);
  auto head = read_head(c, &rest);
  set_receive_timeout(in.client_fd, std::chrono::milliseconds(0));
  if (!head) return answer(c, 400, "bad request: " + head.error().message, "bad_request", d);
  ExchangeKind kind;
  kind.upstream = target;
  kind.rewrite = [&](bool keep_alive) {
    return proxy::rewrite_intercepted_request(*head, target, creds, keep_alive);
  };
  kind.body = [&](const proxy::EdgeRequest& r) {
    return proxy::request_body_patterns(creds, r.body_swaps);
  };
  kind.response = proxy::response_patterns(bound);
  exchange(in, c, *head, std::move(rest), kind, d, kept);
  if (!d.refused) d.reason = "proxy delivery to " + target.host;
}

}  // namespace

Done run_edge_connection(const EdgeConnectionInput& in, bool* upstream_kept) {
  *upstream_kept = false;
  Done d;
  d.id = in.conn.id;
  set_blocking(in.client_fd);
  set_blocking(in.upstream_fd);
  if (!in.sandbox) {
    Side client(in.client_fd);
    answer(client, 403, "this sandbox has no credentials at the edge", "refused", d);
    return d;
  }
  if (in.conn.kind == ConnKind::kGateway) {
    Side client(in.client_fd);
    run_gateway(in, client, d, upstream_kept);
  } else {
    run_intercept(in, d, upstream_kept);
  }
  if (d.outcome.empty()) d.outcome = "completed";
  return d;
}

}  // namespace rf::egress_tls
