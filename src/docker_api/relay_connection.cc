#include "docker_api/relay_connection.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <thread>

#include "core/spawn.h"
#include "docker_api/socket_connection.h"

namespace rf::docker {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// The socket is our end of a socketpair whose other end is the relay's stdin
// and stdout. What the relay says on stderr (a pipe, drained as we go so it
// never blocks on it) becomes the error when the stream ends before the daemon
// said anything, or when a write fails: "Permission denied (publickey)".
class RelayConnection : public FdConnection {
 public:
  RelayConnection(UniqueFd fd, pid_t pid, UniqueFd err, std::string label)
      : FdConnection(std::move(fd)), pid_(pid), err_(std::move(err)), label_(std::move(label)) {}
  ~RelayConnection() override {
    fd_.reset();  // the relay (and what it relays to) sees EOF
    ::kill(pid_, SIGTERM);
    // Reaped here, always: SIGKILL if it has not gone within 2 s.
    for (int i = 0; i < 200; ++i) {
      const pid_t r = ::waitpid(pid_, nullptr, WNOHANG);
      if (r == pid_ || (r < 0 && errno != EINTR)) return;
      std::this_thread::sleep_for(milliseconds(10));
    }
    ::kill(pid_, SIGKILL);
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  Result<size_t> read_some(char* buf, size_t n, milliseconds timeout) override {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      int err_fd = -1;
      {
        std::lock_guard lock(err_mu_);
        if (!err_eof_) err_fd = err_.get();
      }
      pollfd p[2] = {{fd_.get(), POLLIN, 0}, {err_fd, POLLIN, 0}};
      int wait_ms = -1;
      if (timeout.count() > 0) {
        const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
        wait_ms = static_cast<int>(std::clamp<int64_t>(left.count(), 0, 1 << 30));
      }
      const int r = ::poll(p, err_fd >= 0 ? 2 : 1, wait_ms);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return sys_error("docker connection: poll");
      if (r == 0) return with_relay_words(sys_error("docker connection: wait", ETIMEDOUT));
      if (p[1].revents != 0) drain_stderr();
      if (p[0].revents == 0) continue;
      const ssize_t got = ::recv(fd_.get(), buf, n, MSG_DONTWAIT);
      if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (got < 0) return with_relay_words(sys_error("docker connection: read"));
      if (got > 0) {
        got_any_ = true;
        return static_cast<size_t>(got);
      }
      // EOF. Before any byte came from the daemon, it is the relay failing.
      if (!got_any_) {
        drain_stderr(/*wait_for_eof=*/true);
        const std::string why = relay_said();
        if (!why.empty()) return make_error(label_, why);
      }
      return size_t{0};
    }
  }
  Status write_all(std::string_view data) override {
    auto s = FdConnection::write_all(data);
    if (!s) {
      drain_stderr(/*wait_for_eof=*/true);
      return with_relay_words(s.take_error());
    }
    return s;
  }

 private:
  // The error as the relay explains it, when it said something ("ssh h:
  // Permission denied (publickey).: Broken pipe"); the errno stays for the caller.
  Error with_relay_words(Error e) {
    const std::string why = relay_said();
    if (why.empty()) return e;
    Error out = make_error(label_, why);
    out.sys_errno = e.sys_errno;
    return out;
  }
  // Reads what the relay wrote on stderr so far (at most 200 ms more when it is
  // going away anyway); keeps the last 4 KiB.
  void drain_stderr(bool wait_for_eof = false) {
    std::lock_guard lock(err_mu_);
    if (err_eof_) return;
    const auto until = Clock::now() + milliseconds(wait_for_eof ? 200 : 0);
    char buf[4096];
    for (;;) {
      const ssize_t n = ::read(err_.get(), buf, sizeof buf);
      if (n > 0) {
        err_text_.append(buf, static_cast<size_t>(n));
        if (err_text_.size() > 4096) err_text_.erase(0, err_text_.size() - 4096);
        continue;
      }
      if (n == 0) {
        err_eof_ = true;  // the relay is gone: its stderr is complete
        return;
      }
      if (errno == EINTR) continue;
      if (errno != EAGAIN || Clock::now() >= until) return;
      pollfd p{err_.get(), POLLIN, 0};
      ::poll(&p, 1, 20);
    }
  }
  // The last non-empty line the relay wrote on stderr.
  std::string relay_said() {
    std::lock_guard lock(err_mu_);
    std::string text = err_text_;
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    const auto nl = text.rfind('\n');
    std::string line = nl == std::string::npos ? text : text.substr(nl + 1);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return line;
  }

  pid_t pid_;
  std::mutex err_mu_;
  UniqueFd err_;  // non-blocking read end of the relay's stderr, open until we go
  bool err_eof_ = false;
  std::string err_text_;
  std::string label_;  // "ssh HOST", "docker TLS URL"
  bool got_any_ = false;
};

}  // namespace

Result<std::unique_ptr<Connection>> spawn_relay(const std::vector<std::string>& args,
                                                const std::string& label, int pass_fd) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return sys_error("socketpair");
  UniqueFd ours(sv[0]), theirs(sv[1]);
  int ep[2];
  if (::pipe2(ep, O_CLOEXEC | O_NONBLOCK) != 0) return sys_error("pipe2");
  UniqueFd err_read(ep[0]), err_write(ep[1]);
  // The relay's stderr blocks like any stderr; only our read end is non-blocking.
  RF_TRY(set_nonblocking(err_write.get(), false));

  // stdin and stdout are the socket, stderr the pipe (a failure is one line there).
  std::vector<SpawnFd> fds = {{theirs.get(), 0}, {theirs.get(), 1}, {err_write.get(), 2}};
  if (pass_fd >= 0) fds.push_back({pass_fd, 3});
  auto pid = spawn_helper(args, fds, nullptr, /*search_path=*/true);
  if (!pid) return make_error(label, pid.error().to_string());
  return std::unique_ptr<Connection>(
      std::make_unique<RelayConnection>(std::move(ours), *pid, std::move(err_read), label));
}

}  // namespace rf::docker
