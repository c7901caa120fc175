// Server-sent events (text/event-stream) read as they arrive: bytes in, whole
// events out. Only what serve sends is kept: `event:` and `data:` fields
// (several data lines joined by "\n"); comments and other fields are skipped.
// A line longer than `max_line` bytes is an error, not a growing buffer.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace rf::http {

struct Event {
  std::string name = "message";  // `event:`, "message" when none was given
  std::string data;
};

class EventStream {
 public:
  explicit EventStream(size_t max_line = 8u << 20) : max_line_(max_line) {}
  // The events `bytes` completed (in order); an error once a line is too long.
  Result<std::vector<Event>> feed(std::string_view bytes);

 private:
  void take_line(std::string_view line, std::vector<Event>& out);
  size_t max_line_;
  std::string partial_;  // the unfinished line
  Event event_;
  bool has_data_ = false;
};

}  // namespace rf::http
