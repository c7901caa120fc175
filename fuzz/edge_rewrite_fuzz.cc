// libFuzzer target for what the egress edge does with a sandbox's bytes and
// an upstream's answer (issue 13): the request head rewritten for the gateway
// and inside intercepted TLS, the plain-HTTP check, the streaming swap over a
// body and a response, and the response heads. The first byte chooses the
// chunk sizes; a request head (if the rest starts with one) is followed by
// the body. Two fixed credentials: a gateway, and a proxy delivery bound to
// api.example.com in every place. Nothing may crash, leak or hang, and:
//   - a rewrite is refused, a 400, or a head that parses again: origin-form
//     target, Host the upstream, `Connection: close`, no hop-by-hop header,
//     no placeholder left anywhere, and no credential's value that the
//     rewrite does not put there;
//   - a raw placeholder in a plain-HTTP head is always refused;
//   - each stream gives, in any chunking, what it gives all at once; without
//     a stop its output is as long as its input (same-length swaps) and holds
//     no placeholder (request) or value (response); a stop emits nothing of it;
//   - response heads give the same bytes and errors in any chunking.
//
//   CC=clang CXX=clang++ cmake -S . -B build-fuzz -DRF_FUZZ=ON -DRF_TESTS=OFF -DRF_BENCH=OFF
//   cmake --build build-fuzz --target edge_rewrite_fuzz
//   build-fuzz/fuzz/edge_rewrite_fuzz -max_total_time=60 fuzz/corpus/edge_rewrite_fuzz
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "net/edge_credential.h"
#include "proxy/edge_rewrite.h"
#include "proxy/request_head.h"

namespace {

using rf::net::EdgeCredential;
using rf::net::EdgeDelivery;
using rf::proxy::EdgeStream;

void check(bool ok) {
  if (!ok) __builtin_trap();
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

bool has(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

EdgeCredential make(std::string key, EdgeDelivery d, std::string_view options, std::string value,
                    std::string placeholder) {
  EdgeCredential c;
  c.key = std::move(key);
  auto s = rf::net::parse_edge_options(d, options);
  check(s.ok());
  c.settings = *s;
  c.value = std::move(value);
  c.placeholder = std::move(placeholder);
  check(c.value.size() == c.placeholder.size());
  return c;
}

// Values begin and end with '-', which no placeholder has: a swap never
// makes a placeholder or a value with the bytes around it.
const std::vector<EdgeCredential>& creds() {
  static const auto* all = new std::vector<EdgeCredential>{
      make("GW_KEY", EdgeDelivery::kGateway, "preset=anthropic", "-gateway-value-001-",
           "rfph_GwPlaceholder1"),
      make("PX_KEY", EdgeDelivery::kProxy,
           "host=api.example.com,in=header:authorization,in=header:x-token,in=basic,in=query,"
           "in=body",
           "-proxy-value-00001-", "rfph_PxPlaceholder1"),
  };
  return *all;
}

struct Chunks {
  uint32_t state;
  size_t next() {
    state = state * 1103515245u + 12345u;
    return 1 + (state >> 16) % 64;
  }
};

// A rewritten head: it parses, and what it says is what the edge promises.
void check_rewritten(const rf::proxy::EdgeRequest& r, std::string_view input_head,
                     std::string_view host, std::string_view foreign_value) {
  check(r.bad_request == 0 || r.bad_request == 400);
  if (r.refused || r.bad_request != 0) {
    check(r.head.empty());
    check(r.refused ? !r.refused->reason.empty() : !r.error.empty());
    return;
  }
  const std::string& out = r.head;
  check(out.size() >= 4 && out.compare(out.size() - 4, 4, "\r\n\r\n") == 0);
  auto again = rf::proxy::parse_request_head(out, {out.size() + 1, out.size() + 1, 1000});
  check(again.ok());
  check(!again->target.empty() && again->target.front() == '/');
  check(!again->headers.empty() && again->headers.front().name == "Host" &&
        again->headers.front().value == host);
  check(again->headers.back().name == "Connection" && again->headers.back().value == "close");
  for (size_t i = 1; i + 1 < again->headers.size(); ++i) {
    const std::string n = lower(again->headers[i].name);
    check(n != "host" && n != "connection" && n != "keep-alive" && n != "proxy-connection" &&
          n != "proxy-authorization" && n != "te" && n != "trailer" && n != "upgrade");
  }
  for (const auto& c : creds()) check(!has(out, c.placeholder));
  // Only the rewrite's own credential is ever swapped in.
  if (!has(input_head, foreign_value)) check(!has(out, foreign_value));
}

void rewrite(std::string_view head_bytes) {
  auto head = rf::proxy::parse_request_head(head_bytes);
  if (!head) return;
  const auto& all = creds();
  const EdgeCredential& gw = all[0];
  const EdgeCredential& px = all[1];

  auto target = rf::proxy::parse_gateway_target(head->target);
  if (!target && (head->target.front() == '/' || head->target.front() == '?')) {
    target = rf::proxy::parse_gateway_target("/.rf/gw/GW_KEY" + head->target);
  }
  if (target) {
    const auto r = rf::proxy::rewrite_gateway_request(*head, *target, gw, all);
    check_rewritten(r, head_bytes, "api.anthropic.com", px.value);
    if (!r.refused && r.bad_request == 0) {
      check(r.substitutions == 1);
      check(has(r.head, "\r\nX-Api-Key: " + gw.value + "\r\n"));
      check(r.body_swaps.empty());
    }
  }

  const rf::net::Authority api{"api.example.com", 443};
  const auto r = rf::proxy::rewrite_intercepted_request(*head, api, all);
  check_rewritten(r, head_bytes, "api.example.com", gw.value);
  if (!r.refused && r.bad_request == 0) {
    check(r.substitutions >= 0);
    check(r.body_swaps.size() == 1 && r.body_swaps[0].first == px.placeholder &&
          r.body_swaps[0].second == px.value);
  }
  // Another host: nothing is bound there, every placeholder is misplaced.
  const auto other = rf::proxy::rewrite_intercepted_request(*head, {"other.example.com", 443}, all);
  if (!other.refused && other.bad_request == 0) check(other.substitutions == 0);
}

void plain(std::string_view head_bytes) {
  const auto r = rf::proxy::check_plain_request(head_bytes, {"example.com", 80}, creds());
  for (const auto& c : creds()) {
    if (has(head_bytes, c.placeholder)) check(r.has_value());
  }
  if (r) check(!r->key.empty() && !r->reason.empty());
}

struct Streamed {
  std::string out;
  std::optional<size_t> stop;  // as feed() returned it
  bool stopped = false;        // by feed() or, held behind a longer partial match, by finish()
  int swapped = 0;
};

Streamed stream(const std::vector<EdgeStream::Pattern>& patterns, std::string_view body,
                Chunks* chunks) {
  EdgeStream s(patterns);
  Streamed r;
  while (!body.empty()) {
    const size_t n = chunks ? std::min(body.size(), chunks->next()) : body.size();
    const size_t before = r.out.size();
    const auto stop = s.feed(body.substr(0, n), &r.out);
    if (r.stop) check(!stop && r.out.size() == before);
    if (stop) r.stop = stop;
    body.remove_prefix(n);
  }
  const size_t before = r.out.size();
  s.finish(&r.out);
  if (r.stop) check(s.stopped() && r.out.size() == before);
  r.stopped = s.stopped();
  r.swapped = s.swapped();
  return r;
}

// Leftmost first, then longest, then the first listed; a stop ends it.
Streamed at_once(const std::vector<EdgeStream::Pattern>& ps, std::string_view text) {
  Streamed r;
  size_t pos = 0;
  for (;;) {
    size_t best = std::string_view::npos, which = 0;
    for (size_t i = 0; i < ps.size(); ++i) {
      const size_t f = text.find(ps[i].from, pos);
      if (f == std::string_view::npos) continue;
      if (f < best || (f == best && ps[i].from.size() > ps[which].from.size())) {
        best = f;
        which = i;
      }
    }
    if (best == std::string_view::npos) break;
    r.out.append(text.substr(pos, best - pos));
    if (!ps[which].to) {
      r.stop = which;
      r.stopped = true;
      return r;
    }
    r.out.append(*ps[which].to);
    ++r.swapped;
    pos = best + ps[which].from.size();
  }
  r.out.append(text.substr(pos));
  return r;
}

void same(const Streamed& a, const Streamed& b) {
  check(a.out == b.out);
  check(a.stopped == b.stopped);
  if (a.stop && b.stop) check(*a.stop == *b.stop);
  if (!a.stopped) check(a.swapped == b.swapped);
}

void streams(std::string_view body, uint32_t seed) {
  const auto& all = creds();
  const auto& px = all[1];
  // The request body: the proxy credential's placeholder swapped, the gateway's stops it.
  const auto request = rf::proxy::request_body_patterns(all, {{px.placeholder, px.value}});
  Chunks chunks{seed};
  const Streamed req = stream(request, body, &chunks);
  same(req, stream(request, body, nullptr));
  same(req, at_once(request, body));
  check(req.stopped == req.stop.has_value());
  if (!req.stop) {
    check(req.out.size() == body.size());
    for (const auto& c : all) check(!has(req.out, c.placeholder));
  } else {
    check(*req.stop == 0);
    check(body.substr(req.out.size()).starts_with(all[0].placeholder));
  }
  // The response: both values back to their placeholders.
  const auto response = rf::proxy::response_patterns(all);
  const Streamed resp = stream(response, body, &chunks);
  same(resp, at_once(response, body));
  check(!resp.stop && resp.out.size() == body.size());
  for (const auto& c : all) check(!has(resp.out, c.value));
  // Patterns from the input itself: short, overlapping, inside each other.
  if (body.size() >= 8) {
    std::vector<EdgeStream::Pattern> mine;
    for (size_t i = 0; i < 3; ++i) {
      const auto b = static_cast<uint8_t>(body[i]);
      const size_t at = (b * 7u + i) % body.size();
      const std::string from(body.substr(at, 1 + b % 5));
      std::optional<std::string> to;
      if (b % 3 != 0) to = std::string(from.size(), static_cast<char>('A' + i));
      mine.push_back({from, to, "K" + std::to_string(i)});
    }
    same(stream(mine, body, &chunks), at_once(mine, body));
  }
}

void heads(std::string_view answer, uint32_t seed) {
  rf::proxy::ResponseHeads whole;
  std::string want;
  const auto w = whole.feed(answer, &want);
  rf::proxy::ResponseHeads pieces;
  std::string got;
  Chunks chunks{seed};
  bool failed = false;
  while (!answer.empty()) {
    const size_t n = std::min(answer.size(), chunks.next());
    auto r = pieces.feed(answer.substr(0, n), &got);
    if (!r) {
      failed = true;
      break;
    }
    answer.remove_prefix(n);
  }
  check(failed == !w.ok());
  if (failed) return;
  check(got == want);
  check(pieces.in_body() == whole.in_body() && pieces.status() == whole.status());
  check(whole.status() >= 0 && whole.status() <= 999);
  if (whole.in_body()) check(*w);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint32_t seed = data[0] | 1u;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  // A small head, then the body.
  rf::proxy::HeadLimits limits;
  limits.max_head_bytes = 4096;
  limits.max_request_line = 2048;
  std::string_view body = rest;
  if (auto end = rf::proxy::find_head_end(rest, limits); end.ok() && *end != 0) {
    const std::string_view head = rest.substr(0, *end);
    rewrite(head);
    plain(head);
    body = rest.substr(*end);
  }
  streams(body, seed);
  heads(rest, seed);
  return 0;
}
