// libFuzzer target for the bytes a sandbox sends the egress proxy before it
// decides: the HTTP request head (found in pieces of fuzzer-chosen sizes, as
// reads deliver it, then parsed and interpreted, authority included) and the
// SOCKS5 greeting and request. Nothing here may crash, leak or hang, and:
//   - a head end is never past the bytes seen or the size limit;
//   - a rewritten origin head parses again, ends with one blank line, and
//     carries no hop-by-hop header.
//
//   CC=clang CXX=clang++ cmake -S . -B build-fuzz -DRF_FUZZ=ON -DRF_TESTS=OFF -DRF_BENCH=OFF
//   make -C build-fuzz proxy_request_fuzz && build-fuzz/fuzz/proxy_request_fuzz -max_total_time=60
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "proxy/request_head.h"
#include "proxy/socks5.h"

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

void check(bool ok) {
  if (!ok) __builtin_trap();
}

void http(std::string_view input, uint32_t state) {
  const rf::proxy::HeadLimits limits;
  std::string buf;
  size_t end = 0;
  while (!input.empty()) {
    state = state * 1103515245u + 12345u;
    const size_t piece = std::min<size_t>(input.size(), 1 + (state >> 16) % 4096);
    buf.append(input.substr(0, piece));
    input.remove_prefix(piece);
    auto e = rf::proxy::find_head_end(buf, limits);
    if (!e) return;
    if (*e != 0) {
      end = *e;
      break;
    }
  }
  if (end == 0) return;
  check(end <= buf.size() && end <= limits.max_head_bytes);
  auto req = rf::proxy::parse_proxy_request(std::string_view(buf).substr(0, end), limits);
  if (!req) return;
  check(req->target.port != 0 && !req->target.host.empty());
  if (req->kind == rf::proxy::RequestKind::connect) {
    check(req->origin_head.empty());
    return;
  }
  const std::string& out = req->origin_head;
  check(out.size() >= 4 && out.compare(out.size() - 4, 4, "\r\n\r\n") == 0);
  auto again = rf::proxy::parse_request_head(out, {out.size() + 1, out.size() + 1, 1000});
  check(again.ok());
  for (const auto& h : again->headers) {
    const std::string n = lower(h.name);
    check(n != "proxy-authorization" && n != "proxy-connection" && n != "keep-alive" &&
          n != "upgrade" && n != "te" && n != "trailer");
    if (n == "connection") check(h.value == "close");
  }
}

void socks(std::string_view input) {
  auto g = rf::proxy::socks5::parse_greeting(input);
  if (!g || g->length == 0) return;
  check(g->length <= input.size());
  auto r = rf::proxy::socks5::parse_request(input.substr(g->length));
  if (!r || r->length == 0) return;
  check(r->length <= input.size() - g->length);
  if (r->unsupported == 0) {
    auto a = rf::net::parse_authority(r->authority, std::nullopt);
    (void)a;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint32_t seed = data[0] | 1u;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  http(rest, seed);
  socks(rest);
  return 0;
}
