// What a client asks of a sandbox's lifetime when it creates one through a
// front door (issue 41), beside its spec: `timeout` (seconds, or a duration
// such as "10m": how long it lives from now), `idle_timeout` (ended after
// that long with no call), `name` (unique among the project's live
// sandboxes, to find it again) and `metadata` (string keys and values, to
// list by), and `cwd` (where its calls run when they do not say; the spec's
// `env` is its default environment). These are not the spec's:
// take_lifetime() removes them from the body before the spec is read. The operator policy bounds
// the timeout (policy/operator_policy.h: sandbox_timeout, sandbox_timeout_max).
#pragma once

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"

namespace rf {

struct LifetimeRequest {
  std::optional<std::chrono::milliseconds> timeout;  // none: the policy's default
  std::chrono::milliseconds idle_timeout{0};         // 0: no idle expiry
  std::string name;                                  // "" = unnamed
  std::map<std::string, std::string> metadata;
  std::string cwd;  // "" = /workspace
};

inline constexpr size_t kMaxMetadataPairs = 64;
inline constexpr size_t kMaxMetadataKey = 128;
inline constexpr size_t kMaxMetadataValue = 1024;

// Removes the lifetime fields from `body` (a create request's object) and
// reads them; errors name the field ("metadata.team", "timeout").
Result<LifetimeRequest> take_lifetime(nlohmann::json& body);

// A timeout given as seconds (a number) or a duration text ("10m"), more
// than 0; `field` names it in the error.
Result<std::chrono::milliseconds> parse_lifetime_timeout(const nlohmann::json& value,
                                                         std::string_view field);

// A sandbox name: 1-64 of [A-Za-z0-9._-], not starting with '.' or '-'.
Status check_sandbox_name(std::string_view name, std::string_view field);

}  // namespace rf
