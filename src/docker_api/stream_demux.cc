#include "docker_api/stream_demux.h"

#include <algorithm>

namespace rf::docker {

// Frames of stream 0 (stdin, which a daemon never sends us in practice) are
// accepted and dropped: the sink only ever sees 1 and 2. Empty frames are
// accepted and deliver nothing.
Status StreamDemux::feed(std::string_view data) {
  if (broken_) return make_error("docker stream", error_);
  while (!data.empty()) {
    if (payload_left_ == 0) {
      // Collect the 8-byte header, however it is split.
      const size_t take = std::min(data.size(), sizeof header_ - header_len_);
      for (size_t i = 0; i < take; ++i) {
        header_[header_len_++] = static_cast<unsigned char>(data[i]);
      }
      data.remove_prefix(take);
      if (header_len_ < sizeof header_) return ok_status();
      if (header_[0] > 2) {
        error_ = "bad frame header at byte " + std::to_string(offset_) + ": stream " +
                 std::to_string(header_[0]) + " (expected 0, 1 or 2)";
      } else if (header_[1] != 0 || header_[2] != 0 || header_[3] != 0) {
        error_ = "bad frame header at byte " + std::to_string(offset_) +
                 ": nonzero padding bytes (not a multiplexed stream; a TTY container's?)";
      }
      if (!error_.empty()) {
        broken_ = true;
        return make_error("docker stream", error_);
      }
      stream_ = header_[0];
      payload_left_ = (uint32_t{header_[4]} << 24) | (uint32_t{header_[5]} << 16) |
                      (uint32_t{header_[6]} << 8) | uint32_t{header_[7]};
      header_len_ = 0;
      offset_ += sizeof header_;
      continue;
    }
    const size_t take = std::min<size_t>(data.size(), payload_left_);
    if (stream_ != 0) sink_(stream_, data.substr(0, take));
    data.remove_prefix(take);
    payload_left_ -= static_cast<uint32_t>(take);
    offset_ += take;
  }
  return ok_status();
}

}  // namespace rf::docker
