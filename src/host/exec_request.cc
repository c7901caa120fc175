#include "host/exec_request.h"

#include <utility>

namespace rf::host {

proto::ExecRequest make_exec_request(const ExecCall& call, const SandboxSpec& spec,
                                     std::map<std::string, std::string> base_env) {
  proto::ExecRequest req;
  req.argv = call.argv;
  req.env = std::move(base_env);
  // Every backend's network proxy is reached the same way: the runner's bridge.
  if (spec.network == NetworkPolicy::kProxy) {
    for (const auto& [k, v] : proxy_environment()) req.env[k] = v;
    if (spec.tls_intercept) {
      for (const auto& [k, v] : trust_environment()) req.env[k] = v;
    }
  }
  for (const auto& [k, v] : spec.env) req.env[k] = v;
  for (const auto& [k, v] : call.env) req.env[k] = v;
  req.cwd = call.cwd;
  req.timeout_ms = (call.timeout.count() > 0 ? call.timeout : spec.limits.timeout).count();
  req.output_limit =
      static_cast<int64_t>(call.output_limit ? call.output_limit : spec.limits.output_bytes);
  if (call.background) {
    req.timeout_ms = 0;
    req.output_limit = 0;
  }
  req.pty = call.pty;
  req.rows = call.rows;
  req.cols = call.cols;
  return req;
}

std::vector<std::string> start_probe_args(const SandboxSpec& spec, bool inside_only) {
  if (!spec.probe_at_start) return {};
  std::vector<std::string> names;
  for (const auto& [k, v] : make_exec_request(ExecCall{}, spec, base_environment(false)).env)
    names.push_back(k);
  std::vector<std::string> args = {"--self-probe-at-start", proto::join_env_names(names)};
  if (inside_only) args.push_back("--self-probe-inside-only");
  return args;
}

ExecResult to_exec_result(const proto::ExitStatus& status) {
  ExecResult r;
  r.exit_code = status.exit_code;
  r.signal = status.signal;
  r.timed_out = status.timed_out;
  r.output_truncated = status.output_truncated;
  r.limit = status.limit;
  r.exec_errno = status.exec_errno;
  r.error = status.error;
  r.wall = std::chrono::microseconds(status.wall_us);
  r.cpu_user = std::chrono::microseconds(status.user_us);
  r.cpu_system = std::chrono::microseconds(status.sys_us);
  r.peak_memory_bytes = static_cast<uint64_t>(status.max_rss_kb) * 1024;
  return r;
}

}  // namespace rf::host
