// ringfence-serve-tls: HTTPS for `ringfence serve`, as a process of its own.
// serve starts it for --tls-cert/--tls-key, handing it the socket it bound
// for --listen: it accepts there, terminates TLS with that certificate, and
// relays each connection, decrypted, to the unix socket serve listens on. So OpenSSL is not in the
// ringfence binary (whose start it slowed, issue 10), and TLS parsing of a
// client's bytes does not run in the process that holds the sandboxes.
//
//   ringfence-serve-tls --listen-fd N --upstream PATH --cert F --key F
//                       [--handshake-timeout-ms N] [--max-connections N]
//
// Its first line on stdout is "ready" or "error: ..." (then it exits 1). It
// ends when its stdin reaches EOF: serve holds the other end, so it never
// outlives serve.
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "serve_tls/front.h"

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: ringfence-serve-tls --listen-fd N --upstream PATH --cert F --key F "
               "[--handshake-timeout-ms N] [--max-connections N]\n");
  return 2;
}

int say_error(const std::string& what) {
  std::printf("error: %s\n", what.c_str());
  std::fflush(stdout);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  rf::serve_tls::FrontOptions o;
  int listen_fd = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return usage();
    const std::string value = argv[++i];
    if (flag == "--listen-fd") {
      listen_fd = std::atoi(value.c_str());
    } else if (flag == "--upstream") {
      o.upstream = value;
    } else if (flag == "--cert") {
      o.cert_file = value;
    } else if (flag == "--key") {
      o.key_file = value;
    } else if (flag == "--handshake-timeout-ms") {
      o.handshake_timeout = std::chrono::milliseconds(std::atol(value.c_str()));
    } else if (flag == "--max-connections") {
      o.max_connections = std::atoi(value.c_str());
    } else {
      return usage();
    }
  }
  if (listen_fd < 3 || o.upstream.empty() || o.cert_file.empty() || o.key_file.empty())
    return usage();
  // The private key lives in this process: no core dumps, no ptrace by its user.
  ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0);
  ::signal(SIGPIPE, SIG_IGN);
  auto front = rf::serve_tls::Front::make(o);
  if (!front) return say_error(front.error().to_string());
  std::printf("ready\n");
  std::fflush(stdout);
  front->serve(listen_fd, STDIN_FILENO);
  // serve is gone: so are the connections it answered. Relays still running
  // on detached threads end with the process, not after the Front they use.
  std::_Exit(0);
}
