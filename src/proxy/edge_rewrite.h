// What the egress edge does to the bytes of a request that carries a
// credential's placeholder (issue 13; net/edge_credential.h says what the
// deliveries are). Pure functions over untrusted bytes, no I/O; fuzzed by
// fuzz/edge_rewrite_fuzz.cc. The egress proxy uses them on plain requests,
// ringfence-egress-tls on gateway requests and on requests inside the TLS it
// terminates.
//
// Every placeholder of the sandbox is looked for everywhere the edge can see:
// the request target, every header, the body. One found where its credential
// does not say it may be swapped (another header, the path, another host, the
// body without `in=body`, plain HTTP) refuses the request with a 403 whose
// body names the key and the place: a placeholder is worthless, but a client
// sending it somewhere else is a mistake or an attack worth seeing.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "net/edge_credential.h"
#include "net/egress_policy.h"
#include "proxy/request_head.h"

namespace rf::proxy {

struct EdgeRefusal {
  std::string key;     // the credential whose placeholder was found
  std::string reason;  // a sentence for the 403 body and the audit log
};

// A head to send upstream, or why not.
struct EdgeRequest {
  std::optional<EdgeRefusal> refused;
  int bad_request = 0;  // 400: the head cannot be sent anywhere (reason in `error`)
  std::string error;
  std::string head;       // with `Connection: close` and the values swapped in
  int substitutions = 0;  // placeholders swapped in the head
  // Placeholder -> value swaps the body takes (credentials with in=body).
  std::vector<std::pair<std::string, std::string>> body_swaps;
};

// A request to the gateway: "/.rf/gw/KEY[/rest][?query]", in origin form or
// absolute form with the proxy's own authority (127.0.0.1:3128, localhost:3128).
struct GatewayTarget {
  std::string key;
  std::string rest;  // "" or "/v1/messages?beta=true" or "?q"
};
std::optional<GatewayTarget> parse_gateway_target(std::string_view target);

// The head for `gw`'s upstream: the target under its base path, Host the
// upstream, the gateway's header set to the real value (whatever the client
// sent there), hop-by-hop headers dropped, `Connection: close` (or
// keep-alive, for a connection the edge keeps for the sandbox's next request).
EdgeRequest rewrite_gateway_request(const RequestHead& head, const GatewayTarget& target,
                                    const net::EdgeCredential& gw,
                                    std::span<const net::EdgeCredential> all,
                                    bool keep_alive = false);

// A request read inside TLS terminated for `target` (a host bound to at least
// one proxy-delivered credential). The target must be origin form (or https://
// with the same authority); Host must name `target`. Each bound credential's
// placeholder is swapped in the places it names.
EdgeRequest rewrite_intercepted_request(const RequestHead& head, const net::Authority& target,
                                        std::span<const net::EdgeCredential> all,
                                        bool keep_alive = false);

// A plain request the proxy forwards as it is (absolute-form HTTP): any
// placeholder in its head refuses it (the edge swaps only inside TLS to bound
// hosts and at the gateway).
std::optional<EdgeRefusal> check_plain_request(std::string_view head, const net::Authority& target,
                                               std::span<const net::EdgeCredential> all);

// A streaming search-and-swap over a byte stream (a request body, a response):
// each pattern is swapped for its replacement of the same length, or, if it
// has none, stops the stream (a misplaced placeholder). Split across chunks
// at any byte, it is still found; only the bytes of a live partial match are
// held back, so a stream that never starts a pattern passes at once.
class EdgeStream {
 public:
  struct Pattern {
    std::string from;
    std::optional<std::string> to;  // nullopt: finding `from` stops the stream
    std::string key;                // the credential, for the refusal
  };
  explicit EdgeStream(std::vector<Pattern> patterns);

  // Appends to *out what may go on now. Returns the index of a stopping
  // pattern once one is found: nothing from it on was appended, and every
  // later call appends nothing.
  std::optional<size_t> feed(std::string_view chunk, std::string* out);
  // The bytes held back, at the end of the stream, their matches swapped; a
  // stopping pattern among them is returned as feed() returns one (nothing
  // from it on is appended). Nothing after a stop.
  std::optional<size_t> finish(std::string* out);
  const Pattern& pattern(size_t i) const { return patterns_[i]; }
  int swapped() const { return swapped_; }
  bool stopped() const { return stopped_; }

 private:
  std::vector<Pattern> patterns_;
  std::string held_;
  int swapped_ = 0;
  bool stopped_ = false;
};

// The patterns for a request body to `target` (`swaps` from EdgeRequest; every
// other placeholder of `all` stops it), and for a response from an upstream
// the credentials in `bound` are used with (their values swapped back).
std::vector<EdgeStream::Pattern> request_body_patterns(
    std::span<const net::EdgeCredential> all,
    const std::vector<std::pair<std::string, std::string>>& swaps);
std::vector<EdgeStream::Pattern> response_patterns(std::span<const net::EdgeCredential> bound);

// A response on its way to the sandbox: each head (1xx ones, then the final
// one) gets `Connection: close` in place of its Connection and Keep-Alive
// headers (the sandbox's connection ends with the response); the body passes
// as it is, and its framing (Content-Length, chunked, none for HEAD, 204 and
// 304, or until the upstream closes) says where the response ends, so the
// upstream's connection can serve the sandbox's next request.
class ResponseHeads {
 public:
  // `head_request`: the request was HEAD (its answer has no body).
  explicit ResponseHeads(bool head_request = false) : head_request_(head_request) {}
  // Appends to *out what may go on now; true once the final head went out.
  // An error when a head is not HTTP/1.x or larger than 64 KiB (nothing of
  // it was appended), or the chunked framing is broken. Bytes past the end of
  // the response are dropped (and the connection is not reused).
  Result<bool> feed(std::string_view chunk, std::string* out);
  bool in_body() const { return body_; }
  int status() const { return status_; }  // the final head's, once it went out
  // The response ended by its framing (not by the upstream closing).
  bool done() const { return done_; }
  // Done, and the upstream's connection may carry another request.
  bool reusable() const { return done_ && keep_alive_; }

 private:
  enum class Framing { kNone, kLength, kChunked, kUntilClose };
  enum class Chunk { kSize, kData, kDataEnd, kTrailer };
  void start_body(std::string_view head, int status);
  Status take_body(std::string_view chunk, std::string* out);

  const bool head_request_;
  std::string head_;
  bool body_ = false;
  bool done_ = false;
  bool keep_alive_ = true;
  int status_ = 0;
  Framing framing_ = Framing::kUntilClose;
  uint64_t left_ = 0;  // kLength: body bytes; kChunked kData: the chunk's
  Chunk chunk_ = Chunk::kSize;
  std::string line_;  // kChunked: the size or trailer line so far
};

}  // namespace rf::proxy
