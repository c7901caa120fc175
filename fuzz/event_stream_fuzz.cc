// The event stream `call --api` reads from serve (GET /v1/calls/ID, issue 40)
// is a remote peer's bytes: the reader must not crash on any of them, must
// give the same events however the bytes are split into reads, and must
// never hold a line longer than its bound.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "http_client/event_stream.h"

namespace {

std::vector<rf::http::Event> read_all(std::string_view bytes, size_t piece, bool* failed) {
  rf::http::EventStream stream(64);
  std::vector<rf::http::Event> out;
  while (!bytes.empty()) {
    const size_t n = piece == 0 ? bytes.size() : std::min(piece, bytes.size());
    auto got = stream.feed(bytes.substr(0, n));
    if (!got) {
      *failed = true;
      return out;
    }
    for (auto& e : *got) {
      if (e.data.size() > 64 * 1024) std::abort();
      out.push_back(std::move(e));
    }
    bytes.remove_prefix(n);
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t piece = 1 + data[0] % 17;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  bool whole_failed = false, split_failed = false;
  const auto whole = read_all(bytes, 0, &whole_failed);
  const auto split = read_all(bytes, piece, &split_failed);
  if (whole_failed != split_failed) std::abort();
  if (whole_failed) return 0;
  if (whole.size() != split.size()) std::abort();
  for (size_t i = 0; i < whole.size(); ++i) {
    if (whole[i].name != split[i].name || whole[i].data != split[i].data) std::abort();
  }
  return 0;
}
