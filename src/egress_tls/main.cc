// ringfence-egress-tls: the part of the egress proxy that speaks TLS (issue
// 13), as a process of its own. The worker's egress proxy starts it with the
// first sandbox that needs it and hands it connections over a socket
// (proxy/edge_messages.h): gateway requests, which it sends on over verified
// TLS with the real credential, and CONNECTs to hosts bound to a
// proxy-delivered credential, whose TLS it terminates with the sandbox's own
// CA. So OpenSSL stays out of the `ringfence` binary (whose start it slowed),
// and parsing what a sandbox sends inside TLS never runs in the worker.
//
//   ringfence-egress-tls --control-fd N [--ca-file FILE] [--uid U --gid G]
//
// --ca-file: the CAs upstreams are verified against (default: the system's).
// --uid/--gid: who to run as once the CAs are loaded (the worker passes
// nobody's). The process is never dumpable (it holds credential values and
// CA keys) and runs with no_new_privs. It exits when the socket closes.
#include <grp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "egress_tls/control.h"

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: ringfence-egress-tls --control-fd N [--ca-file FILE] [--uid U --gid G]\n");
  return 2;
}

bool drop_privileges(long uid, long gid) {
  if (uid < 0) return true;
  const auto u = static_cast<uid_t>(uid);
  const auto g = static_cast<gid_t>(gid < 0 ? uid : gid);
  return ::setgroups(0, nullptr) == 0 && ::setresgid(g, g, g) == 0 && ::setresuid(u, u, u) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  int control_fd = -1;
  long uid = -1, gid = -1;
  std::string ca_file;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return usage();
    if (flag == "--control-fd") {
      control_fd = std::atoi(argv[++i]);
    } else if (flag == "--ca-file") {
      ca_file = argv[++i];
    } else if (flag == "--uid") {
      uid = std::atol(argv[++i]);
    } else if (flag == "--gid") {
      gid = std::atol(argv[++i]);
    } else {
      return usage();
    }
  }
  if (control_fd < 3) return usage();
  // Values and keys live in this process: no core dumps, no ptrace by its user.
  ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  ::signal(SIGPIPE, SIG_IGN);
  auto tls = rf::egress_tls::TlsContexts::make(ca_file);
  if (!tls) {
    std::fprintf(stderr, "ringfence-egress-tls: %s\n", tls.error().to_string().c_str());
    return 1;
  }
  if (!drop_privileges(uid, gid)) {
    std::perror("ringfence-egress-tls: dropping privileges");
    return 1;
  }
  ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);  // a credential change resets it
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    std::perror("ringfence-egress-tls: no_new_privs");
    return 1;
  }
  rf::egress_tls::Control control(control_fd, std::move(*tls));
  control.serve();
  return 0;
}
