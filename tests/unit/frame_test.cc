#include "proto/frame.h"

#include <gtest/gtest.h>

#include "proto/messages.h"

namespace rf::proto {
namespace {

TEST(Frame, RoundTripsInAnyChunking) {
  std::string wire;
  append_frame(&wire, MsgType::kExec, 7, R"({"argv":["true"]})", "stdin bytes", kFlagStdinComplete);
  append_frame(&wire, MsgType::kStdout, 7, "", std::string(100000, 'x'));
  append_frame(&wire, MsgType::kOk, 0, "{}");
  for (size_t chunk : {1ul, 3ul, 16ul, 1000ul, wire.size()}) {
    FrameDecoder d;
    std::vector<Frame> frames;
    for (size_t i = 0; i < wire.size(); i += chunk) {
      ASSERT_TRUE(d.feed(std::string_view(wire).substr(i, chunk)).ok());
      while (d.has_frame()) frames.push_back(d.pop());
    }
    ASSERT_EQ(frames.size(), 3u) << "chunk " << chunk;
    EXPECT_EQ(frames[0].type, MsgType::kExec);
    EXPECT_EQ(frames[0].call_id, 7u);
    EXPECT_EQ(frames[0].flags, kFlagStdinComplete);
    EXPECT_EQ(frames[0].data, "stdin bytes");
    EXPECT_EQ(frames[1].data.size(), 100000u);
    EXPECT_EQ(frames[2].json, "{}");
    EXPECT_EQ(d.pending_bytes(), 0u);
  }
}

TEST(Frame, BadMagicIsAnErrorWithTheOffset) {
  std::string wire;
  append_frame(&wire, MsgType::kOk, 0, "{}");
  wire += "XX" + std::string(14, '\0');
  FrameDecoder d;
  auto s = d.feed(wire);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().to_string(), "protocol frame at byte 18: bad magic (expected \"RF\")");
  EXPECT_FALSE(d.feed("more").ok());  // stays failed
}

TEST(Frame, UnknownTypeAndOversizeLengthsAreRejected) {
  std::string wire = std::string("RF") + '\x63' + std::string(13, '\0');
  EXPECT_EQ(FrameDecoder().feed(wire).error().message, "unknown message type 99");
  std::string big;
  append_frame(&big, MsgType::kStdout, 1, "", "");
  big[8] = '\x7f';  // json length 0x7f000000
  EXPECT_NE(FrameDecoder().feed(big).error().message.find("json length"), std::string::npos);
  std::string huge;
  append_frame(&huge, MsgType::kStdout, 1, "", "");
  huge[12] = '\x10';  // data length 256 MiB
  EXPECT_NE(FrameDecoder().feed(huge).error().message.find("data length"), std::string::npos);
}

}  // namespace
}  // namespace rf::proto
