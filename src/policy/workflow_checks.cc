#include "policy/workflow_checks.h"

#include <set>

#include "net/egress_policy.h"

namespace rf::policy {
namespace {

using workflow::ExecutionMode;
using workflow::StepDef;
using workflow::StepKind;

// "wf.yaml:12: steps[2].sandbox.network: " before a policy's message.
Status at(const StepDef& step, const std::string& key, Status s) {
  if (s) return s;
  workflow::Where w = step.where;
  w.key = w.key.empty() ? key : w.key + (key.empty() ? "" : "." + key);
  Error e = s.take_error();
  return make_error(e.code, w.to_string(), e.message);
}

Status check_sandbox(const OperatorPolicy& policy, const StepDef& step) {
  if (!step.sandbox) return ok_status();
  const workflow::SandboxDef& d = *step.sandbox;
  if (!d.network.empty()) {
    auto n = parse_network_policy(d.network);
    if (n) RF_TRY(at(step, "sandbox.network", policy.check_network(*n, "")));
  } else if (!d.allow.empty()) {
    RF_TRY(at(step, "sandbox.network", policy.check_network(NetworkPolicy::kProxy, "")));
  }
  RF_TRY(at(step, "sandbox.network.allow", policy.check_egress_rules(d.allow, "allow")));
  Limits asked = policy.ceilings();
  std::set<std::string> given;
  if (d.memory_bytes) {
    asked.memory_bytes = *d.memory_bytes;
    given.insert("memory");
  }
  if (d.cpus) {
    asked.cpus = *d.cpus;
    given.insert("cpus");
  }
  if (d.pids) {
    asked.pids = *d.pids;
    given.insert("pids");
  }
  if (d.disk_bytes) {
    asked.disk_bytes = *d.disk_bytes;
    given.insert("disk");
  }
  return at(step, "sandbox", policy.bound_limits(asked, given));
}

}  // namespace

std::string base_url_rule(const std::string& base_url) {
  const auto scheme_end = base_url.find("://");
  if (scheme_end == std::string::npos) return "";
  const std::string scheme = base_url.substr(0, scheme_end);
  std::string authority = base_url.substr(scheme_end + 3);
  authority = authority.substr(0, authority.find_first_of("/?#"));
  auto a = net::parse_authority(authority, scheme == "https" ? 443 : 80);
  if (!a || !net::parse_ip_literal(a->host)) return "";
  const bool v6 = a->host.find(':') != std::string::npos;
  return (v6 ? "[" + a->host + "]" : a->host) + ":" + std::to_string(a->port);
}

Status check_workflow(const OperatorPolicy& policy, const workflow::WorkflowDef& def) {
  for (const StepDef& step : def.steps) {
    RF_TRY(at(step, "mode", policy.check_mode(workflow::to_string(step.mode), "")));
    if (step.mode == ExecutionMode::kInProcess && step.kind != StepKind::kNone) {
      RF_TRY(at(step, std::string(workflow::to_string(step.kind)),
                policy.check_step_kind(workflow::to_string(step.kind), "")));
    }
    RF_TRY(check_sandbox(policy, step));
    if (step.timeout.count() > 0) {
      auto t = step.timeout;
      RF_TRY(at(step, "timeout", policy.bound_timeout(t, true, "")));
    }
    if (step.kind == StepKind::kHttp && step.http_spec.contains("allow") &&
        step.http_spec["allow"].is_array()) {
      std::vector<std::string> rules;
      for (const auto& r : step.http_spec["allow"]) {
        if (r.is_string()) rules.push_back(r.get<std::string>());
      }
      RF_TRY(at(step, "http", policy.check_egress_rules(rules, "allow")));
    }
    if (step.kind == StepKind::kLlm && step.model) {
      const std::string rule = base_url_rule(step.model->base_url);
      if (!rule.empty()) {
        RF_TRY(at(step, "model.base_url", policy.check_egress_rules({rule}, "")));
      }
      // Without identity, the key would come from the worker's own environment.
      if (!step.model->key_env.empty() && !step.identity) {
        RF_TRY(at(step, "model.key_env", policy.check_worker_env(step.model->key_env, "")));
      }
    }
  }
  return ok_status();
}

}  // namespace rf::policy
