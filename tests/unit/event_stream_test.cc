// http::EventStream (issue 40): the server-sent events `call --api` reads
// from serve, whole events out of reads split anywhere.
#include "http_client/event_stream.h"

#include <gtest/gtest.h>

namespace rf::http {
namespace {

std::vector<Event> feed_by(EventStream& s, std::string_view bytes, size_t piece) {
  std::vector<Event> out;
  for (size_t at = 0; at < bytes.size(); at += piece) {
    auto got = s.feed(bytes.substr(at, piece));
    EXPECT_TRUE(got.ok());
    if (!got) break;
    for (auto& e : *got) out.push_back(std::move(e));
  }
  return out;
}

TEST(EventStream, EventsComeWholeHoweverTheBytesAreSplit) {
  const std::string text =
      "event: stdout\ndata: {\"data\":\"a\"}\n\n"
      ": a comment\r\n"
      "data: one\r\ndata: two\r\nid: 7\r\n\r\n"
      "event: end\ndata:{\"state\":\"done\"}\n\n"
      "event: lonely\n\n"  // no data: no event
      "event: stdout\ndata: cut";
  for (size_t piece : {size_t{1}, size_t{2}, size_t{7}, text.size()}) {
    EventStream s;
    auto events = feed_by(s, text, piece);
    ASSERT_EQ(events.size(), 3u) << "piece " << piece;
    EXPECT_EQ(events[0].name, "stdout");
    EXPECT_EQ(events[0].data, "{\"data\":\"a\"}");
    EXPECT_EQ(events[1].name, "message");
    EXPECT_EQ(events[1].data, "one\ntwo");
    EXPECT_EQ(events[2].name, "end");
    EXPECT_EQ(events[2].data, "{\"state\":\"done\"}");
  }
}

TEST(EventStream, ALineLongerThanTheBoundIsAnError) {
  EventStream s(16);
  ASSERT_TRUE(s.feed("data: 0123456789").ok());
  auto more = s.feed("abcdef");
  ASSERT_FALSE(more.ok());
  EXPECT_EQ(more.error().to_string(), "event stream: a line longer than 16 bytes");
}

}  // namespace
}  // namespace rf::http
