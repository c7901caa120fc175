// Host side: the named volume that carries the tool runner and our seccomp
// filters into every docker sandbox (mounted read-only at /.ringfence). It is
// filled once per daemon through the archive API — so it works on remote
// daemons too — and named after the sha256 of its contents, so a new runner
// build gets a new volume and a running sandbox never sees its runner change.
#pragma once

#include <string>

#include "core/result.h"
#include "docker_api/api_client.h"

namespace rf::docker {

struct RunnerVolumeContents {
  std::string runner;   // the static ringfence-tool-runner binary
  std::string seccomp;  // proto/seccomp_blob.h encoding of our filters
  // "ringfence-runner-<first 16 hex of sha256(contents)>"
  std::string volume_name() const;
};

// Reads the runner binary and builds the default seccomp filters.
Result<RunnerVolumeContents> load_runner_volume_contents(const std::string& runner_path);

// Makes sure the volume exists and holds the contents; fills it through a
// helper container made from `image` (any image on the daemon will do).
Status ensure_runner_volume(ApiClient& api, const RunnerVolumeContents& contents,
                            const std::string& image);

}  // namespace rf::docker
