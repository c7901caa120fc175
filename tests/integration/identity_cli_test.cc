// Identity end to end (issue 11), as a new user tries it: the real
// `ringfence` binary sets a secret and a project profile, a real worker runs
// identity-scoped calls in native sandboxes, and the tests try to leak the
// value every way they know: output in every form, argv, /proc/<pid>/environ
// from another user, the store file, the worker's log, the audit log; then
// revocation, soft (refused at enqueue and at sandbox start) and hard (a
// running call ends revoked within a second).
#include <gtest/gtest.h>
#include <sodium.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "integration/identity_cli_fixture.h"
#include "store/db.h"
#include "store/store.h"
#include "support/ci_skip.h"
#include "support/cli_process.h"
#include "support/slowdown.h"
#include "support/vault_server.h"
#include "worker/worker.h"

namespace rf::testing {
namespace {

// Done when 1-2: a secret and a project profile; the call sees the key (the
// test compares a hash), and its output never shows the value in any form.
TEST_F(IdentityCli, ACallSeesTheKeyAndItsOutputNeverShowsTheValue) {
  ASSERT_NO_FATAL_FAILURE(set_secret_and_profile());
  Cli& worker = start_worker({"--sandbox-mode", "per_run"});
  std::string out, err;
  ASSERT_EQ(run(call("acme", "r1", {"--identity"},
                     {"sh", "-c", "printf %s \"$ANTHROPIC_API_KEY\" | sha256sum; echo $MODEL"}),
                std::nullopt, &out, &err),
            0)
      << err;
  EXPECT_EQ(out, sha256_hex(secret_) + "  -\nsmall\n");
  // Printed raw, base64 (whole environment, so at some alignment; and
  // wrapped every 76 characters, as `base64` does by default), hex, and
  // byte by byte: each redacted.
  ASSERT_EQ(run(call("acme", "r1", {"--identity"},
                     {"sh", "-c",
                      "echo \"raw:$ANTHROPIC_API_KEY\"; env | base64 -w0; echo; env | base64; "
                      "printf %s \"$ANTHROPIC_API_KEY\" | od -An -tx1 | tr -d ' \\n'; echo; "
                      "printf %s \"$ANTHROPIC_API_KEY\" | base64 -w0; echo; "
                      "printf 'x%s' \"$ANTHROPIC_API_KEY\" | base64 -w0; echo; "
                      "printf %s \"$ANTHROPIC_API_KEY\" >&2"}),
                std::nullopt, &out, &err),
            0)
      << err;
  EXPECT_NE(out.find("raw:[REDACTED:ANTHROPIC_API_KEY]"), std::string::npos) << out;
  EXPECT_EQ(err, "[REDACTED:ANTHROPIC_API_KEY]");
  expect_no_form_in(out, "stdout");
  expect_no_form_in(err, "stderr");
  // Nor once the wrapped lines are joined again.
  std::string joined = out;
  std::erase(joined, '\n');
  expect_no_form_in(joined, "stdout, its lines joined");
  // A later call of the same run without --identity, in the same sandbox, is redacted too.
  ASSERT_EQ(run(call("acme", "r1", {}, {"sh", "-c", "echo $ANTHROPIC_API_KEY; echo plain"}),
                std::nullopt, &out, &err),
            0)
      << err;
  EXPECT_EQ(out, "\nplain\n");  // its environment does not have it
  // Nowhere outside: the store file (and its WAL), the worker's log, the audit log.
  worker.signal(SIGTERM);
  worker.wait(30s);
  const std::string worker_log = worker.out() + worker.err();
  workers_.clear();  // `worker` is gone from here on
  for (const char* f : {"/ringfence.db", "/ringfence.db-wal"}) {
    if (std::filesystem::exists(dir_ + f)) expect_no_form_in(slurp_bytes(dir_ + f), f);
  }
  expect_no_form_in(worker_log, "the worker's log");
  ASSERT_EQ(run({"audit", "show", "--json"}, std::nullopt, &out, &err), 0) << err;
  expect_no_form_in(out, "the audit log");
  EXPECT_NE(out.find("identity.inject"), std::string::npos) << out;
  EXPECT_NE(out.find("\"redaction\""), std::string::npos) << out;
  // The sandbox's lifecycle: created for run r1, destroyed when the worker stopped.
  EXPECT_NE(out.find("\"sandbox.create\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"sandbox.destroy\""), std::string::npos) << out;
  // Done when 4: the chain verifies, then fails after an edit of the file.
  ASSERT_EQ(run({"audit", "verify"}, std::nullopt, &out, &err), 0) << out << err;
  EXPECT_EQ(out.rfind("audit log intact: ", 0), 0u) << out;
  {
    auto db = store::Db::open(worker::store_path(dir_));
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(db->exec("UPDATE audit_events SET actor = 'someone else' WHERE seq = 2").ok());
  }
  EXPECT_EQ(run({"audit", "verify"}, std::nullopt, &out, &err), 1);
  EXPECT_EQ(out, "audit log NOT intact: event 2: its hash does not match its fields (edited?)\n");
}

// The value is in no argv and, from outside the sandbox's user, in no
// /proc/<pid>/environ.
TEST_F(IdentityCli, TheValueIsInNoArgvAndNoEnvironReadableFromOutside) {
  ASSERT_NO_FATAL_FAILURE(set_secret_and_profile());
  start_worker({"--sandbox-mode", "per_tool"});
  Cli sleeper(call("acme", "r1", {"--identity"}, {"sleep", "31.25"}));
  // Find the sandboxed sleep.
  pid_t pid = 0;
  const auto end = Clock::now() + 20s;
  while (pid == 0 && Clock::now() < end) {
    for (const auto& e : std::filesystem::directory_iterator("/proc")) {
      const std::string name = e.path().filename();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::string cmd = slurp_bytes(e.path().string() + "/cmdline");
      if (cmd == std::string("sleep\0"
                             "31.25\0",
                             12))
        pid = std::stoi(name);
    }
    if (pid == 0) std::this_thread::sleep_for(50ms);
  }
  ASSERT_NE(pid, 0) << "the sandboxed sleep never showed up";
  // argv of every process on the host.
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    EXPECT_EQ(slurp_bytes(e.path().string() + "/cmdline").find(secret_), std::string::npos)
        << "argv of pid " << name;
  }
  // Root can read it (it is that sandbox's environment); nobody else can.
  EXPECT_NE(slurp_bytes("/proc/" + std::to_string(pid) + "/environ").find(secret_),
            std::string::npos);
  const pid_t child = ::fork();
  if (child == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(3);
    const int fd = ::open(("/proc/" + std::to_string(pid) + "/environ").c_str(), O_RDONLY);
    ::_exit(fd < 0 && errno == EACCES ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "another user could open /proc/<pid>/environ of the sandboxed process";
  sleeper.signal(SIGKILL);
}

// Done when 3: after `secret revoke` the next call is refused, naming the key
// and the secret; after `--hard`, a running call ends as revoked within a second.
TEST_F(IdentityCli, RevokedIsRefusedAndHardRevokedEndsARunningCall) {
  ASSERT_NO_FATAL_FAILURE(set_secret_and_profile());
  start_worker({"--sandbox-mode", "per_run", "--pool-target", "2"});
  std::string out, err;
  ASSERT_EQ(run(call("acme", "r1", {"--identity"}, {"true"}), std::nullopt, &out, &err), 0) << err;
  // Hard: a running call ends revoked.
  Cli sleeper(call("acme", "r2", {"--identity"}, {"sleep", "30"}));
  auto s = store::Store::open(worker::store_path(dir_));
  ASSERT_TRUE(s.ok());
  const auto end = Clock::now() + 20s;
  while (Clock::now() < end) {
    auto v = (*s)->call(2);
    if (v && v->state == store::CallState::running) break;
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_EQ((*s)->call(2)->state, store::CallState::running);
  const auto revoked_at = Clock::now();
  ASSERT_EQ(run({"secret", "revoke", "acme-anthropic", "--hard"}, std::nullopt, &out, &err), 0)
      << err;
  EXPECT_EQ(sleeper.wait(10s), 125);
  const auto took = Clock::now() - revoked_at;
  EXPECT_LT(took, test::scaled(1500ms))
      << "ended after " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
      << " ms (1 s to end it, plus the client's own wait; slowdown " << test::kSlowdown << ")";
  EXPECT_EQ((*s)->call(2)->state, store::CallState::revoked);
  EXPECT_NE(sleeper.err().find("acme-anthropic was hard-revoked"), std::string::npos)
      << sleeper.err();
  // Refused at enqueue, naming the key and the secret.
  EXPECT_EQ(run(call("acme", "r3", {"--identity"}, {"true"}), std::nullopt, &out, &err), 125);
  EXPECT_NE(err.find("key ANTHROPIC_API_KEY"), std::string::npos) << err;
  EXPECT_NE(err.find("secret acme-anthropic"), std::string::npos) << err;
  // A new version makes it active again; a soft revoke then refuses again.
  ASSERT_EQ(run({"secret", "set", "acme-anthropic"}, secret_ + "2", nullptr, &err), 0) << err;
  ASSERT_EQ(run(call("acme", "r4", {"--identity"}, {"true"}), std::nullopt, &out, &err), 0) << err;
  ASSERT_EQ(run({"secret", "revoke", "acme-anthropic"}, std::nullopt, &out, &err), 0) << err;
  EXPECT_EQ(run(call("acme", "r5", {"--identity"}, {"true"}), std::nullopt, &out, &err), 125);
  EXPECT_NE(err.find("revoked"), std::string::npos) << err;
}

// Checked again at sandbox start: a call enqueued before the revocation, and
// served from a pool warmed before it, never receives the value.
TEST_F(IdentityCli, ARevocationAfterEnqueueIsCaughtAtSandboxStart) {
  ASSERT_NO_FATAL_FAILURE(set_secret_and_profile());
  std::string out, err;
  Cli queued(call("acme", "r1", {"--identity"}, {"sh", "-c", "echo got:$ANTHROPIC_API_KEY"}));
  auto s = store::Store::open(worker::store_path(dir_));
  ASSERT_TRUE(s.ok());
  const auto end = Clock::now() + 20s;
  while (!(*s)->call(1).ok() && Clock::now() < end) std::this_thread::sleep_for(20ms);
  ASSERT_EQ(run({"secret", "revoke", "acme-anthropic"}, std::nullopt, &out, &err), 0) << err;
  start_worker({"--sandbox-mode", "per_tool", "--pool-target", "2"});
  EXPECT_EQ(queued.wait(30s), 125);
  EXPECT_EQ(queued.out(), "");
  EXPECT_NE(queued.err().find("key ANTHROPIC_API_KEY"), std::string::npos) << queued.err();
  EXPECT_NE(queued.err().find("acme-anthropic, which is revoked"), std::string::npos)
      << queued.err();
}

// A Vault secret (the KV v2 fixture on loopback): set through ringfence, read
// back by hvac, injected by a worker that has VAULT_TOKEN, redacted in the
// output; and when Vault goes down, the next call is refused, never given a
// value it read before.
TEST_F(IdentityCli, AVaultSecretIsInjectedAndFailsClosedWhenVaultGoesDown) {
  const std::string token = "hvs." + random_secret();
  VaultServer vault(dir_, token);
  const std::vector<std::string> env = {"VAULT_TOKEN=" + token, "RINGFENCE_VAULT_CACHE_TTL_MS=0"};
  std::string out, err;
  ASSERT_EQ(run({"secret", "set", "acme-vault", "--backend", "vault", "--vault-addr", vault.addr(),
                 "--vault-path", "acme/anthropic"},
                secret_, &out, &err, env),
            0)
      << err;
  const auto seen = vault.hvac({"read", "acme/anthropic"});
  EXPECT_EQ(seen["value"], secret_);
  EXPECT_EQ(seen["version"], 1);
  // Without the token, the CLI cannot write to Vault, and says why.
  EXPECT_NE(run({"secret", "set", "acme-vault", "--backend", "vault", "--vault-addr", vault.addr()},
                secret_, &out, &err, {"VAULT_TOKEN="}),
            0);
  EXPECT_NE(err.find("VAULT_TOKEN"), std::string::npos) << err;
  ASSERT_EQ(run({"identity", "profile", "set", "acme", "--level", "project", "--project", "acme",
                 "ANTHROPIC_API_KEY=secret:acme-vault"},
                std::nullopt, nullptr, &err),
            0)
      << err;
  start_worker({"--sandbox-mode", "per_tool"}, env);
  ASSERT_EQ(run(call("acme", "r1", {"--identity"},
                     {"sh", "-c",
                      "printf %s \"$ANTHROPIC_API_KEY\" | sha256sum; "
                      "echo \"raw:$ANTHROPIC_API_KEY\""}),
                std::nullopt, &out, &err),
            0)
      << err;
  EXPECT_EQ(out, sha256_hex(secret_) + "  -\nraw:[REDACTED:ANTHROPIC_API_KEY]\n");
  expect_no_form_in(err, "the CLI's stderr");

  vault.stop();
  EXPECT_NE(run(call("acme", "r2", {"--identity"}, {"sh", "-c", "echo got:$ANTHROPIC_API_KEY"}),
                std::nullopt, &out, &err),
            0);
  EXPECT_EQ(out.find("got:"), std::string::npos) << out;
  EXPECT_NE(err.find("Vault is unreachable"), std::string::npos) << err;
  expect_no_form_in(out + err, "the refused call's output");
  EXPECT_EQ(err.find(token), std::string::npos);
}

// Project B's calls and resolutions never see project A's secrets.
TEST_F(IdentityCli, AnotherProjectNeverSeesTheSecret) {
  ASSERT_NO_FATAL_FAILURE(set_secret_and_profile());
  start_worker({"--sandbox-mode", "per_tool"});
  std::string out, err;
  ASSERT_EQ(run(call("acme", "r1", {"--identity"}, {"sh", "-c", "echo ${#ANTHROPIC_API_KEY}"}),
                std::nullopt, &out, &err),
            0)
      << err;
  EXPECT_EQ(out, std::to_string(secret_.size()) + "\n");
  ASSERT_EQ(run(call("globex", "r2", {"--identity"}, {"sh", "-c", "echo ${#ANTHROPIC_API_KEY}"}),
                std::nullopt, &out, &err),
            0)
      << err;
  EXPECT_EQ(out, "0\n");
  ASSERT_EQ(run({"identity", "resolve", "--project", "globex", "--json"}, std::nullopt, &out, &err),
            0)
      << err;
  EXPECT_EQ(nlohmann::json::parse(out)["keys"].size(), 0u) << out;
}

// Sandbox mode none: refused for production, refused elsewhere without the
// operator's opt-in, and loud with it.
TEST_F(IdentityCli, ModeNoneRefusesIdentityUnlessOptedInAndNeverForProduction) {
  ASSERT_NO_FATAL_FAILURE(set_secret_and_profile());
  std::string out, err;
  ASSERT_EQ(run({"identity", "profile", "set", "everyone", "--level", "system",
                 "ANTHROPIC_API_KEY=secret:acme-anthropic"},
                std::nullopt, nullptr, &err),
            0)
      << err;
  start_worker({"--sandbox-mode", "none"});
  EXPECT_EQ(run(call("dev", "r1", {"--identity"}, {"true"}), std::nullopt, &out, &err), 125);
  EXPECT_NE(err.find("set sandbox.allow_identity_without_sandbox: true"), std::string::npos) << err;
  EXPECT_EQ(run(call("prod", "r2", {"--identity", "--environment", "production"}, {"true"}),
                std::nullopt, &out, &err),
            125);
  EXPECT_NE(err.find("project prod is production"), std::string::npos) << err;
  // Opted in: development runs, with a warning on the call's stderr; production still refused.
  for (auto& w : workers_) {
    w->signal(SIGTERM);
    w->wait(30s);
  }
  workers_.clear();
  const std::string config = dir_ + "/worker.yaml";
  std::ofstream(config) << "sandbox:\n  allow_identity_without_sandbox: true\n";
  start_worker({"--sandbox-mode", "none", "--config", config});
  ASSERT_EQ(run(call("dev", "r3", {"--identity"}, {"sh", "-c", "echo ${#ANTHROPIC_API_KEY}"}),
                std::nullopt, &out, &err),
            0)
      << err;
  EXPECT_EQ(out, std::to_string(secret_.size()) + "\n");
  EXPECT_NE(err.find("WARNING: identity values given to a call with no sandbox"), std::string::npos)
      << err;
  EXPECT_EQ(run(call("prod", "r4", {"--identity"}, {"true"}), std::nullopt, &out, &err), 125);
  EXPECT_NE(err.find("project prod is production"), std::string::npos) << err;
}

// Bad input: each refused with a clear error that names it, writing nothing.
TEST_F(IdentityCli, BadInputIsRefusedByName) {
  std::string out, err;
  EXPECT_EQ(run({"secret", "set", "empty"}, "", nullptr, &err), 2);
  EXPECT_NE(err.find("secret empty: the value is empty"), std::string::npos) << err;
  EXPECT_EQ(run({"secret", "set", "huge"}, std::string(65 * 1024, 'x'), nullptr, &err), 2);
  EXPECT_NE(err.find("secret huge: the value is 66560 bytes; at most 65536"), std::string::npos)
      << err;
  EXPECT_EQ(run({"identity", "profile", "set", "p", "--level", "project", "--project", "acme",
                 "KEY=secret:nope"},
                std::nullopt, nullptr, &err),
            2);
  EXPECT_NE(err.find("key KEY names secret nope, which does not exist"), std::string::npos) << err;
  EXPECT_EQ(run({"identity", "profile", "set", "p", "--level", "galaxy", "KEY=value:x"},
                std::nullopt, nullptr, &err),
            2);
  EXPECT_NE(err.find("unknown level \"galaxy\""), std::string::npos) << err;
  EXPECT_EQ(run({"identity", "profile", "set", "p", "--level", "project", "--project", "acme",
                 "KEY=value:"},
                std::nullopt, nullptr, &err),
            2);
  EXPECT_NE(err.find("the value is empty"), std::string::npos) << err;
  ASSERT_EQ(run({"identity", "profile", "set", "a", "--level", "project", "--project", "acme",
                 "KEY=value:x"},
                std::nullopt, nullptr, &err),
            0)
      << err;
  EXPECT_EQ(run({"identity", "profile", "set", "b", "--level", "project", "--project", "acme",
                 "KEY=value:y"},
                std::nullopt, nullptr, &err),
            2);
  EXPECT_NE(err.find("key KEY is already defined at level project for this scope by profile a"),
            std::string::npos)
      << err;
  // Nothing half-written: b does not exist.
  EXPECT_EQ(run({"identity", "profile", "show", "b"}, std::nullopt, nullptr, &err), 2);
  // A corrupt key file fails closed, naming the file.
  ASSERT_EQ(run({"secret", "set", "s"}, "value", nullptr, &err), 0) << err;
  ASSERT_EQ(run({"identity", "profile", "set", "c", "--level", "project", "--project", "acme2",
                 "K=secret:s"},
                std::nullopt, nullptr, &err),
            0)
      << err;
  std::ofstream(dir_ + "/secrets.key", std::ios::trunc) << "short";
  EXPECT_EQ(run({"identity", "resolve", "--project", "acme2"}, std::nullopt, &out, &err), 125);
  EXPECT_NE(err.find("key file " + dir_ + "/secrets.key: is corrupt"), std::string::npos) << err;
  EXPECT_EQ(run({"secret", "set", "s"}, "v2", nullptr, &err), 2);
  EXPECT_NE(err.find("key file " + dir_ + "/secrets.key"), std::string::npos) << err;
}

}  // namespace
}  // namespace rf::testing
