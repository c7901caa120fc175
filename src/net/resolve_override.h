// The egress proxy's resolver override: names it maps to addresses without
// DNS (the addresses still pass the policy). `--proxy-resolve NAME=ADDR` on
// `sandbox exec` and `worker start`, sandbox.proxy_resolve in worker.yaml.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "net/egress_policy.h"

namespace rf::net {

using ResolveOverride = std::map<std::string, std::vector<IpAddress>>;

// "name=addr[,name=addr...]"; errors name the bad entry.
Result<ResolveOverride> parse_resolve_override(std::string_view text);

}  // namespace rf::net
