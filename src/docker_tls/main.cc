// ringfence-docker-tls: the TLS transport to a Docker daemon, as a process of
// its own. The CLI and the worker spawn it for tcp:// with TLS (and https://)
// as they spawn ssh for ssh://: its stdin and stdout are their end of the
// stream, the daemon's certificate is verified here, and a failure is one
// line on stderr. So OpenSSL is not in the ringfence binary (whose start it
// slowed by its relocated tables), and TLS parsing of a remote peer's bytes
// does not run in the worker.
//
//   ringfence-docker-tls [--cert-dir DIR] [--ca-file F] [--no-verify] [--timeout-ms N]
//   [--fd N] URL HOST PORT
//
// --fd N: the TCP connection is fd N, already connected by the parent (the
// workflow http client checks each address against an egress policy before
// it connects); HOST is then only the name to verify and send as SNI.
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "docker_api/socket_connection.h"
#include "docker_tls/tls_connection.h"

namespace {

[[noreturn]] void die(const rf::Error& e, const std::string& url) {
  // The parent names us ("docker TLS URL: ..."); say only what went wrong.
  rf::Error said = e;
  if (said.where == "docker TLS " + url) said.where.clear();
  std::fprintf(stderr, "%s\n", said.to_string().c_str());
  std::exit(1);
}

int usage() {
  std::fprintf(
      stderr,
      "usage: ringfence-docker-tls [--cert-dir DIR] [--ca-file F] [--no-verify] [--timeout-ms N] "
      "[--fd N] URL HOST PORT\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  rf::docker::DockerHost h;
  h.kind = rf::docker::DockerHost::Kind::kTcp;
  h.tls = true;
  std::chrono::milliseconds timeout{10'000};
  int connected_fd = -1;
  int i = 1;
  for (; i < argc && argv[i][0] == '-'; ++i) {
    const std::string flag = argv[i];
    if (flag == "--no-verify") {
      h.tls_verify = false;
    } else if (flag == "--cert-dir" && i + 1 < argc) {
      h.cert_dir = argv[++i];
    } else if (flag == "--ca-file" && i + 1 < argc) {
      h.ca_file = argv[++i];
    } else if (flag == "--timeout-ms" && i + 1 < argc) {
      timeout = std::chrono::milliseconds(std::atol(argv[++i]));
    } else if (flag == "--fd" && i + 1 < argc) {
      connected_fd = std::atoi(argv[++i]);
      if (connected_fd < 3) return usage();
    } else {
      return usage();
    }
  }
  if (argc - i != 3) return usage();
  h.url = argv[i];
  h.host = argv[i + 1];
  h.port = std::atoi(argv[i + 2]);

  auto fd = connected_fd >= 0 ? rf::Result<rf::UniqueFd>(rf::UniqueFd(connected_fd))
                              : rf::docker::connect_tcp(h, timeout);
  if (!fd) die(fd.error(), h.url);
  auto tls = rf::docker::wrap_tls(std::move(*fd), h, timeout);
  if (!tls) die(tls.error(), h.url);
  rf::docker::Connection& conn = **tls;

  // Up: our stdin to the daemon; at its EOF, the daemon sees ours.
  std::thread up([&conn] {
    char buf[64 * 1024];
    for (;;) {
      const ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      if (!conn.write_all(std::string_view(buf, static_cast<size_t>(n)))) break;
    }
    if (auto s = conn.shutdown_write(); !s) {
      std::fprintf(stderr, "%s\n", s.error().to_string().c_str());
    }
  });
  // Down: the daemon to our stdout, until it ends the stream.
  char buf[64 * 1024];
  int rc = 0;
  for (;;) {
    auto n = conn.read_some(buf, sizeof buf, std::chrono::milliseconds{0});
    if (!n) {
      std::fprintf(stderr, "%s\n", n.error().to_string().c_str());
      rc = 1;
      break;
    }
    if (*n == 0) break;
    size_t off = 0;
    while (off < *n) {
      const ssize_t w = ::write(STDOUT_FILENO, buf + off, *n - off);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        rc = 1;
        break;
      }
      off += static_cast<size_t>(w);
    }
    if (rc != 0) break;
  }
  // The stream is over either way: nothing more goes up either. Our stdin is
  // the parent's socketpair: shutting it wakes the up thread's read.
  ::close(STDOUT_FILENO);
  if (::shutdown(STDIN_FILENO, SHUT_RD) != 0) std::_Exit(rc);  // not a socket: just go
  up.join();
  return rc;
}
