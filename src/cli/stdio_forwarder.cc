#include "cli/stdio_forwarder.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <system_error>
#include <vector>

#include "cli/terminal.h"
#include "core/io.h"

namespace rf::cli {
namespace {

constexpr size_t kStdinChunk = 64 * 1024;

sigset_t forwarded_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGWINCH}) sigaddset(&set, sig);
  return set;
}

}  // namespace

sigset_t StdioForwarder::block_signals() {
  const sigset_t set = forwarded_signals();
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

Result<std::unique_ptr<StdioForwarder>> StdioForwarder::start(Sandbox& sandbox, bool pty) {
  std::unique_ptr<StdioForwarder> f(new StdioForwarder(sandbox, pty));
  f->wake_fd_ = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!f->wake_fd_) return sys_error("stdio forwarder: eventfd");
  const sigset_t set = forwarded_signals();
  f->signal_fd_ = UniqueFd(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!f->signal_fd_) return sys_error("stdio forwarder: signalfd");
  // A closed stdin (fd 0 not open) is EOF; whatever opens fd 0 later is not ours to read.
  f->stdin_usable_ = ::fcntl(STDIN_FILENO, F_GETFD) != -1;
  try {
    f->thread_ = std::thread([p = f.get()] { p->loop(); });
  } catch (const std::system_error& e) {
    return make_error("stdio forwarder: start thread", e.what());
  }
  return f;
}

StdioForwarder::~StdioForwarder() { stop(); }

void StdioForwarder::wake() {
  const uint64_t one = 1;
  // Cannot fail short of a counter overflow, which a pending wake-up makes moot.
  while (::write(wake_fd_.get(), &one, sizeof one) < 0 && errno == EINTR) {
  }
}

void StdioForwarder::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake();
  if (thread_.joinable()) thread_.join();
}

void StdioForwarder::on_started(uint32_t call_id, int) {
  {
    std::lock_guard lock(mu_);
    call_id_ = call_id;
  }
  wake();
}

void StdioForwarder::on_stdout(std::string_view data) { (void)write_all(STDOUT_FILENO, data); }
void StdioForwarder::on_stderr(std::string_view data) { (void)write_all(STDERR_FILENO, data); }

void StdioForwarder::forward_signal(uint32_t id, int sig) {
  if (sig != SIGWINCH) {
    (void)sandbox_.send_signal(id, sig);  // the call may have just ended: nothing to tell
    return;
  }
  if (!pty_) return;
  int rows = 0, cols = 0;
  terminal_size(STDIN_FILENO, &rows, &cols);
  (void)sandbox_.resize(id, rows, cols);
}

void StdioForwarder::loop() {
  bool stdin_open = stdin_usable_;  // until EOF, or the call stops taking it
  bool stdin_closed_sent = false;
  std::vector<int> early;  // signals that came before the call started
  std::vector<char> buf(kStdinChunk);
  for (;;) {
    uint32_t id = 0;
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      id = call_id_;
    }
    if (id != 0) {
      for (int sig : early) forward_signal(id, sig);
      early.clear();
      if (!stdin_open && !stdin_closed_sent) {
        (void)sandbox_.close_stdin(id);
        stdin_closed_sent = true;
      }
    }
    pollfd fds[3] = {{wake_fd_.get(), POLLIN, 0}, {signal_fd_.get(), POLLIN, 0}, {-1, 0, 0}};
    nfds_t n = 2;
    if (id != 0 && stdin_open) fds[n++] = {STDIN_FILENO, POLLIN, 0};
    if (::poll(fds, n, -1) < 0) {
      if (errno == EINTR) continue;
      return;  // only EFAULT/EINVAL/ENOMEM: nothing left to forward with
    }
    if (fds[0].revents != 0) {
      uint64_t count = 0;
      (void)!::read(wake_fd_.get(), &count, sizeof count);  // re-read the state above
    }
    if (fds[1].revents != 0) {
      signalfd_siginfo si{};
      while (::read(signal_fd_.get(), &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
        const int sig = static_cast<int>(si.ssi_signo);
        if (id == 0) {
          // Kept until the call starts; one SIGWINCH is as good as many.
          if (sig != SIGWINCH || std::find(early.begin(), early.end(), sig) == early.end())
            early.push_back(sig);
        } else {
          forward_signal(id, sig);
        }
      }
    }
    if (n == 3 && fds[2].revents != 0) {
      ssize_t got = 0;
      if ((fds[2].revents & POLLNVAL) == 0) {
        got = ::read(STDIN_FILENO, buf.data(), buf.size());
        if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      }
      if (got > 0) {
        // A call that no longer takes stdin (it ended): stop reading ours.
        const std::string_view chunk(buf.data(), static_cast<size_t>(got));
        stdin_digest_.update(chunk);
        if (!sandbox_.write_stdin(id, chunk)) {
          stdin_open = false;
          stdin_closed_sent = true;
        }
      } else {
        stdin_open = false;  // EOF, a hung-up terminal (EIO), or no stdin: close the call's
      }
    }
  }
}

}  // namespace rf::cli
