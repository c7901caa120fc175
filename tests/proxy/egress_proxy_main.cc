// rf-egress-proxy: an EgressProxy for one sandbox in a process of its own, for
// tests that kill the proxy mid-transfer (and for trying it by hand).
//
//   rf-egress-proxy --socket PATH [--sandbox ID] [--allow RULE]...
//       [--resolve NAME=ADDR[,ADDR...]]... [--no-dns] [--threads N]
//       [--max-connections N] [--max-bytes-sent N]
//
// Prints "ready" once it listens, then one JSON line per connection event;
// runs until SIGTERM or SIGINT.
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "proxy/egress_proxy.h"

namespace {

int usage(const char* why) {
  std::fprintf(stderr, "rf-egress-proxy: %s\n", why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string socket_path, sandbox = "sandbox";
  std::vector<std::string> rules;
  rf::proxy::ProxyOptions opts;
  int max_connections = 64;
  uint64_t max_bytes = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--no-dns") {
      opts.system_dns = false;
    } else if (!has_value) {
      return usage(("missing value after " + a).c_str());
    } else if (a == "--socket") {
      socket_path = argv[++i];
    } else if (a == "--sandbox") {
      sandbox = argv[++i];
    } else if (a == "--allow") {
      rules.push_back(argv[++i]);
    } else if (a == "--threads") {
      opts.threads = std::atoi(argv[++i]);
    } else if (a == "--max-connections") {
      max_connections = std::atoi(argv[++i]);
    } else if (a == "--max-bytes-sent") {
      max_bytes = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--resolve") {
      const std::string v = argv[++i];
      const size_t eq = v.find('=');
      if (eq == std::string::npos) return usage("--resolve NAME=ADDR[,ADDR...]");
      auto& addrs = opts.resolve_override[v.substr(0, eq)];
      std::string rest = v.substr(eq + 1);
      while (!rest.empty()) {
        const size_t comma = rest.find(',');
        auto ip = rf::net::parse_ip_literal(rest.substr(0, comma));
        if (!ip) return usage(("not an address: " + rest.substr(0, comma)).c_str());
        addrs.push_back(*ip);
        rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
      }
    } else {
      return usage(("unknown option " + a).c_str());
    }
  }
  if (socket_path.empty()) return usage("--socket PATH is required");

  // Signals for sigwait, blocked before any thread starts so all inherit it.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  std::mutex out_mu;
  opts.on_event = [&out_mu](const rf::proxy::ConnectionEvent& e) {
    std::lock_guard l(out_mu);
    std::printf("%s\n", rf::proxy::to_json(e).c_str());
    std::fflush(stdout);
  };
  auto policy = rf::net::EgressPolicy::parse(rules);
  if (!policy) return usage(policy.error().to_string().c_str());
  auto proxy = rf::proxy::EgressProxy::start(std::move(opts));
  if (!proxy) return usage(proxy.error().to_string().c_str());
  rf::proxy::SandboxEgress sb{sandbox, std::move(*policy), max_connections, max_bytes};
  if (auto s = (*proxy)->add_sandbox(std::move(sb), socket_path); !s) {
    return usage(s.error().to_string().c_str());
  }
  {
    std::lock_guard l(out_mu);
    std::printf("ready\n");
    std::fflush(stdout);
  }
  int sig = 0;
  sigwait(&set, &sig);
  return 0;
}
