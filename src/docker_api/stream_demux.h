// The multiplexed stream Docker sends on an attach or logs connection of a
// container without a TTY: frames of an 8-byte header (stream: 0 stdin,
// 1 stdout, 2 stderr; three zero bytes; big-endian u32 length) then the payload.
// Fed arbitrary pieces of untrusted bytes; never crashes, rejects bad headers.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "core/result.h"

namespace rf::docker {

class StreamDemux {
 public:
  // Called for each piece of a frame's payload as it arrives (a frame may be
  // delivered in several pieces); stream is 1 (stdout) or 2 (stderr).
  using Sink = std::function<void(int stream, std::string_view payload)>;
  explicit StreamDemux(Sink sink) : sink_(std::move(sink)) {}

  // Consumes `data`. A header with a stream other than 0-2 or nonzero padding
  // is an error naming the byte offset; after an error every feed fails.
  Status feed(std::string_view data);
  // True between frames (no partial header or payload pending).
  bool at_boundary() const { return header_len_ == 0 && payload_left_ == 0; }

 private:
  Sink sink_;
  unsigned char header_[8]{};
  size_t header_len_ = 0;
  uint32_t payload_left_ = 0;
  int stream_ = 0;
  uint64_t offset_ = 0;
  bool broken_ = false;
  std::string error_;
};

}  // namespace rf::docker
