// Host side: short-lived helper containers the docker backend needs besides
// sandboxes — one never started, to look at an image's files or fill the
// runner volume through the archive API, and one that runs a single command
// (an image's own tool runner's --version). Helpers are bound like sandboxes
// (nobody, no capabilities, no network, read-only root) and labelled
// ringfence.helper, so `sandbox reap` removes any a crash left behind.
#pragma once

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/result.h"
#include "docker_api/api_client.h"

namespace rf::docker {

inline constexpr const char* kLabelHelper = "ringfence.helper";

struct HelperMount {
  std::string volume;  // a named volume
  std::string target;  // where it is mounted
  bool read_only = true;
};

// Creates (does not start) a helper container from `image`; returns its id.
Result<std::string> create_helper(ApiClient& api, const std::string& image,
                                  const std::vector<std::string>& entrypoint,
                                  const std::vector<HelperMount>& mounts = {});

// Force-removes a container; a container already gone is not an error.
Status remove_container(ApiClient& api, const std::string& id);

// Whether `path` exists in the (created) container's file system, and its mode.
struct PathStat {
  bool exists = false;
  bool directory = false;
  uint32_t mode = 0;
};
Result<PathStat> stat_path(ApiClient& api, const std::string& container_id,
                           const std::string& path);

struct HelperRun {
  int64_t exit_code = -1;
  std::string out, err;
};
// Runs `entrypoint` in a helper container to its end (at most `timeout`),
// collecting its output; the container is removed after.
Result<HelperRun> run_helper(ApiClient& api, const std::string& image,
                             const std::vector<std::string>& entrypoint,
                             std::chrono::milliseconds timeout);

// The owner labels every container of ours carries (host, pid, start time).
std::map<std::string, std::string> owner_labels();

}  // namespace rf::docker
