// Host side: what an image name means on a daemon — its id and digest, pulled
// when absent (if allowed), whether it ships its own tool runner and whether
// that runner is in the host's version range (docs/images.md). The first
// resolution of each image is logged at INFO with its digest.
#pragma once

#include <chrono>
#include <string>

#include "core/result.h"
#include "docker_api/api_client.h"

namespace rf::docker {

struct ImageInfo {
  std::string ref;          // as asked: "rf-test/busybox:1"
  std::string id;           // "sha256:..." (the config digest)
  std::string repo_digest;  // "name@sha256:..." when it came from a registry; else ""
  bool pulled = false;      // it was absent and we pulled it now
  std::string own_runner;   // the image's own runner's --version line; "" when none
  std::string runner_path;  // what runs as PID 1: injected or the image's own
  std::string working_dir;  // the image's WORKDIR
  // "sha256:..." for display: the repo digest's hash when known, else the id.
  std::string digest() const;
};

// Inspects `ref`, pulling it when absent and `allow_pull`. Errors say what to
// do: "image rf-test/x:1 is not on the daemon at unix:///... and pulling is off: ...".
Result<ImageInfo> inspect_image(ApiClient& api, const std::string& ref, bool allow_pull);

// Looks for an image's own runner and checks its version; sets own_runner and
// runner_path. An image whose runner is out of range is an error naming both
// versions and what to do.
Status check_image_runner(ApiClient& api, ImageInfo& info);

}  // namespace rf::docker
