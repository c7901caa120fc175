// The operator's policy (issue 39): per project, with a default, in the store
// (store/policy_store.h), set by `ringfence policy set` and shown by `policy
// show --explain`. Every door applies it the same way (docs/security.md):
//
//   limits       the highest a tenant may ask for, each limit of the limits
//                table (sandbox/limits.h): a request above one is refused
//                naming the limit and the ceiling; a default above one is
//                lowered to it. Never above this host's capacity.
//   networks     the network policies a tenant may ask for (built in: none,
//                proxy; host only when listed)
//   egress_allow the egress rules beyond public space a tenant may write: a
//                tenant's IP or CIDR rule that reaches loopback, link-local,
//                private or any other non-public space must be covered by one
//                of these (and serve's own listener and the store only by a
//                rule naming that address and port)
//   modes        the execution modes a project's workflow steps may use
//   step_kinds   the in_process step kinds they may use
//   worker_env   the worker's environment variables a step may read (an llm
//                step's model.key_env): by default none; credentials come
//                from the identity cascade
//   sandbox_timeout, sandbox_timeout_max
//                how long a front door's sandbox lives when its client does
//                not say (built in: 1h), and the most it may ask for (24h)
//   process_buffer, processes_max
//                each background process's output buffer (built in: 1m;
//                at most 64m), and how many may run in one sandbox (64;
//                at most 4096)
//   volume_size_max
//                the largest volume a project may make (built in: 10g)
//
// A field a project's policy leaves out is the default policy's; one the
// default leaves out is built in.
#pragma once

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "net/egress_policy.h"
#include "policy/host_capacity.h"
#include "sandbox/limits.h"
#include "sandbox/spec.h"

namespace rf::policy {

// A policy as written: every field may be left out.
struct PolicyDoc {
  std::map<std::string, std::string> limits;  // a limit's json_key -> its text ("4g")
  std::optional<std::vector<std::string>> networks;
  std::optional<std::vector<std::string>> egress_allow;
  std::optional<std::vector<std::string>> modes;
  std::optional<std::vector<std::string>> step_kinds;
  std::optional<std::vector<std::string>> worker_env;
  std::optional<std::string> sandbox_timeout, sandbox_timeout_max;  // durations ("1h")
  std::optional<std::string> process_buffer;                        // a size ("1m")
  std::optional<int64_t> processes_max;
  std::optional<std::string> volume_size_max;  // a size ("10g")
};

// Errors name the field ("limits.memory", "networks[1]").
Result<PolicyDoc> parse_policy_doc(const nlohmann::json& j);
nlohmann::json policy_doc_json(const PolicyDoc& doc);
// `changes` over `base`: the fields it gives replace base's.
PolicyDoc merged(PolicyDoc base, const PolicyDoc& changes);

// Where an effective value came from.
enum class Source { kBuiltIn, kHost, kDefault, kProject };
std::string_view to_string(Source source);

// A project's effective policy: every field has a value and a source.
class OperatorPolicy {
 public:
  // `project_doc` over `default_doc` over the built-in values, every limit
  // lowered to `host` where it is above.
  static OperatorPolicy resolve(std::string project, const PolicyDoc* project_doc,
                                const PolicyDoc* default_doc, const HostCapacity& host);

  const std::string& project() const { return project_; }
  const Limits& ceilings() const { return ceilings_; }

  // The limits of a request: each in `given` (json keys the request set
  // itself) is refused above its ceiling, naming the limit and the ceiling;
  // each other one is lowered to its ceiling. `where` prefixes the field
  // ("limits" gives "limits.memory"; "--" gives "--mem").
  Status bound_limits(Limits& limits, const std::set<std::string>& given,
                      std::string_view where = "limits") const;
  // A per-call timeout: refused above the ceiling when asked for, else lowered.
  Status bound_timeout(std::chrono::milliseconds& timeout, bool given,
                       std::string_view field) const;
  Status check_network(NetworkPolicy network, std::string_view field) const;
  // Each rule a tenant wrote, against egress_allow and the reserved
  // destinations; the error names the rule and the operator's setting.
  Status check_egress_rules(const std::vector<std::string>& rules, std::string_view field) const;
  // All of a tenant's sandbox spec: limits (given: the json keys of its
  // "limits" that the request set), network, allow rules.
  Status check_spec(SandboxSpec& spec, const std::set<std::string>& given) const;
  Status check_mode(std::string_view mode, std::string_view field) const;
  Status check_step_kind(std::string_view kind, std::string_view field) const;
  Status check_worker_env(std::string_view name, std::string_view field) const;
  // A sandbox's lifetime from now: refused above sandbox_timeout_max when
  // asked for; sandbox_timeout when not.
  Status bound_sandbox_timeout(std::chrono::milliseconds& timeout, bool given,
                               std::string_view field) const;
  std::chrono::milliseconds sandbox_timeout() const { return sandbox_timeout_; }
  std::chrono::milliseconds sandbox_timeout_max() const { return sandbox_timeout_max_; }
  // A background process's ring buffer, in bytes; how many may run in one sandbox.
  uint64_t process_buffer() const { return process_buffer_; }
  size_t processes_max() const { return processes_max_; }
  // A volume's size: refused above volume_size_max, naming it.
  Status bound_volume_size(uint64_t bytes, std::string_view field) const;
  uint64_t volume_size_max() const { return volume_size_max_; }

  // Destinations no tenant rule may reach unless egress_allow names exactly
  // that address and port: serve's own listener, the store. "HOST:PORT".
  void reserve(const std::vector<std::string>& endpoints);

  // Every field: {"value": ..., "source": "project|default|built-in|host"}.
  nlohmann::json explain() const;
  // The values alone, as a policy document would give them.
  nlohmann::json values() const;

 private:
  Status denied(std::string_view field, const std::string& message) const;
  std::string where_set(std::string_view field) const;

  std::string project_;
  Limits ceilings_;
  std::map<std::string, Source, std::less<>> sources_;  // "limits.memory", "networks", ...
  std::set<NetworkPolicy> networks_;
  std::vector<std::string> egress_allow_;
  net::EgressPolicy egress_;
  std::set<std::string, std::less<>> modes_, step_kinds_, worker_env_;
  std::chrono::milliseconds sandbox_timeout_{std::chrono::hours(1)};
  std::chrono::milliseconds sandbox_timeout_max_{std::chrono::hours(24)};
  uint64_t process_buffer_ = 1u << 20;
  size_t processes_max_ = 64;
  uint64_t volume_size_max_ = 10ull << 30;
  std::vector<std::pair<net::IpAddress, uint16_t>> reserved_;
  std::vector<std::string> reserved_text_;
};

}  // namespace rf::policy
