// Where a Docker daemon is: the DOCKER_HOST-style URL the operator gives
// (`--docker-host`, $DOCKER_HOST), parsed into plain data. Errors name the URL.
//
//   unix:///var/run/docker.sock       the default
//   tcp://127.0.0.1:2375               plain TCP
//   tcp://host:2376 + TLS              $DOCKER_TLS_VERIFY / $DOCKER_CERT_PATH, or https://
//   ssh://user@host[:port]             `ssh ... docker system dial-stdio` on the far side
#pragma once

#include <string>
#include <string_view>

#include "core/result.h"

namespace rf::docker {

struct DockerHost {
  enum class Kind { kUnix, kTcp, kSsh };
  Kind kind = Kind::kUnix;
  std::string url;         // as given, for messages and labels
  std::string path;        // kUnix: the socket's path
  std::string host;        // kTcp, kSsh: a name or address ([::1] without brackets)
  int port = 0;            // kTcp: required; kSsh: 0 means ssh's default
  std::string user;        // kSsh: empty means ssh's default
  bool tls = false;        // kTcp: TLS to the daemon
  bool tls_verify = true;  // kTcp+tls: check the daemon's certificate against ca.pem
  std::string cert_dir;    // kTcp+tls: ca.pem, cert.pem, key.pem ($DOCKER_CERT_PATH)
  std::string ca_file;     // kTcp+tls: the CA to verify against instead of cert_dir's ca.pem
                           // (Vault's VAULT_CACERT); empty with no cert_dir: the system's CAs

  // A daemon on this host, whose containers' processes and cgroups we can see.
  bool is_local() const { return kind == Kind::kUnix; }
};

// Parses a DOCKER_HOST-style URL ("unix:///p", "tcp://h:p", "https://h:p",
// "ssh://[user@]h[:p]"). TLS for tcp:// follows $DOCKER_TLS_VERIFY and
// $DOCKER_CERT_PATH as the docker CLI does.
Result<DockerHost> parse_docker_host(std::string_view url);

// $DOCKER_HOST if set (parsed), else unix:///var/run/docker.sock.
Result<DockerHost> default_docker_host();

}  // namespace rf::docker
