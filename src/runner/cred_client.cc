#include "runner/cred_client.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "runner/cred_socket.h"

namespace rf::runner {
namespace {

using nlohmann::json;

constexpr const char* kUsage =
    "usage: rf-cred get NAME [--scope SCOPE] [--reason TEXT]\n"
    "  Asks the host for credential NAME for this sandbox. Granted: the value on\n"
    "  stdout, exit 0. Refused: the reason on stderr, exit 1.\n";

int usage(const std::string& why) {
  std::fprintf(stderr, "rf-cred: %s\n%s", why.c_str(), kUsage);
  return 2;
}

bool write_all_fd(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

int cred_main(int argc, char** argv) {
  // argv: rf-cred get NAME ..., or tool-runner cred get NAME ...
  int i = 1;
  if (i < argc && std::strcmp(argv[i], "cred") == 0) ++i;
  if (i >= argc) return usage("no command");
  const std::string cmd = argv[i++];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (cmd != "get") return usage("unknown command \"" + cmd + "\"");
  std::string name, scope, reason;
  for (; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--scope" || arg == "--reason") {
      if (i + 1 >= argc) return usage(arg + " needs a value");
      (arg == "--scope" ? scope : reason) = argv[++i];
    } else if (!arg.empty() && arg[0] == '-') {
      return usage("unknown option " + arg);
    } else if (name.empty()) {
      name = arg;
    } else {
      return usage("one NAME only (got \"" + name + "\" and \"" + arg + "\")");
    }
  }
  if (name.empty()) return usage("get: which credential? (NAME)");
  std::string line = json{{"name", name}, {"scope", scope}, {"reason", reason}}.dump(
      -1, ' ', false, json::error_handler_t::replace);
  line.push_back('\n');
  if (line.size() > kMaxCredLine) return usage("the request is longer than 8192 bytes");

  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    std::fprintf(stderr, "rf-cred: socket: %s\n", std::strerror(errno));
    return 1;
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string sock = kCredSocketName;
  std::memcpy(addr.sun_path, sock.data(), sock.size());
  addr.sun_path[0] = '\0';
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + sock.size());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    std::fprintf(
        stderr,
        "rf-cred: refused: this sandbox takes no credential requests (no JIT "
        "socket: %s). Only `ringfence call --jit` calls and cli_agent_jit steps may ask.\n",
        std::strerror(errno));
    ::close(fd);
    return 1;
  }
  if (!write_all_fd(fd, line.data(), line.size())) {
    std::fprintf(stderr, "rf-cred: sending the request: %s\n", std::strerror(errno));
    ::close(fd);
    return 1;
  }
  // No half-close: the runner takes EOF while the request waits as the asker leaving.
  std::string in;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    in.append(buf, static_cast<size_t>(n));
    if (in.size() > (1u << 20)) break;
  }
  ::close(fd);
  const size_t nl = in.find('\n');
  const json head =
      json::parse(nl == std::string::npos ? std::string() : in.substr(0, nl), nullptr, false);
  if (!head.is_object() || !head.contains("granted") || !head["granted"].is_boolean()) {
    std::fprintf(stderr, "rf-cred: no answer from the host (the sandbox may be ending)\n");
    return 1;
  }
  if (!head["granted"].get<bool>()) {
    const std::string why = head.value("message", std::string("refused"));
    std::fprintf(stderr, "rf-cred: %s\n", why.c_str());
    return 1;
  }
  const bool ok = write_all_fd(1, in.data() + nl + 1, in.size() - nl - 1);
  ::explicit_bzero(in.data(), in.size());
  return ok ? 0 : 1;
}

}  // namespace rf::runner
