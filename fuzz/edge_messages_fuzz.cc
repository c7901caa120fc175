// libFuzzer target for the messages between the egress proxy and
// ringfence-egress-tls (issue 13): either side may be compromised or buggy,
// so each decodes arbitrary bytes. Nothing may crash, leak or hang, and a
// message that decodes encodes to bytes that decode to the same message and
// encode to the same bytes again.
//
//   CC=clang CXX=clang++ cmake -S . -B build-fuzz -DRF_FUZZ=ON -DRF_TESTS=OFF -DRF_BENCH=OFF
//   cmake --build build-fuzz --target edge_messages_fuzz
//   build-fuzz/fuzz/edge_messages_fuzz -max_total_time=60 fuzz/corpus/edge_messages_fuzz
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "net/edge_credential.h"
#include "proxy/edge_messages.h"

namespace {

namespace edge = rf::proxy::edge;

void check(bool ok) {
  if (!ok) __builtin_trap();
}

void same_cred(const rf::net::EdgeCredential& a, const rf::net::EdgeCredential& b) {
  check(a.key == b.key && a.secret == b.secret && a.delivery() == b.delivery());
  check(rf::net::edge_settings_json(a.settings) == rf::net::edge_settings_json(b.settings));
  check(a.placeholder == b.placeholder && a.value == b.value);
  check(a.value.size() == a.placeholder.size() &&
        a.placeholder.size() >= rf::net::kMinEdgeValueBytes);
}

void same(const edge::Message& a, const edge::Message& b) {
  check(a.index() == b.index());
  if (const auto* x = std::get_if<edge::CaRequest>(&a)) {
    check(x->sandbox == std::get<edge::CaRequest>(b).sandbox);
  } else if (const auto* x = std::get_if<edge::CaAnswer>(&a)) {
    const auto& y = std::get<edge::CaAnswer>(b);
    // An answer with an error has no certificate: the error wins.
    check(x->sandbox == y.sandbox && x->error == y.error);
    if (x->error.empty()) check(x->pem == y.pem);
  } else if (const auto* x = std::get_if<edge::Bind>(&a)) {
    const auto& y = std::get<edge::Bind>(b);
    check(x->sandbox == y.sandbox && x->creds.size() == y.creds.size());
    for (size_t i = 0; i < x->creds.size(); ++i) same_cred(x->creds[i], y.creds[i]);
  } else if (const auto* x = std::get_if<edge::Forget>(&a)) {
    check(x->sandbox == std::get<edge::Forget>(b).sandbox);
  } else if (const auto* x = std::get_if<edge::Conn>(&a)) {
    const auto& y = std::get<edge::Conn>(b);
    check(x->id == y.id && x->sandbox == y.sandbox && x->kind == y.kind && x->key == y.key);
    check(x->target.host == y.target.host && x->target.port == y.target.port);
    check(x->target.port != 0 && !x->target.host.empty());
    check(x->max_up == y.max_up && x->initial == y.initial);
  } else {
    const auto& d = std::get<edge::Done>(a);
    const auto& e = std::get<edge::Done>(b);
    check(d.id == e.id && d.status == e.status && d.outcome == e.outcome);
    check(d.status >= 0 && d.status <= 999);
    check(d.bytes_up == e.bytes_up && d.bytes_down == e.bytes_down);
    check(d.reason == e.reason && d.error == e.error && d.key == e.key);
    check(d.refused == e.refused && d.substitutions == e.substitutions && d.restored == e.restored);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto m = edge::decode(bytes);
  if (!m) {
    check(!m.error().to_string().empty());
    return 0;
  }
  const std::string encoded = edge::encode(*m);
  // Fields left out come back with their defaults: a message near the limit may outgrow it.
  if (encoded.size() > edge::kMaxMessage) return 0;
  auto again = edge::decode(encoded);
  check(again.ok());
  same(*m, *again);
  check(edge::encode(*again) == encoded);
  return 0;
}
