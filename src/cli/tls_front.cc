#include "cli/tls_front.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include "core/helper_binary.h"
#include "core/spawn.h"

namespace rf::cli {
namespace {

constexpr auto kReadyTimeout = std::chrono::seconds(10);

// The helper's first line, or why there is none.
Result<std::string> first_line(int fd) {
  std::string line;
  const auto end = std::chrono::steady_clock::now() + kReadyTimeout;
  while (line.find('\n') == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        end - std::chrono::steady_clock::now());
    if (left.count() <= 0) return make_error("ringfence-serve-tls", "not ready within 10 s");
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) < 0) {
      if (errno == EINTR) continue;
      return sys_error("ringfence-serve-tls: poll");
    }
    char buf[512];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return make_error("ringfence-serve-tls", "exited before it was ready");
    line.append(buf, static_cast<size_t>(n));
  }
  return line.substr(0, line.find('\n'));
}

}  // namespace

Result<std::unique_ptr<TlsFront>> TlsFront::start(UniqueFd listener, const std::string& upstream,
                                                  const std::string& cert_file,
                                                  const std::string& key_file) {
  auto binary = find_helper_binary("ringfence-serve-tls", "RINGFENCE_SERVE_TLS");
  if (!binary) return binary.take_error();
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0) return sys_error("pipe");
  UniqueFd in_r(in[0]), in_w(in[1]);
  if (::pipe2(out, O_CLOEXEC) != 0) return sys_error("pipe");
  UniqueFd out_r(out[0]), out_w(out[1]);
  auto pid = spawn_helper(
      {*binary, "--listen-fd", "3", "--upstream", upstream, "--cert", cert_file, "--key", key_file},
      {{in_r.get(), 0}, {out_w.get(), 1}, {STDERR_FILENO, 2}, {listener.get(), 3}});
  if (!pid) return pid.take_error();
  std::unique_ptr<TlsFront> front(new TlsFront(*pid, std::move(in_w)));
  out_w.reset();  // the helper's copy is the only writer: EOF if it dies
  auto line = first_line(out_r.get());
  if (!line) return line.take_error();
  if (*line != "ready") {
    const std::string said = line->rfind("error: ", 0) == 0 ? line->substr(7) : *line;
    return make_error("serve TLS", said);
  }
  return front;
}

TlsFront::~TlsFront() {
  stdin_w_.reset();
  // It ends at EOF; a helper stuck in a handshake is ended anyway.
  for (int i = 0; i < 100; ++i) {
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) return;
    ::usleep(10'000);
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
}

}  // namespace rf::cli
