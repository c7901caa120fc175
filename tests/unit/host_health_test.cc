// `sandbox doctor`'s host checks (src/sandbox/host_health.h), without root: the
// free-disk verdict on given figures, and the state dir probe on real paths.
#include "host/host_health.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace rf {
namespace {

namespace fs = std::filesystem;
constexpr uint64_t kGiB = 1ull << 30;

TEST(DoctorHostChecks, FreeDiskNeedsAGibibyteAndFivePercent) {
  const HealthCheck plenty =
      host::free_disk_verdict("free disk (state dir)", "/var", {100 * kGiB, 30 * kGiB});
  EXPECT_TRUE(plenty.ok);
  EXPECT_TRUE(plenty.required);
  EXPECT_EQ(plenty.name, "free disk (state dir)");
  EXPECT_EQ(plenty.detail, "30.0 GiB free of 100.0 GiB (30%) in /var");
  EXPECT_EQ(plenty.remedy, "");

  // 4 GiB is plenty of bytes, but the file system is 98% full.
  const HealthCheck full =
      host::free_disk_verdict("free disk (state dir)", "/var", {200 * kGiB, 4 * kGiB});
  EXPECT_FALSE(full.ok);
  EXPECT_TRUE(full.required);
  EXPECT_EQ(full.detail, "4.0 GiB free of 200.0 GiB (2%) in /var");
  EXPECT_EQ(full.remedy,
            "free at least 1.0 GiB and 5% on the file system of /var: `ringfence sandbox reap "
            "--older-than 10m` "
            "removes orphaned sandboxes' scratch dirs; then look for large files (du -xsh /var/*)");

  // Half free, but under a gibibyte.
  const HealthCheck small =
      host::free_disk_verdict("free disk (scratch root)", "/tmp", {kGiB, kGiB / 2});
  EXPECT_FALSE(small.ok);
  EXPECT_EQ(small.detail, "512.0 MiB free of 1.0 GiB (50%) in /tmp");

  const HealthCheck edge =
      host::free_disk_verdict("free disk (state dir)", "/x", {20 * kGiB, kGiB});
  EXPECT_TRUE(edge.ok) << edge.detail;  // exactly 1 GiB and 5%
}

TEST(DoctorHostChecks, StateDirUnderAFileFailsNamingPathAndErrno) {
  char base[] = "/tmp/rf-health-XXXXXX";
  ASSERT_NE(::mkdtemp(base), nullptr);
  const std::string file = std::string(base) + "/file";
  { std::ofstream(file) << "x"; }
  const HealthCheck c = host::check_state_dir_writable(file + "/state");
  EXPECT_FALSE(c.ok);
  EXPECT_TRUE(c.required);
  EXPECT_EQ(c.name, "state dir writable");
  EXPECT_EQ(c.detail, "create " + file + "/state: Not a directory (ENOTDIR)");
  EXPECT_EQ(c.remedy,
            "a component of " + file +
                "/state is not a directory: move that file away; or point the worker elsewhere "
                "(--state-dir, or state_dir in the worker config)");
  // Free disk measures the nearest path that exists.
  const HealthCheck disk = host::check_free_disk("free disk (state dir)", file + "/state");
  EXPECT_NE(disk.detail.find(" in " + file), std::string::npos) << disk.detail;
  fs::remove_all(base);
}

TEST(DoctorHostChecks, StateDirIsCreatedAndTheProbeRemoved) {
  char base[] = "/tmp/rf-health-XXXXXX";
  ASSERT_NE(::mkdtemp(base), nullptr);
  const std::string state = std::string(base) + "/a/b";
  const HealthCheck c = host::check_state_dir_writable(state);
  EXPECT_TRUE(c.ok) << c.detail;
  EXPECT_EQ(c.detail, state + " (created, synced and removed a file)");
  EXPECT_TRUE(fs::is_directory(state));
  EXPECT_TRUE(fs::is_empty(state));
  fs::remove_all(base);
}

}  // namespace
}  // namespace rf
