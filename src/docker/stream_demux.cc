#include "docker/stream_demux.h"

namespace rf::docker {

Status StreamDemux::feed(std::string_view data) {
  if (broken_) return make_error("docker stream", error_);
  while (!data.empty()) {
    if (payload_left_ == 0) {
      // Collect the 8-byte header.
      const size_t take = std::min(data.size(), sizeof header_ - header_len_);
      for (size_t i = 0; i < take; ++i)
        header_[header_len_++] = static_cast<unsigned char>(data[i]);
      data.remove_prefix(take);
      if (header_len_ < sizeof header_) return ok_status();
      if (header_[0] > 2 || header_[1] != 0 || header_[2] != 0 || header_[3] != 0) {
        broken_ = true;
        error_ = "bad frame header at byte " + std::to_string(offset_) + " (stream byte " +
                 std::to_string(header_[0]) + ")";
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
    // Stream 0 (stdin echoed back) carries nothing for us.
    if (stream_ != 0) sink_(stream_, data.substr(0, take));
    data.remove_prefix(take);
    payload_left_ -= static_cast<uint32_t>(take);
    offset_ += take;
  }
  return ok_status();
}

}  // namespace rf::docker
