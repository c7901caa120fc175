#include "docker_api/ssh_connection.h"

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "docker_api/relay_connection.h"

namespace rf::docker {
namespace {

std::vector<std::string> split_words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

}  // namespace

Result<std::unique_ptr<Connection>> spawn_ssh(const DockerHost& h,
                                              std::chrono::milliseconds timeout) {
  const int64_t connect_s = timeout.count() > 0 ? (timeout.count() + 999) / 1000 : 30;
  std::vector<std::string> args = {"ssh", "-o", "BatchMode=yes", "-o",
                                   "ConnectTimeout=" + std::to_string(connect_s)};
  if (h.port != 0) {
    args.push_back("-p");
    args.push_back(std::to_string(h.port));
  }
  if (!h.user.empty()) {
    args.push_back("-l");
    args.push_back(h.user);
  }
  if (const char* extra = std::getenv("RINGFENCE_SSH_OPTIONS")) {
    for (auto& w : split_words(extra)) args.push_back(std::move(w));
  }
  args.push_back("--");  // the host is never taken for an option
  args.push_back(h.host);
  args.push_back("docker");
  args.push_back("system");
  args.push_back("dial-stdio");

  return spawn_relay(args, "ssh " + h.host);
}

}  // namespace rf::docker
