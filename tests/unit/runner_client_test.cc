// The host's side of protocol 0.4 (issue 41): file_mkdir, file_remove and
// file_move go only to a runner that said 0.4 or later. An older runner (an
// image that ships its own) gets nothing it cannot decode: the host answers
// the caller with an error naming the runner's protocol.
#include "host/runner_client.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "proto/frame.h"
#include "proto/messages.h"

namespace rf {
namespace {

using namespace std::chrono_literals;

TEST(RunnerClientFileOps, ARunnerOfAnOlderProtocolIsSentNone) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  const int runner = fds[1];
  proto::Hello hello;
  hello.protocol = "0.3.0";
  hello.role = "runner";
  hello.runner_version = "old";
  const std::string wire =
      proto::encode_frame({proto::MsgType::kHello, 0, 0, proto::to_json(hello), ""});
  ASSERT_EQ(::write(runner, wire.data(), wire.size()), static_cast<ssize_t>(wire.size()));
  host::RunnerClient client{UniqueFd(fds[0])};
  ASSERT_TRUE(client.handshake(5000ms).ok());
  // The host's hello, then nothing.
  char buf[4096];
  ASSERT_GT(::read(runner, buf, sizeof buf), 0);
  for (const Status& s :
       {client.remove("/workspace/x", true), client.make_dir("/workspace/d", false),
        client.move("/workspace/a", "/workspace/b")}) {
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.error().to_string().find("speaks protocol 0.3.0, which has no file_"),
              std::string::npos)
        << s.error().to_string();
  }
  // A watch (0.5) neither.
  bool heard = false;
  auto watched = client.watch(
      "/workspace", true, [&](uint32_t) { heard = true; }, [](std::vector<proto::FileEvent>&&) {});
  ASSERT_FALSE(watched.ok());
  EXPECT_NE(watched.error().to_string().find("speaks protocol 0.3.0, which has no file_watch"),
            std::string::npos)
      << watched.error().to_string();
  EXPECT_FALSE(heard);
  pollfd p{runner, POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 0), 0) << "no frame reached the old runner";
  ::close(runner);
}

}  // namespace
}  // namespace rf
