// Volumes as a client asks for them (issue 41), one parser for every door:
// making one (`{"name": "state", "size": "1g"}`), and mounting the
// project's volumes in a sandbox at its creation, beside its spec:
//   "volumes": [{"name": "state", "path": "/var/agent/state", "readonly": false}]
// take_volumes() removes them from the body before the spec is read (the
// spec's own `volumes` are the server's: sandbox/spec.h). Errors name the
// field ("volumes[0].path").
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"

namespace rf {

struct VolumeAsk {
  std::string name;
  std::string path;
  bool readonly = false;
};

// A volume's name: 1-64 of [A-Za-z0-9._-], not starting with '.' or '-'.
Status check_volume_name(const std::string& name, const std::string& field);
Result<std::vector<VolumeAsk>> take_volumes(nlohmann::json& body);

struct VolumeCreate {
  std::string name;
  std::optional<uint64_t> size;  // none: 1g
};
inline constexpr uint64_t kDefaultVolumeSize = 1ull << 30;
inline constexpr uint64_t kMinVolumeSize = 16ull << 20;  // ext4's own needs, and a little room
Result<VolumeCreate> parse_volume_create(const nlohmann::json& body);

}  // namespace rf
