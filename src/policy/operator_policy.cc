#include "policy/operator_policy.h"

#include <algorithm>
#include <cmath>

#include "core/units.h"

namespace rf::policy {
namespace {

constexpr uint64_t kMaxProcessBuffer = 64u << 20;
constexpr int64_t kMaxProcesses = 4096;

using nlohmann::json;

const std::vector<std::string> kAllModes = {"in_process", "sandboxed", "identity_scoped",
                                            "cli_agent", "cli_agent_jit"};
const std::vector<std::string> kAllKinds = {"template", "json", "http", "llm", "approval", "sleep"};
const std::vector<std::string> kAllNetworks = {"none", "proxy", "host"};

// The built-in ceilings that are not this host's capacity.
Limits builtin_ceilings(const HostCapacity& host) {
  Limits l;
  l.cpus = host.cpus > 0 ? host.cpus : 1;
  l.memory_bytes = host.memory_bytes > 0 ? host.memory_bytes : 1ull << 30;
  l.pids = 32768;
  // /workspace and /tmp are tmpfs: they hold memory.
  l.disk_bytes = l.memory_bytes;
  l.timeout = std::chrono::hours(24);
  l.output_bytes = 1ull << 30;
  l.nofile = 1u << 20;
  l.egress_connections = 65536;
  l.egress_bytes = 0;  // no cap
  return l;
}

Result<std::vector<std::string>> strings(const json& j, const std::string& field) {
  if (!j.is_array()) return make_error(field, "expected an array of strings");
  std::vector<std::string> out;
  for (size_t i = 0; i < j.size(); ++i) {
    if (!j[i].is_string()) {
      return make_error(field + "[" + std::to_string(i) + "]", "expected a string");
    }
    out.push_back(j[i].get<std::string>());
  }
  return out;
}

Status one_of(const std::vector<std::string>& values, const std::vector<std::string>& allowed,
              const std::string& field) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (std::find(allowed.begin(), allowed.end(), values[i]) == allowed.end()) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      return make_error(field + "[" + std::to_string(i) + "]",
                        "unknown value \"" + values[i] + "\" (allowed: " + list + ")");
    }
  }
  return ok_status();
}

bool is_env_name(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

std::string joined(const std::set<std::string, std::less<>>& values) {
  std::string out;
  for (const auto& v : values) out += (out.empty() ? "" : ", ") + v;
  return out.empty() ? "none" : out;
}

}  // namespace

std::string_view to_string(Source source) {
  switch (source) {
    case Source::kBuiltIn:
      return "built-in";
    case Source::kHost:
      return "host";
    case Source::kDefault:
      return "default";
    case Source::kProject:
      return "project";
  }
  return "?";
}

Result<PolicyDoc> parse_policy_doc(const json& j) {
  if (!j.is_object()) return make_error("policy", "expected a JSON object");
  PolicyDoc d;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const json& v = it.value();
    if (key == "limits") {
      if (!v.is_object()) return make_error("limits", "expected an object of limits");
      for (auto l = v.begin(); l != v.end(); ++l) {
        const std::string field = "limits." + l.key();
        const LimitField* f = find_limit_by_json(l.key());
        if (f == nullptr) {
          std::string names;
          for (const auto& lf : limit_fields())
            names += (names.empty() ? "" : ", ") + std::string(lf.json_key);
          return make_error(field, "unknown limit (allowed: " + names + ")");
        }
        std::string text;
        if (l.value().is_string()) {
          text = l.value().get<std::string>();
        } else if (l.value().is_number()) {
          text = l.value().dump();
        } else {
          return make_error(field, "expected a string such as \"4g\" or a number");
        }
        Limits probe;
        if (auto s = f->set(probe, text); !s) return make_error(field, s.error().message);
        if (auto s = f->check(probe); !s) return make_error(field, s.error().message);
        d.limits[l.key()] = f->get(probe);
      }
    } else if (key == "networks") {
      auto list = strings(v, key);
      if (!list) return list.take_error();
      RF_TRY(one_of(*list, kAllNetworks, key));
      d.networks = std::move(*list);
    } else if (key == "egress_allow") {
      auto list = strings(v, key);
      if (!list) return list.take_error();
      for (size_t i = 0; i < list->size(); ++i) {
        if (auto p = net::EgressPolicy::parse({(*list)[i]}); !p) {
          return make_error(key + "[" + std::to_string(i) + "]", p.error().to_string());
        }
      }
      d.egress_allow = std::move(*list);
    } else if (key == "modes") {
      auto list = strings(v, key);
      if (!list) return list.take_error();
      RF_TRY(one_of(*list, kAllModes, key));
      d.modes = std::move(*list);
    } else if (key == "step_kinds") {
      auto list = strings(v, key);
      if (!list) return list.take_error();
      RF_TRY(one_of(*list, kAllKinds, key));
      d.step_kinds = std::move(*list);
    } else if (key == "worker_env") {
      auto list = strings(v, key);
      if (!list) return list.take_error();
      for (size_t i = 0; i < list->size(); ++i) {
        if (!is_env_name((*list)[i])) {
          return make_error(key + "[" + std::to_string(i) + "]",
                            "\"" + (*list)[i] + "\" is not an environment variable name");
        }
      }
      d.worker_env = std::move(*list);
    } else if (key == "sandbox_timeout" || key == "sandbox_timeout_max") {
      if (!v.is_string()) return make_error(key, "expected a duration such as \"1h\"");
      auto lasts = parse_duration(v.get<std::string>());
      if (!lasts) return make_error(key, lasts.error().message);
      if (lasts->count() <= 0) return make_error(key, "must be more than 0");
      (key == "sandbox_timeout" ? d.sandbox_timeout : d.sandbox_timeout_max) = v.get<std::string>();
    } else if (key == "process_buffer") {
      if (!v.is_string()) return make_error(key, "expected a size such as \"1m\"");
      auto bytes = parse_size(v.get<std::string>());
      if (!bytes) return make_error(key, bytes.error().message);
      if (*bytes < 4096 || *bytes > kMaxProcessBuffer)
        return make_error(key, "expected a size from 4k to 64m");
      d.process_buffer = v.get<std::string>();
    } else if (key == "volume_size_max") {
      if (!v.is_string()) return make_error(key, "expected a size such as \"10g\"");
      auto bytes = parse_size(v.get<std::string>());
      if (!bytes) return make_error(key, bytes.error().message);
      if (*bytes < (1u << 20)) return make_error(key, "expected at least 1m");
      d.volume_size_max = v.get<std::string>();
    } else if (key == "processes_max") {
      if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > kMaxProcesses)
        return make_error(key, "expected a count from 1 to 4096");
      d.processes_max = v.get<int64_t>();
    } else {
      return make_error(key,
                        "unknown field (allowed: limits, networks, egress_allow, modes, "
                        "step_kinds, worker_env, sandbox_timeout, sandbox_timeout_max, "
                        "process_buffer, processes_max, volume_size_max)");
    }
  }
  return d;
}

json policy_doc_json(const PolicyDoc& d) {
  json j = json::object();
  if (!d.limits.empty()) j["limits"] = d.limits;
  if (d.networks) j["networks"] = *d.networks;
  if (d.egress_allow) j["egress_allow"] = *d.egress_allow;
  if (d.modes) j["modes"] = *d.modes;
  if (d.step_kinds) j["step_kinds"] = *d.step_kinds;
  if (d.worker_env) j["worker_env"] = *d.worker_env;
  if (d.sandbox_timeout) j["sandbox_timeout"] = *d.sandbox_timeout;
  if (d.sandbox_timeout_max) j["sandbox_timeout_max"] = *d.sandbox_timeout_max;
  if (d.process_buffer) j["process_buffer"] = *d.process_buffer;
  if (d.processes_max) j["processes_max"] = *d.processes_max;
  if (d.volume_size_max) j["volume_size_max"] = *d.volume_size_max;
  return j;
}

PolicyDoc merged(PolicyDoc base, const PolicyDoc& changes) {
  for (const auto& [k, v] : changes.limits) base.limits[k] = v;
  if (changes.networks) base.networks = changes.networks;
  if (changes.egress_allow) base.egress_allow = changes.egress_allow;
  if (changes.modes) base.modes = changes.modes;
  if (changes.step_kinds) base.step_kinds = changes.step_kinds;
  if (changes.worker_env) base.worker_env = changes.worker_env;
  if (changes.sandbox_timeout) base.sandbox_timeout = changes.sandbox_timeout;
  if (changes.sandbox_timeout_max) base.sandbox_timeout_max = changes.sandbox_timeout_max;
  if (changes.process_buffer) base.process_buffer = changes.process_buffer;
  if (changes.processes_max) base.processes_max = changes.processes_max;
  if (changes.volume_size_max) base.volume_size_max = changes.volume_size_max;
  return base;
}

OperatorPolicy OperatorPolicy::resolve(std::string project, const PolicyDoc* project_doc,
                                       const PolicyDoc* default_doc, const HostCapacity& host) {
  OperatorPolicy p;
  p.project_ = std::move(project);
  p.ceilings_ = builtin_ceilings(host);
  const Limits host_limits = p.ceilings_;
  for (const LimitField& f : limit_fields()) {
    const std::string field = f.spec_field();
    Source source = (f.json_key == "memory" || f.json_key == "cpus" || f.json_key == "disk")
                        ? Source::kHost
                        : Source::kBuiltIn;
    for (auto [doc, from] :
         {std::pair{default_doc, Source::kDefault}, std::pair{project_doc, Source::kProject}}) {
      if (doc == nullptr) continue;
      auto it = doc->limits.find(std::string(f.json_key));
      if (it == doc->limits.end()) continue;
      Limits candidate = p.ceilings_;
      if (!f.set(candidate, it->second)) continue;  // checked when it was set
      p.ceilings_ = candidate;
      source = from;
    }
    // Never above what this host has.
    if (source != Source::kHost && source != Source::kBuiltIn &&
        (f.json_key == "memory" || f.json_key == "cpus" || f.json_key == "disk") &&
        f.amount(p.ceilings_) > f.amount(host_limits)) {
      (void)f.set(p.ceilings_, f.get(host_limits));
      source = Source::kHost;
    }
    p.sources_[field] = source;
  }
  auto pick = [&](const std::optional<std::vector<std::string>> PolicyDoc::*member,
                  const std::vector<std::string>& builtin, const char* field) {
    std::vector<std::string> value = builtin;
    Source source = Source::kBuiltIn;
    if (default_doc != nullptr && default_doc->*member) {
      value = *(default_doc->*member);
      source = Source::kDefault;
    }
    if (project_doc != nullptr && project_doc->*member) {
      value = *(project_doc->*member);
      source = Source::kProject;
    }
    p.sources_[field] = source;
    return value;
  };
  for (const auto& n : pick(&PolicyDoc::networks, {"none", "proxy"}, "networks")) {
    if (auto parsed = parse_network_policy(n)) p.networks_.insert(*parsed);
  }
  p.egress_allow_ = pick(&PolicyDoc::egress_allow, {}, "egress_allow");
  // Each rule was checked when it was set; one that no longer parses is left out.
  std::vector<std::string> good;
  for (const auto& r : p.egress_allow_) {
    if (net::EgressPolicy::parse({r})) good.push_back(r);
  }
  if (auto parsed = net::EgressPolicy::parse(good)) p.egress_ = std::move(*parsed);
  for (const auto& m : pick(&PolicyDoc::modes, kAllModes, "modes")) p.modes_.insert(m);
  for (const auto& k : pick(&PolicyDoc::step_kinds, kAllKinds, "step_kinds"))
    p.step_kinds_.insert(k);
  for (const auto& e : pick(&PolicyDoc::worker_env, {}, "worker_env")) p.worker_env_.insert(e);
  auto duration = [&](const std::optional<std::string> PolicyDoc::*member,
                      std::chrono::milliseconds& out, const char* field) {
    p.sources_[field] = Source::kBuiltIn;
    for (auto [doc, from] :
         {std::pair{default_doc, Source::kDefault}, std::pair{project_doc, Source::kProject}}) {
      if (doc == nullptr || !(doc->*member)) continue;
      auto d = parse_duration(*(doc->*member));
      if (!d || d->count() <= 0) continue;  // checked when it was set
      out = *d;
      p.sources_[field] = from;
    }
  };
  duration(&PolicyDoc::sandbox_timeout, p.sandbox_timeout_, "sandbox_timeout");
  duration(&PolicyDoc::sandbox_timeout_max, p.sandbox_timeout_max_, "sandbox_timeout_max");
  // A default above the most is lowered to it.
  p.sandbox_timeout_ = std::min(p.sandbox_timeout_, p.sandbox_timeout_max_);
  p.sources_["process_buffer"] = p.sources_["processes_max"] = Source::kBuiltIn;
  p.sources_["volume_size_max"] = Source::kBuiltIn;
  for (auto [doc, from] :
       {std::pair{default_doc, Source::kDefault}, std::pair{project_doc, Source::kProject}}) {
    if (doc == nullptr) continue;
    if (doc->process_buffer) {
      auto bytes = parse_size(*doc->process_buffer);
      if (bytes && *bytes >= 4096 && *bytes <= kMaxProcessBuffer) {  // checked when it was set
        p.process_buffer_ = *bytes;
        p.sources_["process_buffer"] = from;
      }
    }
    if (doc->processes_max) {
      p.processes_max_ = static_cast<size_t>(*doc->processes_max);
      p.sources_["processes_max"] = from;
    }
    if (doc->volume_size_max) {
      if (auto bytes = parse_size(*doc->volume_size_max)) {
        p.volume_size_max_ = *bytes;
        p.sources_["volume_size_max"] = from;
      }
    }
  }
  return p;
}

std::string OperatorPolicy::where_set(std::string_view field) const {
  auto it = sources_.find(field);
  const Source s = it == sources_.end() ? Source::kBuiltIn : it->second;
  switch (s) {
    case Source::kProject:
      return "the operator policy of project " + project_;
    case Source::kDefault:
      return "the default operator policy";
    case Source::kHost:
      return "this host's capacity";
    case Source::kBuiltIn:
      break;
  }
  return "the built-in operator policy";
}

Status OperatorPolicy::denied(std::string_view field, const std::string& message) const {
  return make_error(ErrorCode::kDenied, std::string(field), message);
}

Status OperatorPolicy::bound_limits(Limits& limits, const std::set<std::string>& given,
                                    std::string_view where) const {
  for (const LimitField& f : limit_fields()) {
    const double asked = f.amount(limits), ceiling = f.amount(ceilings_);
    if (!(asked > ceiling)) continue;
    if (given.count(std::string(f.json_key))) {
      const std::string field =
          where == "--" ? f.exec_flag() : std::string(where) + "." + std::string(f.json_key);
      const std::string shown =
          f.json_key == "egress_bytes" && f.get(limits) == "0" ? "0 (no cap)" : f.get(limits);
      return denied(field, shown + " is above the ceiling of " + f.get(ceilings_) + " set by " +
                               where_set(f.spec_field()) + " (ringfence policy show --project " +
                               project_ + " --explain)");
    }
    (void)f.set(limits, f.get(ceilings_));
  }
  return ok_status();
}

Status OperatorPolicy::bound_timeout(std::chrono::milliseconds& timeout, bool given,
                                     std::string_view field) const {
  if (timeout <= ceilings_.timeout) return ok_status();
  if (given) {
    return denied(field, format_duration(timeout) + " is above the ceiling of " +
                             format_duration(ceilings_.timeout) + " set by " +
                             where_set("limits.timeout"));
  }
  timeout = ceilings_.timeout;
  return ok_status();
}

Status OperatorPolicy::bound_sandbox_timeout(std::chrono::milliseconds& timeout, bool given,
                                             std::string_view field) const {
  if (!given) {
    timeout = sandbox_timeout_;
    return ok_status();
  }
  if (timeout.count() <= 0) return denied(field, "must be more than 0");
  if (timeout <= sandbox_timeout_max_) return ok_status();
  return denied(field, format_duration(timeout) + " is above the most a sandbox may live, " +
                           format_duration(sandbox_timeout_max_) + ", set by " +
                           where_set("sandbox_timeout_max"));
}

Status OperatorPolicy::bound_volume_size(uint64_t bytes, std::string_view field) const {
  if (bytes <= volume_size_max_) return ok_status();
  return denied(field, format_size(bytes) + " is above the largest volume (volume_size_max), " +
                           format_size(volume_size_max_) + ", set by " +
                           where_set("volume_size_max"));
}

Status OperatorPolicy::check_network(NetworkPolicy network, std::string_view field) const {
  if (networks_.count(network)) return ok_status();
  std::string allowed;
  for (NetworkPolicy n : networks_)
    allowed += (allowed.empty() ? "" : ", ") + std::string(to_string(n));
  return denied(field, "network " + std::string(to_string(network)) + " is not allowed by " +
                           where_set("networks") +
                           " (allowed: " + (allowed.empty() ? "none" : allowed) + ")");
}

void OperatorPolicy::reserve(const std::vector<std::string>& endpoints) {
  for (const auto& e : endpoints) {
    auto a = net::parse_authority(e, std::nullopt);
    if (!a) continue;
    auto ip = net::parse_ip_literal(a->host);
    if (!ip) continue;
    reserved_.emplace_back(*ip, a->port);
    reserved_text_.push_back(e);
  }
}

Status OperatorPolicy::check_egress_rules(const std::vector<std::string>& rules,
                                          std::string_view field) const {
  for (size_t i = 0; i < rules.size(); ++i) {
    const std::string where = std::string(field) + "[" + std::to_string(i) + "]";
    auto parsed = net::EgressPolicy::parse({rules[i]});
    if (!parsed) return make_error(where, parsed.error().to_string());
    for (const auto& reach : parsed->address_rules()) {
      // Serve's own listener and the store: only a rule naming exactly them.
      for (size_t r = 0; r < reserved_.size(); ++r) {
        if (!reach.reaches(reserved_[r].first, reserved_[r].second)) continue;
        const bool named = std::any_of(
            egress_.address_rules().begin(), egress_.address_rules().end(), [&](const auto& o) {
              return o.single && o.addr == reserved_[r].first && o.port &&
                     *o.port == reserved_[r].second && !o.any_port;
            });
        if (!named) {
          return denied(where, "rule " + rules[i] + " reaches " + reserved_text_[r] +
                                   ", this server's own API or its store, which no tenant may "
                                   "reach");
        }
      }
      if (reach.public_only() || egress_.covers(reach)) continue;
      return denied(where, "rule " + rules[i] +
                               " reaches beyond public address space (loopback, link-local, "
                               "private or reserved), which " +
                               where_set("egress_allow") +
                               " does not allow (an operator allows it with ringfence policy set "
                               "--project " +
                               project_ + " --egress-allow '" + rules[i] + "')");
    }
  }
  return ok_status();
}

Status OperatorPolicy::check_spec(SandboxSpec& spec, const std::set<std::string>& given) const {
  RF_TRY(bound_limits(spec.limits, given));
  RF_TRY(check_network(spec.network, "network"));
  return check_egress_rules(spec.allow, "allow");
}

Status OperatorPolicy::check_mode(std::string_view mode, std::string_view field) const {
  if (modes_.count(mode)) return ok_status();
  return denied(field, "execution mode " + std::string(mode) + " is not allowed by " +
                           where_set("modes") + " (allowed: " + joined(modes_) + ")");
}

Status OperatorPolicy::check_step_kind(std::string_view kind, std::string_view field) const {
  if (step_kinds_.count(kind)) return ok_status();
  return denied(field, "in_process step kind " + std::string(kind) + " is not allowed by " +
                           where_set("step_kinds") + " (allowed: " + joined(step_kinds_) + ")");
}

Status OperatorPolicy::check_worker_env(std::string_view name, std::string_view field) const {
  if (worker_env_.count(name)) return ok_status();
  return denied(field, "the worker's environment variable " + std::string(name) +
                           " is not readable by steps under " + where_set("worker_env") +
                           " (a step takes credentials from its identity: profiles; an operator "
                           "allows a variable with ringfence policy set --project " +
                           project_ + " --worker-env " + std::string(name) + ")");
}

json OperatorPolicy::values() const {
  json limits = json::object();
  for (const LimitField& f : limit_fields()) limits[std::string(f.json_key)] = f.get(ceilings_);
  json networks = json::array();
  for (NetworkPolicy n : networks_) networks.push_back(std::string(to_string(n)));
  return {{"limits", limits},
          {"networks", networks},
          {"egress_allow", egress_allow_},
          {"modes", std::vector<std::string>(modes_.begin(), modes_.end())},
          {"step_kinds", std::vector<std::string>(step_kinds_.begin(), step_kinds_.end())},
          {"worker_env", std::vector<std::string>(worker_env_.begin(), worker_env_.end())},
          {"sandbox_timeout", format_duration(sandbox_timeout_)},
          {"sandbox_timeout_max", format_duration(sandbox_timeout_max_)},
          {"process_buffer", format_size(process_buffer_)},
          {"processes_max", processes_max_},
          {"volume_size_max", format_size(volume_size_max_)}};
}

json OperatorPolicy::explain() const {
  const json v = values();
  json out = json::object();
  auto source = [&](const std::string& field) {
    auto it = sources_.find(field);
    return std::string(to_string(it == sources_.end() ? Source::kBuiltIn : it->second));
  };
  json limits = json::object();
  for (const LimitField& f : limit_fields()) {
    limits[std::string(f.json_key)] = {{"value", f.get(ceilings_)},
                                       {"source", source(f.spec_field())}};
  }
  out["limits"] = limits;
  for (const char* k :
       {"networks", "egress_allow", "modes", "step_kinds", "worker_env", "sandbox_timeout",
        "sandbox_timeout_max", "process_buffer", "processes_max", "volume_size_max"}) {
    out[k] = {{"value", v[k]}, {"source", source(k)}};
  }
  return out;
}

}  // namespace rf::policy
