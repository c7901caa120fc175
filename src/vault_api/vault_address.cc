#include "vault_api/vault_address.h"

#include <cstdlib>

namespace rf::vault {
namespace {

Error bad(std::string_view url, const std::string& why) {
  return make_error("Vault address \"" + std::string(url) + "\"", why);
}

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : fallback;
}

}  // namespace

Result<VaultAddress> parse_vault_address(std::string_view url) {
  while (!url.empty() && url.back() == '/') url.remove_suffix(1);
  VaultAddress a;
  a.url = std::string(url);
  docker::DockerHost& h = a.endpoint;
  h.kind = docker::DockerHost::Kind::kTcp;
  h.url = a.url;
  std::string_view rest;
  if (url.substr(0, 7) == "http://") {
    rest = url.substr(7);
  } else if (url.substr(0, 8) == "https://") {
    rest = url.substr(8);
    h.tls = true;
  } else {
    return bad(url, "expected http://HOST[:PORT] or https://HOST[:PORT]");
  }
  if (rest.find('/') != std::string_view::npos) return bad(url, "a path is not supported");
  if (rest.find('@') != std::string_view::npos) {
    return bad(url,
               "credentials in the address are not supported (the token comes from "
               "VAULT_TOKEN)");
  }
  std::string_view port_text;
  if (!rest.empty() && rest.front() == '[') {
    const auto close = rest.find(']');
    if (close == std::string_view::npos) return bad(url, "an unclosed '[' in the host");
    h.host = std::string(rest.substr(1, close - 1));
    rest.remove_prefix(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return bad(url, "expected ':PORT' after ']'");
      port_text = rest.substr(1);
    }
  } else {
    const auto colon = rest.rfind(':');
    h.host = std::string(rest.substr(0, colon));
    if (colon != std::string_view::npos) port_text = rest.substr(colon + 1);
  }
  if (h.host.empty()) return bad(url, "no host");
  for (unsigned char c : h.host) {
    if (c <= 0x20 || c >= 0x7f || c == '"' || c == '\\') return bad(url, "a bad byte in the host");
  }
  h.port = 8200;
  if (!port_text.empty() || (rest.size() > 0 && rest.back() == ':')) {
    int port = 0;
    for (char c : port_text) {
      if (c < '0' || c > '9' || port > 65535) return bad(url, "the port is not a number");
      port = port * 10 + (c - '0');
    }
    if (port < 1 || port > 65535) return bad(url, "the port must be 1-65535");
    h.port = port;
  }
  if (h.tls) {
    h.ca_file = env_or("VAULT_CACERT", "");
    const std::string skip = env_or("VAULT_SKIP_VERIFY", "");
    h.tls_verify = !(skip == "1" || skip == "true" || skip == "TRUE" || skip == "True");
  }
  return a;
}

}  // namespace rf::vault
