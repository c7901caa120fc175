#include "native/egress.h"

#include <sys/stat.h>

#include <cerrno>
#include <filesystem>

#include "core/log.h"

namespace rf::native {

Result<std::map<std::string, std::vector<net::IpAddress>>> parse_resolve_override(
    std::string_view text) {
  std::map<std::string, std::vector<net::IpAddress>> out;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view entry = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (entry.empty()) continue;
    const size_t eq = entry.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      return make_error("proxy resolve \"" + std::string(entry) + "\"", "expected NAME=ADDRESS");
    }
    auto target = net::parse_authority(entry.substr(0, eq), 80);
    if (!target)
      return make_error("proxy resolve \"" + std::string(entry) + "\"", target.error().to_string());
    auto addr = net::parse_ip_literal(entry.substr(eq + 1));
    if (!addr) {
      return make_error("proxy resolve \"" + std::string(entry) + "\"",
                        "\"" + std::string(entry.substr(eq + 1)) + "\" is not an IP address");
    }
    out[target->host].push_back(*addr);
  }
  return out;
}

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
  o.on_event = [](const proxy::ConnectionEvent& e) {
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
  return std::make_unique<EgressLease>(*px, spec.id, path);
}

}  // namespace rf::native
