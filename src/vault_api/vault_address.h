// Where a Vault server is (host side): VAULT_ADDR-style URLs, parsed into the
// transport docker_api opens (plain TCP, or TLS through its relay). Errors
// name the address.
//
//   http://127.0.0.1:8200     plain HTTP (loopback tests, a local agent)
//   https://vault.corp:8200   TLS; CA from VAULT_CACERT, else the system's;
//                             VAULT_SKIP_VERIFY=true turns verification off
#pragma once

#include <string>
#include <string_view>

#include "core/result.h"
#include "docker_api/docker_host.h"

namespace rf::vault {

struct VaultAddress {
  std::string url;              // as given, without a trailing '/'
  docker::DockerHost endpoint;  // kTcp, with tls for https://
};

// Parses "http(s)://host[:port]" (a name, an IPv4 address or [IPv6]); the
// port defaults to 8200. TLS settings come from VAULT_CACERT and
// VAULT_SKIP_VERIFY, as with the vault CLI.
Result<VaultAddress> parse_vault_address(std::string_view url);

}  // namespace rf::vault
