// Starting a helper process (core/spawn.h): what it inherits of ours.
#include "core/spawn.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace rf {
namespace {

// The worker holds Vault's token and the store's URI in its environment; ssh
// (the remote docker relay) and the TLS helpers get the rest of it, not those.
TEST(SpawnHelper, OurCredentialsNeverReachAHelpersEnvironment) {
  ::setenv("VAULT_TOKEN", "hvs.never-handed-on", 1);
  ::setenv("RINGFENCE_STORE", "postgres://u:never-handed-on@127.0.0.1/db", 1);
  ::setenv("PGPASSWORD", "never-handed-on", 1);
  ::setenv("RF_SPAWN_TEST_KEPT", "1", 1);
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  auto pid = spawn_helper({"env"}, {{-1, 0}, {p[1], 1}}, nullptr, /*search_path=*/true);
  ::close(p[1]);
  ASSERT_TRUE(pid.ok()) << pid.error().to_string();
  std::string env;
  char buf[4096];
  for (ssize_t n; (n = ::read(p[0], buf, sizeof buf)) > 0;) env.append(buf, n);
  ::close(p[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(*pid, &status, 0), *pid);
  EXPECT_EQ(status, 0);
  for (const char* name : {"VAULT_TOKEN", "RINGFENCE_STORE", "PGPASSWORD", "RF_SPAWN_TEST_KEPT"})
    ::unsetenv(name);
  EXPECT_EQ(env.find("never-handed-on"), std::string::npos) << env;
  EXPECT_NE(("\n" + env).find("\nRF_SPAWN_TEST_KEPT=1\n"), std::string::npos) << env;
  EXPECT_NE(env.find("PATH="), std::string::npos) << env;
}

}  // namespace
}  // namespace rf
