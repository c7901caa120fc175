// ringfence-tool-runner: PID 1 of every sandbox. It serves the host's protocol
// on an inherited socket and forks each tool call's command (runner/call.h,
// "Process tree"; where it is not PID 1, under a supervisor of its own).
//
//   ringfence-tool-runner --version
//   ringfence-tool-runner [--fd N | --stdio] [--seccomp FILE] [--root DIR]
//                         [--egress-bridge ADDR:PORT=PATH]
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/io.h"
#include "proto/messages.h"
#include "proto/seccomp_blob.h"
#include "runner/cred_client.h"
#include "runner/runner.h"
#include "runner/self_probe.h"

namespace {

int usage(const char* why) {
  std::fprintf(
      stderr,
      "ringfence-tool-runner: %s\nusage: ringfence-tool-runner [--fd N | --stdio] "
      "[--seccomp FILE] [--root DIR] [--egress-bridge ADDR:PORT=PATH] [--cred-socket NAME]\n"
      "       [--self-probe-at-start NAME,... [--self-probe-inside-only]] | "
      "--version\n       ringfence-tool-runner cred get NAME ... (or as rf-cred)\n"
      "       ringfence-tool-runner self-probe [--inside-only]   (what bounds this process, "
      "as JSON)\n",
      why);
  return 2;
}

// Commands get 0, 1 and 2; if any is closed, a pipe could land there and be lost.
void ensure_stdio() {
  for (int fd = 0; fd < 3; ++fd) {
    if (::fcntl(fd, F_GETFD) < 0) {
      const int null = ::open("/dev/null", O_RDWR);
      if (null >= 0 && null != fd) {
        ::dup2(null, fd);
        ::close(null);
      }
    }
  }
}

// --seccomp FILE: the host's filters, installed on ourselves before anything
// is served, so the runner and every command run under them. Fails closed.
bool install_seccomp_file(const char* path) {
  auto bytes = rf::read_file(path);
  if (!bytes) {
    std::fprintf(stderr, "ringfence-tool-runner: --seccomp: %s\n",
                 bytes.error().to_string().c_str());
    return false;
  }
  auto programs = rf::proto::decode_bpf_programs(*bytes);
  if (!programs) {
    std::fprintf(stderr, "ringfence-tool-runner: --seccomp %s: %s\n", path,
                 programs.error().to_string().c_str());
    return false;
  }
  if (const int err = rf::proto::install_bpf_programs(*programs); err != 0) {
    std::fprintf(stderr, "ringfence-tool-runner: --seccomp %s: install: %s\n", path,
                 std::strerror(err));
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  // The same binary is rf-cred, the JIT client (runner/cred_client.h).
  const char* base = std::strrchr(argv[0], '/');
  base = base != nullptr ? base + 1 : argv[0];
  if (std::strcmp(base, "rf-cred") == 0 || (argc > 1 && std::strcmp(argv[1], "cred") == 0)) {
    return rf::runner::cred_main(argc, argv);
  }
  // Run by the host as a tool call: what bounds this process (runner/self_probe.h).
  if (argc >= 2 && std::strcmp(argv[1], "self-probe") == 0) {
    bool ok = false;
    const auto scope = rf::runner::probe_scope(argc, argv, &ok);
    if (!ok) return usage("self-probe: the only option is --inside-only");
    return rf::runner::self_probe_main(rf::runner::ProbeStart::kExec, scope);
  }
  rf::runner::Options options;
  const char* seccomp_file = nullptr;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--version") {
      std::printf("ringfence-tool-runner %s protocol %s\n", RF_VERSION,
                  rf::proto::kProtocolVersion);
      return 0;
    }
    if ((arg == "--fd" || arg == "--root" || arg == "--egress-bridge" || arg == "--seccomp" ||
         arg == "--cred-socket" || arg == "--self-probe-at-start") &&
        i + 1 >= argc)
      return usage((arg + ": needs a value").c_str());
    if (arg == "--fd") {
      char* end = nullptr;
      const long fd = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || fd < 0 || fd > 65535) return usage("--fd: not a file descriptor");
      options.fd = static_cast<int>(fd);
    } else if (arg == "--stdio") {
      options.stdio = true;
    } else if (arg == "--seccomp") {
      seccomp_file = argv[++i];
    } else if (arg == "--root") {
      options.root = argv[++i];
    } else if (arg == "--cred-socket") {
      options.cred_socket = argv[++i];
    } else if (arg == "--self-probe-inside-only") {
      options.start_probe_inside_only = true;
    } else if (arg == "--self-probe-at-start") {
      if (options.start_probe_env) return usage("--self-probe-at-start: given twice");
      auto names = rf::proto::parse_env_names(argv[++i]);
      if (!names) return usage(names.error().to_string().c_str());
      options.start_probe_env = std::move(*names);
    } else if (arg == "--egress-bridge") {
      if (options.egress_bridge) return usage("--egress-bridge: given twice");
      auto spec = rf::runner::parse_bridge_spec(argv[++i]);
      if (!spec) return usage(spec.error().to_string().c_str());
      options.egress_bridge = std::move(*spec);
    } else {
      return usage(("unknown argument " + arg).c_str());
    }
  }
  if (options.start_probe_inside_only && !options.start_probe_env)
    return usage("--self-probe-inside-only: only with --self-probe-at-start");
  // Not dumpable: same-uid sandbox processes cannot read /proc/1/environ or
  // /proc/1/mem, nor open /proc/1/exe (the runner binary) through it.
  ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  // Subreaper: outside a sandbox (tests) orphaned supervisors still come back to us.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  // A host or a command that went away is an EPIPE to handle, not our death.
  ::signal(SIGPIPE, SIG_IGN);
  ensure_stdio();
  if (seccomp_file != nullptr && !install_seccomp_file(seccomp_file)) return 1;
  auto runner = rf::runner::Runner::create(options);
  if (!runner) {
    std::fprintf(stderr, "ringfence-tool-runner: %s\n", runner.error().to_string().c_str());
    return 1;
  }
  return (*runner)->run();
}
