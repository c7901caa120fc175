// The `ringfence` executable as built: static-pie by default
// (cmake/static_cli.cmake), with the lazily built command line of main.cc.
// What a static binary does differently from a dynamic one is glibc's name
// services: it must not load NSS modules (cli/name_services.h).
#include <grp.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <unistd.h>

#include "integration/harness.h"
#include "support/ci_skip.h"

namespace rf::testing {
namespace {

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// A uid that /etc/passwd does not list, and HOME unset: the CLI asks glibc
// for the user's home (worker/config_file.cc home_directory). The host's
// nsswitch.conf then goes on to other modules (libnss_systemd on Debian 12),
// which a static binary cannot load: before the fix it died with SIGSEGV.
TEST(CliStart, AUserMissingFromPasswdWithoutHomeGetsTheRootDirectory) {
  if (::geteuid() != 0) RF_SKIP() << "switching to another uid needs root";
  uid_t uid = 4242;
  while (::getpwuid(uid) != nullptr) ++uid;
  auto r = run_cli({"worker", "config", "--sandbox-mode", "per_run"}, "", [uid] {
    ::unsetenv("HOME");
    if (::setgroups(0, nullptr) != 0 || ::setgid(uid) != 0 || ::setuid(uid) != 0) ::_exit(98);
  });
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(first_line(r.out), "state_dir: //.ringfence/state");
}

// Root is in /etc/passwd: the same lookup finds its home there.
TEST(CliStart, RootWithoutHomeGetsItsHomeFromPasswd) {
  if (::geteuid() != 0) RF_SKIP() << "the test expects to run as root";
  const passwd* root = ::getpwuid(0);
  ASSERT_NE(root, nullptr);
  const std::string home = root->pw_dir;
  auto r =
      run_cli({"worker", "config", "--sandbox-mode", "per_run"}, "", [] { ::unsetenv("HOME"); });
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(first_line(r.out), "state_dir: " + home + "/.ringfence/state");
}

// Only the command on the command line is built; the others are still listed,
// and a wrong one is still a usage error (exit 2), with CLI11's messages.
TEST(CliStart, HelpListsEveryCommandAndAnUnknownOneIsAUsageError) {
  auto help = run_cli({"help"});
  EXPECT_EQ(help.exit_code, 0) << help.err;
  for (const char* c : {"sandbox", "call", "run", "worker", "help"}) {
    EXPECT_NE(help.out.find("\n  " + std::string(c) + " "), std::string::npos) << c << help.out;
  }
  auto version = run_cli({"--log-level", "debug", "--version"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_EQ(version.out, "ringfence " RF_VERSION "\n");
  auto unknown = run_cli({"--log-level", "info", "sandboxes", "exec"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_EQ(first_line(unknown.err), "ringfence: A subcommand is required");
  auto nested = run_cli({"--log-level", "info", "sandbox", "exec", "--bogus", "--", "true"});
  EXPECT_EQ(nested.exit_code, 2);
  EXPECT_EQ(first_line(nested.err), "ringfence: The following argument was not expected: --bogus");
}

// Issue 40: a mistyped option names the nearest the command has.
TEST(CliStart, AMistypedOptionNamesTheNearestOne) {
  auto memory = run_cli({"sandbox", "exec", "--memory", "1g", "--", "true"});
  EXPECT_EQ(memory.exit_code, 2);
  EXPECT_EQ(first_line(memory.err),
            "ringfence: The following argument was not expected: --memory (did you mean --mem?)");
  auto timeout = run_cli({"sandbox", "exec", "--timeot=3s", "--", "true"});
  EXPECT_EQ(timeout.exit_code, 2);
  EXPECT_NE(timeout.err.find("(did you mean --timeout?)"), std::string::npos) << timeout.err;
  // The program's own options count too (--store falls through to every command).
  auto store = run_cli({"run", "show", "r1", "--stor", "x"});
  EXPECT_EQ(store.exit_code, 2);
  EXPECT_NE(store.err.find("(did you mean --store?)"), std::string::npos) << store.err;
  // Nothing near: no guess.
  auto far = run_cli({"sandbox", "exec", "--zzzzzzzz", "--", "true"});
  EXPECT_EQ(far.err.find("did you mean"), std::string::npos) << far.err;
}

}  // namespace
}  // namespace rf::testing
