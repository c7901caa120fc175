// `sandbox doctor --backend docker` (host side): the daemon answers, speaks a
// version we do, enforces seccomp, and the runner volume can be made.
#include <algorithm>

#include "docker/docker_backend.h"
#include "docker_api/api_client.h"
#include "docker_api/docker_host.h"
#include "host/runner_binary.h"

namespace rf::docker {
namespace {

HealthCheck failed(std::string name, std::string detail, std::string remedy) {
  HealthCheck c;
  c.name = std::move(name);
  c.detail = std::move(detail);
  c.remedy = std::move(remedy);
  return c;
}

HealthCheck passed(std::string name, std::string detail) {
  HealthCheck c;
  c.name = std::move(name);
  c.ok = true;
  c.detail = std::move(detail);
  return c;
}

std::string remedy_for(const DockerHost& host) {
  switch (host.kind) {
    case DockerHost::Kind::kUnix:
      return "start dockerd (systemctl start docker), or point --docker-host / DOCKER_HOST at "
             "the daemon's socket; this user must be able to open " +
             host.path;
    case DockerHost::Kind::kTcp:
      return "check that the daemon listens on " + host.host + ":" + std::to_string(host.port) +
             (host.tls ? " with TLS, and that ca.pem, cert.pem and key.pem in " + host.cert_dir +
                             " match it"
                       : " (dockerd -H tcp://...)");
    case DockerHost::Kind::kSsh:
      return "check `ssh " + (host.user.empty() ? "" : host.user + "@") + host.host +
             " docker system dial-stdio` works without a prompt (BatchMode): a key in the agent "
             "or ~/.ssh, the host in known_hosts, and docker installed there";
  }
  return {};
}

}  // namespace

std::vector<HealthCheck> docker_doctor(const DockerOptions& options) {
  std::vector<HealthCheck> out;
  std::string runner = options.runner_path;
  if (runner.empty()) {
    auto found = host::find_runner_binary();
    runner = found ? *found : found.error().to_string();
  }
  out.push_back(host::runner_health(runner));
  auto host =
      options.host_url.empty() ? default_docker_host() : parse_docker_host(options.host_url);
  if (!host) {
    out.push_back(failed("docker host", host.error().to_string(),
                         "give --docker-host as unix:///path, tcp://HOST:PORT or ssh://USER@HOST"));
    return out;
  }
  auto api = ApiClient::connect(*host, options.connect_timeout);
  if (!api) {
    out.push_back(failed("docker daemon (ping)", host->url + ": " + api.error().to_string(),
                         remedy_for(*host)));
    return out;
  }
  out.push_back(passed("docker daemon (ping)", host->url + ": Docker " + (*api)->server_version()));
  out.push_back(passed("docker API version", (*api)->api_version() + " (we speak " +
                                                 std::string(kMinApiVersion) + " to " +
                                                 std::string(kMaxApiVersion) + ")"));
  auto info = (*api)->call("GET", "/info");
  if (!info) {
    out.push_back(failed("docker seccomp", info.error().to_string(), remedy_for(*host)));
    return out;
  }
  bool seccomp = false;
  std::string options_text;
  if (info->contains("SecurityOptions") && (*info)["SecurityOptions"].is_array()) {
    for (const auto& o : (*info)["SecurityOptions"]) {
      if (!o.is_string()) continue;
      const std::string s = o.get<std::string>();
      options_text += (options_text.empty() ? "" : ", ") + s;
      if (s.find("name=seccomp") != std::string::npos) seccomp = true;
    }
  }
  if (seccomp) {
    out.push_back(passed("docker seccomp", options_text));
  } else {
    out.push_back(
        failed("docker seccomp", "the daemon reports no seccomp support (" + options_text + ")",
               "use a dockerd built with seccomp on a kernel with CONFIG_SECCOMP_FILTER"));
  }
  const std::string cgroup = info->value("host::CgroupVersion", std::string("?"));
  out.push_back(passed("docker cgroups",
                       "v" + cgroup + ", driver " + info->value("CgroupDriver", std::string("?"))));
  return out;
}

}  // namespace rf::docker
