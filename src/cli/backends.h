// Every backend this build has, registered by name for the CLI's commands and
// the worker they start: native, local, docker and remotedocker. The CLI is the
// composition root: nothing below it registers or names a backend.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/result.h"
#include "net/resolve_override.h"
#include "worker/settings.h"
#include "worker/worker.h"

namespace rf::cli {

struct BackendConfig {
  std::string docker_host;  // --docker-host; empty: $DOCKER_HOST or the default socket
  // --proxy-resolve NAME=ADDR: names the egress proxy maps to addresses
  // without DNS (the addresses still pass the policy).
  net::ResolveOverride proxy_resolve;
  // --egress-ca-file: the CAs the gateway and proxy deliveries verify upstreams against.
  std::string egress_ca_file;
};

// Idempotent; a later call replaces the backends' configuration.
void register_backends(const BackendConfig& config = {});

// Whether `sandbox list` / `reap` without --backend should ask the docker
// daemon too: a host was given, DOCKER_HOST is set, or the default socket exists.
bool docker_configured(const BackendConfig& config);

// The backends as a worker's settings configure them (docker host, proxy names).
Result<BackendConfig> backend_config(const worker::WorkerSettings& settings);

// Registers the backends as `settings` configure them, then places the worker
// (worker::place: the backend and mode it serves with, or why it cannot start).
Result<worker::Placement> place_worker(const worker::WorkerSettings& settings);

}  // namespace rf::cli
