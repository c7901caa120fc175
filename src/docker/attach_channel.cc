#include "docker/attach_channel.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include "docker_api/stream_demux.h"

namespace rf::docker {
namespace {

constexpr size_t kChunk = 64 * 1024;
constexpr size_t kTailBytes = 2048;

// To the client's socket. MSG_NOSIGNAL: once the client is gone or shut down
// (RunnerClient::fail_all, on destroy), writing is an EPIPE to note, not a
// SIGPIPE that ends the whole process.
bool send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

Result<std::unique_ptr<AttachChannel>> AttachChannel::start(std::unique_ptr<Connection> conn,
                                                            std::string name) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    return sys_error("attach channel: socketpair");
  }
  std::unique_ptr<AttachChannel> ch(new AttachChannel(std::move(conn), std::move(name)));
  ch->client_fd_ = UniqueFd(sv[0]);
  ch->pump_fd_ = UniqueFd(sv[1]);
  ch->up_ = std::thread([c = ch.get()] { c->pump_up(); });
  ch->down_ = std::thread([c = ch.get()] { c->pump_down(); });
  return ch;
}

AttachChannel::~AttachChannel() { close(); }

void AttachChannel::pump_up() {
  std::string buf(kChunk, '\0');
  for (;;) {
    const ssize_t n = ::read(pump_fd_.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the client closed (or close() shut us down)
    if (!conn_->write_all(std::string_view(buf.data(), static_cast<size_t>(n)))) {
      // The daemon's end is gone (the container was killed or removed), and
      // dockerd may never close the stream's other direction: the client's
      // writes must fail (EPIPE) and its reads see EOF, or a large write
      // blocks forever on a socket nobody drains.
      ::shutdown(pump_fd_.get(), SHUT_RDWR);
      return;
    }
  }
  // The runner sees EOF on its stdin and exits.
  if (auto s = conn_->shutdown_write(); !s) {
    spdlog::debug("{}: attach stream: {}", name_, s.error().to_string());
  }
}

void AttachChannel::pump_down() {
  bool client_open = true;
  StreamDemux demux([&](int stream, std::string_view payload) {
    if (stream == 2) {
      on_stderr(payload);
    } else if (stream == 1 && client_open) {
      if (!send_all(pump_fd_.get(), payload)) client_open = false;  // keep draining the stream
    }
  });
  std::string buf(kChunk, '\0');
  for (;;) {
    auto n = conn_->read_some(buf.data(), buf.size(), std::chrono::milliseconds{0});
    if (!n || *n == 0) break;  // the runner ended, the daemon went, or close()
    if (auto s = demux.feed(std::string_view(buf.data(), *n)); !s) {
      spdlog::warn("{}: attach stream: {}", name_, s.error().to_string());
      break;
    }
  }
  // The client sees EOF: the runner is gone.
  ::shutdown(pump_fd_.get(), SHUT_WR);
}

void AttachChannel::on_stderr(std::string_view data) {
  std::lock_guard lock(mu_);
  for (char c : data) {
    if (c != '\n') {
      if (stderr_line_.size() < kTailBytes) stderr_line_.push_back(c);
      continue;
    }
    spdlog::warn("{}: tool runner: {}", name_, stderr_line_);
    stderr_tail_ += stderr_line_ + "\n";
    if (stderr_tail_.size() > kTailBytes) stderr_tail_.erase(0, stderr_tail_.size() - kTailBytes);
    stderr_line_.clear();
  }
}

std::string AttachChannel::stderr_tail() const {
  std::lock_guard lock(mu_);
  std::string tail = stderr_tail_ + stderr_line_;
  while (!tail.empty() && tail.back() == '\n') tail.pop_back();
  return tail;
}

void AttachChannel::close() {
  {
    std::lock_guard lock(mu_);
    if (closed_) return;
    closed_ = true;
  }
  // Wake both threads: the client side first, then the daemon's stream.
  if (pump_fd_) ::shutdown(pump_fd_.get(), SHUT_RDWR);
  if (conn_) ::shutdown(conn_->fd(), SHUT_RDWR);
  if (up_.joinable()) up_.join();
  if (down_.joinable()) down_.join();
}

}  // namespace rf::docker
