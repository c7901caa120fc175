// What relays a request to a port inside a sandbox (issue 41 item 5;
// sandbox/port_request.h) reads from hostile bytes: the port's answer piece
// by piece as it streams (its head told before any of its body, chunks
// decoded, a HEAD's answer bodiless), which requests are WebSocket
// handshakes, which Host names a port, and what listens inside.
#include "sandbox/port_request.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace rf {
namespace {

struct Heard {
  int status = 0;
  HeaderList headers;
  std::string body;
  std::vector<std::string> order;  // "head", "body"
};

PortAnswerStream listen(Heard& h, bool head_request = false) {
  return PortAnswerStream(
      [&h](int status, HeaderList&& headers) {
        h.status = status;
        h.headers = std::move(headers);
        h.order.push_back("head");
      },
      [&h](std::string_view bytes) {
        h.body.append(bytes);
        if (h.order.empty() || h.order.back() != "body") h.order.push_back("body");
      },
      head_request);
}

TEST(PortAnswerStream, AChunkedAnswerFedAByteAtATimeComesOutWholeHeadFirst) {
  const std::string answer =
      "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n"
      "Connection: keep-alive\r\nX-Ringfence-Worker: w\r\n\r\n"
      "5\r\nhello\r\n7\r\n, world\r\n0\r\n\r\nleftover";
  Heard h;
  auto s = listen(h);
  for (char c : answer) ASSERT_TRUE(s.feed(std::string_view(&c, 1)).ok());
  EXPECT_TRUE(s.done());
  EXPECT_TRUE(s.finish().ok());
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(h.body, "hello, world") << "chunks decoded; bytes after the answer are not its";
  EXPECT_EQ(h.order, (std::vector<std::string>{"head", "body"}));
  ASSERT_EQ(h.headers.size(), 1u) << "hop-by-hop and ringfence's own stay behind";
  EXPECT_EQ(h.headers[0].first, "Content-Type");
}

TEST(PortAnswerStream, ABodyUntilCloseEndsAtTheCloseAndAShortOneIsAnError) {
  Heard h;
  auto s = listen(h);
  ASSERT_TRUE(s.feed("HTTP/1.0 200 OK\r\n\r\nsome").ok());
  ASSERT_TRUE(s.feed(" more").ok());
  EXPECT_FALSE(s.done());
  EXPECT_TRUE(s.finish().ok());
  EXPECT_EQ(h.body, "some more");

  Heard short_one;
  auto t = listen(short_one);
  ASSERT_TRUE(t.feed("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc").ok());
  EXPECT_TRUE(t.head_done());
  auto cut = t.finish();
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.error().message.find("not a whole HTTP/1.x response"), std::string::npos);

  Heard none;
  auto u = listen(none);
  auto nothing = u.finish();
  ASSERT_FALSE(nothing.ok());
  EXPECT_NE(nothing.error().message.find("closed without answering"), std::string::npos);

  Heard junk;
  auto v = listen(junk);
  EXPECT_FALSE(v.feed("SSH-2.0-OpenSSH_9.2\r\n\r\n").ok()) << "not HTTP: said at once";
}

TEST(PortAnswerStream, TheAnswerToAHeadHasNoBodyWhateverItsLengthSays) {
  Heard h;
  auto s = listen(h, /*head_request=*/true);
  ASSERT_TRUE(s.feed("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n").ok());
  EXPECT_TRUE(s.done());
  EXPECT_EQ(h.body, "");
}

TEST(PortRequest, WebSocketHandshakesAreKnownAndKeepTheirConnection) {
  EXPECT_TRUE(
      is_websocket_upgrade({{"Connection", "keep-alive, Upgrade"}, {"Upgrade", "WebSocket"}}));
  EXPECT_FALSE(is_websocket_upgrade({{"Connection", "Upgrade"}, {"Upgrade", "h2c"}}));
  EXPECT_FALSE(is_websocket_upgrade({{"Upgrade", "websocket"}}));
  EXPECT_FALSE(is_websocket_upgrade({{"Connection", "upgraded"}, {"Upgrade", "websocket"}}));
  const std::string text = port_upgrade_request_text(
      "/chat", {{"Authorization", "Bearer rft_x"}, {"Sec-WebSocket-Key", "k"}}, 8001);
  EXPECT_EQ(text,
            "GET /chat HTTP/1.1\r\nHost: 127.0.0.1:8001\r\nSec-WebSocket-Key: k\r\n"
            "Upgrade: websocket\r\nConnection: Upgrade\r\n\r\n");
}

TEST(PortRequest, AHostNamesAPortOnlyUnderTheDomainAndAsOneLabel) {
  auto p = parse_port_host("8000-rf-1a2b.ports.test:8080", "ports.test");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->port, 8000);
  EXPECT_EQ(p->sandbox, "rf-1a2b");
  EXPECT_TRUE(parse_port_host("8000-rf-1a2b.PORTS.Test", "ports.test").has_value());
  for (const char* bad :
       {"8000-rf-1a2b.ports.test.evil", "8000-rf-1a2b.evilports.test", "x8000-rf-1a2b.ports.test",
        "0-rf-1a2b.ports.test", "70000-rf-1a2b.ports.test", "8000-.ports.test",
        "8000-a.b.ports.test", "ports.test", "", "8000-rf-1a2b"}) {
    EXPECT_FALSE(parse_port_host(bad, "ports.test").has_value()) << bad;
  }
  EXPECT_FALSE(parse_port_host("8000-rf-1a2b.ports.test", "").has_value());
}

TEST(PortRequest, WhatListensIsReadFromProcNetTcp) {
  const std::string v4 =
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
      "timeout inode\n"
      "   0: 0100007F:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000 0 1\n"
      "   1: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0 0 2\n"
      "   2: 0100007F:1F40 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000  1000 0 3\n"
      "   3: 0100007F:1F41 0100007F:D2F0 06 00000000:00000000 00:00000000 00000000  1000 0 4\n"
      "   4: garbage\n";
  auto ports = parse_listening_ports(v4, false);
  ASSERT_EQ(ports.size(), 2u);
  EXPECT_EQ(ports[0].port, 22);
  EXPECT_EQ(ports[0].address, "0.0.0.0");
  EXPECT_EQ(ports[1].port, 8000);
  EXPECT_EQ(ports[1].address, "127.0.0.1");
  const std::string v6 =
      "  sl  local_address                         remote_address                        st\n"
      "   0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A\n";
  auto six = parse_listening_ports(v6, true);
  ASSERT_EQ(six.size(), 1u);
  EXPECT_EQ(six[0].port, 8080);
  EXPECT_EQ(six[0].address, "::1");
  EXPECT_TRUE(parse_listening_ports("", false).empty());
}

}  // namespace
}  // namespace rf
