#include "local/doctor.h"

#include "host/runner_binary.h"
#include "local/scratch_dir.h"

namespace rf::local {
namespace {

HealthCheck scratch_root(const std::string& root) {
  HealthCheck c;
  c.name = "scratch root";
  auto prepared = prepare_scratch_root(root);
  c.ok = prepared.ok();
  if (c.ok) {
    c.detail = *prepared + " (ours, mode 0700 or stricter)";
    return c;
  }
  c.detail = prepared.error().to_string();
  c.remedy =
      "remove or fix " + root +
      " (a directory owned by this user that no one else can write), or point TMPDIR elsewhere";
  return c;
}

}  // namespace

std::vector<HealthCheck> local_doctor(const LocalOptions& options) {
  std::string runner = options.runner_path;
  if (runner.empty()) {
    auto found = host::find_runner_binary();
    runner = found ? *found : found.error().to_string();
  }
  return {
      host::runner_health(runner),
      scratch_root(options.scratch_root.empty() ? default_scratch_root() : options.scratch_root)};
}

}  // namespace rf::local
