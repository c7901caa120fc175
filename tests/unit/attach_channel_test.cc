// The docker backend's attach channel against an in-process "daemon" on a
// unix socket: its two pump threads join the attach stream to the
// RunnerClient's socket, and close() ends and joins them, whatever state the
// stream and the client are in.
#include "docker/attach_channel.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "docker_api/docker_host.h"

namespace rf::docker {
namespace {

// A listening unix socket in a directory of its own.
class FakeDaemon {
 public:
  FakeDaemon() {
    char tmpl[] = "/tmp/rf-attach-XXXXXX";
    if (::mkdtemp(tmpl) != nullptr) dir_ = tmpl;
    path_ = dir_ + "/d.sock";
    listener_ = UniqueFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    path_.copy(a.sun_path, sizeof a.sun_path - 1);
    EXPECT_EQ(::bind(listener_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(listener_.get(), 4), 0);
  }
  ~FakeDaemon() {
    ::unlink(path_.c_str());
    ::rmdir(dir_.c_str());
  }
  // A channel over a new connection, and the daemon's end of it.
  std::unique_ptr<AttachChannel> attach(UniqueFd* daemon_end) {
    auto host = parse_docker_host("unix://" + path_);
    EXPECT_TRUE(host.ok());
    auto conn = open_connection(*host, std::chrono::seconds(5));
    EXPECT_TRUE(conn.ok()) << conn.error().to_string();
    *daemon_end = UniqueFd(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    EXPECT_TRUE(daemon_end->valid());
    auto ch = AttachChannel::start(std::move(*conn), "sb-test");
    EXPECT_TRUE(ch.ok()) << ch.error().to_string();
    return std::move(*ch);
  }

 private:
  std::string dir_, path_;
  UniqueFd listener_;
};

// One frame of Docker's multiplexed stream: stream 1 stdout, 2 stderr.
std::string frame(int stream, const std::string& payload) {
  std::string f(8, '\0');
  f[0] = static_cast<char>(stream);
  const uint32_t n = static_cast<uint32_t>(payload.size());
  f[4] = static_cast<char>(n >> 24);
  f[5] = static_cast<char>(n >> 16);
  f[6] = static_cast<char>(n >> 8);
  f[7] = static_cast<char>(n);
  return f + payload;
}

bool send_all(int fd, std::string_view d) {
  while (!d.empty()) {
    const ssize_t n = ::send(fd, d.data(), d.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    d.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Reads `n` bytes from `fd`, waiting at most 10 s in all.
std::string read_n(int fd, size_t n) {
  std::string out;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (out.size() < n && std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[4096];
    const ssize_t got = ::read(fd, buf, std::min(sizeof buf, n - out.size()));
    if (got <= 0) break;
    out.append(buf, static_cast<size_t>(got));
  }
  return out;
}

TEST(AttachChannel, PumpsBothWaysAndKeepsTheRunnersStderr) {
  FakeDaemon daemon;
  UniqueFd d;
  auto ch = daemon.attach(&d);
  ASSERT_TRUE(ch);
  UniqueFd client = ch->take_client_fd();
  ASSERT_TRUE(send_all(client.get(), "to the runner"));
  EXPECT_EQ(read_n(d.get(), 13), "to the runner");
  ASSERT_TRUE(send_all(d.get(), frame(2, "runner: starting\n") + frame(1, "from the runner")));
  EXPECT_EQ(read_n(client.get(), 15), "from the runner");  // stderr is not on the client's stream
  EXPECT_EQ(ch->stderr_tail(), "runner: starting");
  // The runner ends: the client sees EOF.
  d.reset();
  EXPECT_EQ(read_n(client.get(), 1), "");
  ch->close();
}

// The client went first (the sandbox is being destroyed) while the runner
// still writes: the pump keeps draining the stream, and writing to the gone
// client is no SIGPIPE (which would end the whole process).
TEST(AttachChannel, OutputAfterTheClientWentEndsNothingButTheClient) {
  FakeDaemon daemon;
  UniqueFd d;
  auto ch = daemon.attach(&d);
  ASSERT_TRUE(ch);
  UniqueFd client = ch->take_client_fd();
  ASSERT_EQ(::shutdown(client.get(), SHUT_RDWR), 0);  // as RunnerClient::fail_all does
  const std::string chunk = frame(1, std::string(64 * 1024, 'x'));
  for (int i = 0; i < 64; ++i) {
    ASSERT_TRUE(send_all(d.get(), chunk)) << i;  // 4 MiB in all: the pump drains it
  }
  client.reset();
  ASSERT_TRUE(send_all(d.get(), frame(1, "more") + frame(2, "last words\n")));
  ASSERT_EQ(::shutdown(d.get(), SHUT_WR), 0);
  EXPECT_EQ(read_n(d.get(), 1), "");  // the pump saw the client go: EOF on the runner's stdin
  ch->close();
  EXPECT_EQ(ch->stderr_tail(), "last words");
}

// close() while both pumps wait (nothing moves either way) ends and joins them.
TEST(AttachChannel, CloseEndsBothPumpsWhileTheyWait) {
  FakeDaemon daemon;
  for (int i = 0; i < 50; ++i) {
    UniqueFd d;
    auto ch = daemon.attach(&d);
    ASSERT_TRUE(ch);
    UniqueFd client = ch->take_client_fd();
    if (i % 2 == 0) {
      ASSERT_TRUE(send_all(d.get(), frame(1, "x")));  // and some output on its way
    }
    ch.reset();                         // the destructor closes and joins
    EXPECT_EQ(read_n(d.get(), 1), "");  // the daemon sees the stream end
  }
}

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
