#include "http_client/event_stream.h"

namespace rf::http {

Result<std::vector<Event>> EventStream::feed(std::string_view bytes) {
  std::vector<Event> out;
  while (!bytes.empty()) {
    const size_t nl = bytes.find('\n');
    if (nl == std::string_view::npos) {
      partial_.append(bytes);
      if (partial_.size() > max_line_) {
        return make_error("event stream",
                          "a line longer than " + std::to_string(max_line_) + " bytes");
      }
      break;
    }
    partial_.append(bytes.substr(0, nl));
    bytes.remove_prefix(nl + 1);
    if (partial_.size() > max_line_) {
      return make_error("event stream",
                        "a line longer than " + std::to_string(max_line_) + " bytes");
    }
    std::string_view line = partial_;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    take_line(line, out);
    partial_.clear();
  }
  return out;
}

void EventStream::take_line(std::string_view line, std::vector<Event>& out) {
  if (line.empty()) {  // the blank line that ends an event
    if (has_data_) out.push_back(std::move(event_));
    event_ = Event{};
    has_data_ = false;
    return;
  }
  if (line.front() == ':') return;  // a comment
  const size_t colon = line.find(':');
  const std::string_view field = line.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? "" : line.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (field == "event") {
    event_.name = std::string(value);
  } else if (field == "data") {
    if (has_data_) event_.data += '\n';
    event_.data.append(value);
    has_data_ = true;
  }
}

}  // namespace rf::http
