// The docker attach channel's ends, against a fake daemon stream: what the
// client sees when the daemon's side breaks.
#include "docker/attach_channel.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>

namespace rf::docker {
namespace {

// A daemon stream that takes nothing (the container is gone) and, like a
// dockerd that never closes an attach stream, sends nothing until closed.
class DeadDaemonStream : public Connection {
 public:
  Result<size_t> read_some(char*, size_t, std::chrono::milliseconds) override {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return shut_; });
    return size_t{0};
  }
  Status write_all(std::string_view) override {
    return sys_error("docker connection: write", EPIPE);
  }
  Status shutdown_write() override { return ok_status(); }
  bool has_buffered() const override { return false; }
  int fd() const override { return fds_[0]; }
  DeadDaemonStream() {
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds_), 0);
    // close() shuts fd() down; a watcher thread turns that into the read's end.
    watcher_ = std::thread([this] {
      pollfd p{fds_[0], POLLIN | POLLRDHUP, 0};
      while (::poll(&p, 1, -1) < 0 && errno == EINTR) {
      }
      std::lock_guard lock(mu_);
      shut_ = true;
      cv_.notify_all();
    });
  }
  ~DeadDaemonStream() override {
    ::shutdown(fds_[1], SHUT_RDWR);
    watcher_.join();
    ::close(fds_[0]);
    ::close(fds_[1]);
  }

 private:
  int fds_[2] = {-1, -1};
  std::thread watcher_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool shut_ = false;
};

TEST(AttachChannel, AWriteToAContainerThatIsGoneFailsInsteadOfBlocking) {
  auto ch = AttachChannel::start(std::make_unique<DeadDaemonStream>(), "rf-test");
  ASSERT_TRUE(ch.ok()) << ch.error().to_string();
  UniqueFd client = (*ch)->take_client_fd();
  // Far more than a socket buffer holds (a file_write of a 1.5 MiB binary).
  const std::string big(8 << 20, 'x');
  size_t sent = 0;
  int err = 0;
  const auto start = std::chrono::steady_clock::now();
  while (sent < big.size()) {
    pollfd p{client.get(), POLLOUT, 0};
    ASSERT_EQ(::poll(&p, 1, 10'000), 1) << "the client's write blocked after " << sent << " bytes";
    const ssize_t n =
        ::send(client.get(), big.data() + sent, big.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n < 0) {
      err = errno;
      break;
    }
    sent += static_cast<size_t>(n);
  }
  EXPECT_EQ(err, EPIPE);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  // And a read sees the end, not silence.
  char c;
  pollfd p{client.get(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 10'000), 1);
  EXPECT_EQ(::recv(client.get(), &c, 1, 0), 0);
  (*ch)->close();
}

}  // namespace
}  // namespace rf::docker
