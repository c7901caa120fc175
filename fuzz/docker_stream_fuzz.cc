// libFuzzer target for what a Docker daemon (local or remote, so untrusted)
// sends on an attach stream: the StreamDemux, fed the same bytes whole and in
// fuzzer-chosen pieces. It never crashes, delivers only streams 1 and 2, and
// the chunking never changes the outcome: the same payload bytes, the same
// verdict, the same error.
//
//   CC=clang CXX=clang++ cmake -S . -B build-fuzz -DRF_FUZZ=ON -DRF_TESTS=OFF -DRF_BENCH=OFF
//   make -C build-fuzz docker_stream_fuzz && build-fuzz/fuzz/docker_stream_fuzz -max_total_time=60
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "docker_api/stream_demux.h"

namespace {

struct Outcome {
  std::string out, err;
  bool ok = true;
  std::string error;
  bool at_boundary = true;
};

// The first byte picks the piece sizes; the rest is the stream.
Outcome run(std::string_view wire, uint8_t seed, bool split) {
  Outcome o;
  rf::docker::StreamDemux demux([&](int stream, std::string_view p) {
    if (stream == 1) {
      o.out.append(p);
    } else if (stream == 2) {
      o.err.append(p);
    } else {
      std::abort();  // only 1 and 2 reach the sink
    }
  });
  uint32_t state = seed | 1u;
  while (!wire.empty()) {
    size_t n = wire.size();
    if (split) {
      state = state * 1103515245u + 12345u;
      n = std::min<size_t>(wire.size(), (state >> 16) % 13);
    }
    auto s = demux.feed(wire.substr(0, n));
    wire.remove_prefix(n);
    if (!s.ok()) {
      o.ok = false;
      o.error = s.error().to_string();
      if (demux.feed("x").ok()) std::abort();  // broken stays broken
      break;
    }
  }
  o.at_boundary = demux.at_boundary();
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view wire(reinterpret_cast<const char*>(data) + 1, size - 1);
  const Outcome whole = run(wire, data[0], false);
  const Outcome pieces = run(wire, data[0], true);
  if (whole.ok != pieces.ok || whole.error != pieces.error) std::abort();
  if (whole.ok && (whole.out != pieces.out || whole.err != pieces.err ||
                   whole.at_boundary != pieces.at_boundary)) {
    std::abort();
  }
  return 0;
}
