// The daemon's bytes on an attach stream (docker/stream_demux.h) and in an
// archive reply (docker/tar_archive.h): a remote daemon is not to be trusted
// with our memory. The first byte picks where the stream is split.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "docker/stream_demux.h"
#include "docker/tar_archive.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  size_t delivered = 0;
  rf::docker::StreamDemux demux([&](int stream, std::string_view payload) {
    if (stream != 1 && stream != 2) __builtin_trap();
    delivered += payload.size();
  });
  const size_t step = 1 + data[0] % 64;
  for (size_t at = 0; at < bytes.size(); at += step) {
    if (!demux.feed(bytes.substr(at, step))) break;
  }
  if (delivered > bytes.size()) __builtin_trap();
  (void)rf::docker::read_tar(std::string(bytes), 1 << 16);
  return 0;
}
