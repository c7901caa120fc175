// What a sandbox's self-probe printed reaches the host from inside the
// sandbox (a process there could have changed it): the bounds judged from
// any JSON at all, and the statement made of them, never crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "proof/boundary_report.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  rf::proof::BoundaryFacts f;
  f.inside = nlohmann::json::parse(text, nullptr, false);
  // Bytes that are no JSON are a mount table instead (proof/mount_table.h),
  // made valid UTF-8 as the host's JSON parser would have required.
  if (f.inside.is_discarded()) {
    const std::string table =
        nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    f.inside = {{"ns", nlohmann::json::object()}, {"mountinfo", nlohmann::json::parse(table)}};
  }
  f.host_ns = {{"user", 1}, {"mnt", 2}, {"pid", 3}, {"net", 4}};
  f.cgroup = {{"memory.max", "536870912"}};
  f.seccomp_profile = {"aa", "bb"};
  f.seccomp_loaded = {"aa", "bb"};
  const auto bounds = rf::proof::judge_bounds(f);
  const auto statement = rf::proof::report_statement(f, bounds);
  (void)rf::proof::summarize_report(statement);
  return 0;
}
