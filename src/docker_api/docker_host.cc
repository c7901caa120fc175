#include "docker_api/docker_host.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>

namespace rf::docker {
namespace {

Error bad(std::string_view url, const std::string& why) {
  return make_error("docker host \"" + std::string(url) + "\"", why);
}

Result<int> parse_port(std::string_view url, std::string_view text) {
  if (text.empty() || text.size() > 5 ||
      text.find_first_not_of("0123456789") != std::string::npos) {
    return bad(url, "bad port \"" + std::string(text) + "\"");
  }
  const int port = std::atoi(std::string(text).c_str());
  if (port < 1 || port > 65535) return bad(url, "port out of range: " + std::string(text));
  return port;
}

// "host:port", "[v6]:port", "host" -> host and port text (empty when none).
Result<std::pair<std::string, std::string>> split_host_port(std::string_view url,
                                                            std::string_view hp) {
  if (hp.empty()) return bad(url, "no host");
  if (hp.front() == '[') {
    const auto close = hp.find(']');
    if (close == std::string_view::npos) return bad(url, "unclosed [ in an IPv6 address");
    std::string host(hp.substr(1, close - 1));
    std::string_view rest = hp.substr(close + 1);
    if (rest.empty()) return std::make_pair(host, std::string());
    if (rest.front() != ':') return bad(url, "expected :PORT after ]");
    return std::make_pair(host, std::string(rest.substr(1)));
  }
  const auto colon = hp.rfind(':');
  if (colon == std::string_view::npos) return std::make_pair(std::string(hp), std::string());
  if (hp.find(':') != colon) return bad(url, "an IPv6 address needs brackets: [::1]:2375");
  return std::make_pair(std::string(hp.substr(0, colon)), std::string(hp.substr(colon + 1)));
}

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

// $HOME, else the passwd entry's home directory.
std::string home_dir() {
  const std::string home = env_or("HOME", "");
  if (!home.empty()) return home;
  passwd pw{};
  passwd* found = nullptr;
  char buf[4096];
  if (::getpwuid_r(::getuid(), &pw, buf, sizeof buf, &found) == 0 && found != nullptr &&
      found->pw_dir != nullptr) {
    return found->pw_dir;
  }
  return "/";
}

}  // namespace

Result<DockerHost> parse_docker_host(std::string_view url) {
  DockerHost h;
  h.url = std::string(url);
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) {
    return bad(url, "expected unix:///path, tcp://HOST:PORT or ssh://USER@HOST");
  }
  const std::string_view scheme = url.substr(0, scheme_end);
  std::string_view rest = url.substr(scheme_end + 3);
  if (scheme == "unix") {
    h.kind = DockerHost::Kind::kUnix;
    if (rest.empty() || rest.front() != '/') return bad(url, "needs an absolute socket path");
    if (rest.size() >= 108) return bad(url, "socket path longer than 107 bytes");
    h.path = std::string(rest);
    return h;
  }
  if (scheme == "tcp" || scheme == "https" || scheme == "http") {
    h.kind = DockerHost::Kind::kTcp;
    while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
    if (rest.find('/') != std::string_view::npos) return bad(url, "a path is not supported");
    auto hp = split_host_port(url, rest);
    if (!hp) return hp.take_error();
    h.host = hp->first;
    if (h.host.empty()) return bad(url, "no host");
    if (hp->second.empty()) {
      const bool v6 = h.host.find(':') != std::string::npos;
      return bad(url, "needs a port, such as " + std::string(scheme) + "://" +
                          (v6 ? "[" + h.host + "]" : h.host) +
                          (scheme == "https" ? ":2376" : ":2375"));
    }
    auto port = parse_port(url, hp->second);
    if (!port) return port.take_error();
    h.port = *port;
    // As the docker CLI: $DOCKER_TLS_VERIFY (any non-empty value) turns TLS on for tcp://.
    h.tls = scheme == "https" || (scheme == "tcp" && !env_or("DOCKER_TLS_VERIFY", "").empty());
    h.tls_verify = true;
    h.cert_dir = env_or("DOCKER_CERT_PATH", home_dir() + "/.docker");
    return h;
  }
  if (scheme == "ssh") {
    h.kind = DockerHost::Kind::kSsh;
    while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
    if (rest.find('/') != std::string_view::npos) return bad(url, "a path is not supported");
    const auto at = rest.rfind('@');
    if (at != std::string_view::npos) {
      h.user = std::string(rest.substr(0, at));
      if (h.user.empty()) return bad(url, "empty user before @");
      if (h.user.find(':') != std::string::npos) {
        return bad(url, "a password in the URL is not supported (use an ssh key)");
      }
      rest = rest.substr(at + 1);
    }
    auto hp = split_host_port(url, rest);
    if (!hp) return hp.take_error();
    h.host = hp->first;
    if (h.host.empty() || h.host.front() == '-') return bad(url, "bad host");
    if (!h.user.empty() && h.user.front() == '-') return bad(url, "bad user");
    if (!hp->second.empty()) {
      auto port = parse_port(url, hp->second);
      if (!port) return port.take_error();
      h.port = *port;
    }
    return h;
  }
  return bad(url, "unknown scheme \"" + std::string(scheme) + "\" (unix, tcp, https or ssh)");
}

Result<DockerHost> default_docker_host() {
  const char* env = std::getenv("DOCKER_HOST");
  if (env != nullptr && *env != '\0') {
    auto h = parse_docker_host(env);
    if (!h) return make_error("$DOCKER_HOST", h.error().to_string());
    return h;
  }
  return parse_docker_host("unix:///var/run/docker.sock");
}

}  // namespace rf::docker
