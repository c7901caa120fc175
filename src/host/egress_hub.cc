#include "host/egress_hub.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "core/counters.h"
#include "core/io.h"
#include "core/log.h"

namespace rf::host {

Result<std::shared_ptr<proxy::EgressProxy>> EgressHub::proxy() {
  if (proxy_) return proxy_;
  std::error_code ec;
  std::filesystem::create_directories(options_.socket_dir, ec);
  if (ec) return sys_error("create " + options_.socket_dir, ec.value());
  // Searchable (the sandbox's bind mount is made through it), writable by root only.
  if (::chmod(options_.socket_dir.c_str(), 0711) != 0)
    return sys_error("chmod " + options_.socket_dir);
  proxy::ProxyOptions o;
  o.resolve_override = options_.resolve;
  o.edge = options_.edge;
  o.on_event = [](const proxy::ConnectionEvent& e) {
    counters::add(e.allowed ? R"(ringfence_egress_decisions_total{decision="allowed"})"
                            : R"(ringfence_egress_decisions_total{decision="refused"})");
    spdlog::info("egress {}", proxy::to_json(e));
  };
  auto started = proxy::EgressProxy::start(std::move(o));
  if (!started) return started.take_error();
  proxy_ = std::shared_ptr<proxy::EgressProxy>(std::move(*started));
  return proxy_;
}

Result<std::unique_ptr<EgressLease>> EgressHub::add(const SandboxSpec& spec, uid_t uid, gid_t gid) {
  auto policy = net::EgressPolicy::parse(spec.allow);
  if (!policy) return make_error("allow", policy.error().to_string());
  std::lock_guard lock(mu_);
  auto px = proxy();
  if (!px) return make_error("start egress proxy", px.error().to_string());
  const std::string path = options_.socket_dir + "/" + spec.id + ".sock";
  proxy::SandboxEgress egress;
  egress.sandbox_id = spec.id;
  egress.policy = std::move(*policy);
  egress.max_connections = static_cast<int>(spec.limits.egress_connections);
  egress.max_bytes_sent = spec.limits.egress_bytes;
  RF_TRY((*px)->add_sandbox(std::move(egress), path, proxy::SocketOwner{uid, gid}));
  auto lease = std::make_unique<EgressLease>(*px, spec.id, path);
  if (spec.tls_intercept) RF_TRY(write_trust(*lease));
  return lease;
}

Status EgressHub::write_trust(EgressLease& lease) {
  auto pem = lease.proxy_->sandbox_ca(lease.id_);
  if (!pem) return make_error("sandbox CA", pem.error().to_string());
  SandboxTrust t{options_.socket_dir + "/" + lease.id_ + ".trust.pem"};
  lease.trust_ = t;  // removed with the lease, whatever was written
  std::string bundle;
  if (auto system = read_file(options_.system_bundle)) {
    bundle = std::move(*system);
    if (!bundle.empty() && bundle.back() != '\n') bundle += '\n';
  } else {
    spdlog::warn("sandbox {}: no trust bundle at {}: it trusts its own CA only", lease.id_,
                 options_.system_bundle);
  }
  bundle += *pem;
  // Public certificates: world-readable, written whole before it is bound.
  RF_TRY(write_file_atomic(t.bundle, bundle, 0644));
  return ok_status();
}

EgressLease::~EgressLease() {
  proxy_->remove_sandbox(id_);
  if (trust_) ::unlink(trust_->bundle.c_str());
}

}  // namespace rf::host
