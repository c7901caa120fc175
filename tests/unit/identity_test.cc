// Secrets, the sealing key, profiles and the cascade (issue 11), against a
// real store in a temp dir. Values must never show up in errors or in the
// store file; every bad input is refused by name, writing nothing.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "identity/audit_events.h"
#include "identity/cascade.h"
#include "identity/key_file.h"
#include "identity/secret_box.h"
#include "identity/secrets.h"
#include "store/audit_log.h"
#include "store/identity_store.h"
#include "store/store.h"
#include "store/token_store.h"
#include "store/workflow_store.h"
#include "support/store_target.h"

namespace rf::identity {
namespace {

using store::ProfileEntry;
using store::ProfileLevel;
using store::ProfileRow;

constexpr char kValue[] = "sk-live-5f1e2d3c4b5a69788796a5b4c3d2e1f0";

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs fn(i) for i in [0, n) in n forked processes released at once (they
// wait on a pipe the parent closes), each with a store and Secrets of its
// own on `target` and `state_dir`. Returns how many failed; a child says why
// on stderr. Children end with _exit: the parent's store and the tests'
// PostgreSQL belong to the parent.
int fork_all(int n, const std::string& target, const std::string& state_dir,
             const std::function<Status(Secrets&, int)>& fn) {
  int gate[2];
  if (::pipe(gate) != 0) return n;
  std::vector<pid_t> kids;
  for (int i = 0; i < n; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(gate[1]);
      char c;
      while (::read(gate[0], &c, 1) < 0 && errno == EINTR) {
      }
      auto s = store::Store::open(target);
      if (!s.ok()) {
        std::fprintf(stderr, "child %d: %s\n", i, s.error().to_string().c_str());
        ::_exit(1);
      }
      Secrets secrets(**s, SecretsOptions{state_dir, nullptr, "test"});
      const Status done = fn(secrets, i);
      if (!done.ok()) std::fprintf(stderr, "child %d: %s\n", i, done.error().to_string().c_str());
      ::_exit(done.ok() ? 0 : 1);
    }
    if (pid > 0) kids.push_back(pid);
  }
  ::close(gate[0]);
  ::close(gate[1]);  // go
  int failed = n - static_cast<int>(kids.size());
  for (pid_t pid : kids) {
    int st = 0;
    while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) ++failed;
  }
  return failed;
}

// Every sealed version in the store opens with the key file in `state_dir`;
// returns the first that does not, or "".
std::string first_unopenable(store::IdentityStore& rows, const std::string& state_dir) {
  auto key = load_key(key_file_path(state_dir));
  if (!key.ok()) return key.error().to_string();
  auto versions = rows.sealed_versions();
  if (!versions.ok()) return versions.error().to_string();
  for (const auto& v : *versions) {
    auto plain = open_sealed(*key, v.name, v.version, v.sealed, v.key_id);
    if (!plain.ok()) return plain.error().to_string();
  }
  return "";
}

class IdentityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rf-identity-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    target_ = rf::testing::fresh_store_target(dir_ + "/ringfence.db");
    auto s = store::Store::open(target_);
    ASSERT_TRUE(s.ok()) << s.error().to_string();
    store_ = std::move(*s);
    rows_ = std::make_unique<store::IdentityStore>(*store_);
    secrets_ = std::make_unique<Secrets>(*store_, SecretsOptions{dir_, nullptr, "test"});
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  int64_t set(const std::string& name, const std::string& value) {
    auto v = secrets_->set({name, SecretValue(value), "builtin", std::nullopt});
    EXPECT_TRUE(v.ok()) << v.error().to_string();
    return v.ok() ? *v : 0;
  }
  Status profile(const std::string& name, ProfileLevel level, std::vector<ProfileEntry> entries,
                 const std::string& project = "", const std::string& workflow = "",
                 const std::string& user = "") {
    ProfileRow p;
    p.name = name;
    p.level = level;
    p.project = project;
    p.workflow = workflow;
    p.user = user;
    p.entries = std::move(entries);
    return rows_->put_profile(p);
  }
  static ProfileEntry secret(const std::string& key, const std::string& name) {
    return {key, ProfileEntry::Kind::secret, name};
  }
  static ProfileEntry plain(const std::string& key, const std::string& value) {
    return {key, ProfileEntry::Kind::value, value};
  }

  std::string dir_;
  std::string target_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<store::IdentityStore> rows_;
  std::unique_ptr<Secrets> secrets_;
};

TEST_F(IdentityTest, ASecretIsSealedAtRestAndOpensWithItsKeyFile) {
  EXPECT_EQ(set("acme", kValue), 1);
  EXPECT_EQ(set("acme", std::string(kValue) + "-2"), 2);
  struct stat st {};
  ASSERT_EQ(::stat((dir_ + "/secrets.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto opened = secrets_->open_current({"acme"});
  ASSERT_TRUE(opened.ok()) << opened.error().to_string();
  EXPECT_EQ(opened->at("acme").version, 2);
  EXPECT_EQ(opened->at("acme").value.reveal(), std::string(kValue) + "-2");
  // Neither version is in the store file or its WAL in plaintext.
  for (const char* f : {"/ringfence.db", "/ringfence.db-wal"}) {
    EXPECT_EQ(slurp(dir_ + f).find("sk-live-5f1e2d3c"), std::string::npos) << f;
  }
}

TEST_F(IdentityTest, AMissingCorruptOpenOrWrongKeyFileFailsClosedNamingTheFile) {
  set("acme", kValue);
  const std::string key = dir_ + "/secrets.key";
  const std::string saved = slurp(key);
  // Missing: never a new key while sealed secrets exist.
  ASSERT_EQ(::unlink(key.c_str()), 0);
  auto opened = secrets_->open_current({"acme"});
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.error().to_string(),
            "key file " + key +
                ": is missing: the builtin secrets sealed with it cannot be opened (restore the "
                "file, or set the secrets again)");
  auto again = secrets_->set({"other", SecretValue("v"), "builtin", std::nullopt});
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.error().to_string().find("key file " + key + ": is missing"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(key));
  // Corrupt (short).
  std::ofstream(key) << "short";
  ::chmod(key.c_str(), 0600);
  opened = secrets_->open_current({"acme"});
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.error().to_string(),
            "key file " + key + ": is corrupt: it holds 5 bytes, a key is 32");
  // Readable by others.
  std::ofstream(key, std::ios::trunc) << saved;
  ::chmod(key.c_str(), 0644);
  opened = secrets_->open_current({"acme"});
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.error().to_string(),
            "key file " + key + ": is readable by others (mode 644); it must be 0600");
  // Another key (replaced file).
  ASSERT_TRUE(write_key(new_key(key), key).ok());
  opened = secrets_->open_current({"acme"});
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.error().to_string().find("secret acme version 1: was sealed by key"),
            std::string::npos)
      << opened.error().to_string();
  EXPECT_NE(opened.error().to_string().find("but key file " + key + " holds key"),
            std::string::npos);
  // The right key again.
  std::ofstream(key, std::ios::trunc) << saved;
  ::chmod(key.c_str(), 0600);
  EXPECT_TRUE(secrets_->open_current({"acme"}).ok());
}

TEST_F(IdentityTest, ASealedValueMovedToAnotherNameOrEditedDoesNotOpen) {
  auto key = load_or_create_key(dir_ + "/k");
  ASSERT_TRUE(key.ok());
  const std::string sealed = seal(*key, "a", 1, kValue);
  EXPECT_EQ(sealed.find(kValue), std::string::npos);
  EXPECT_EQ(open_sealed(*key, "a", 1, sealed, key->id)->reveal(), kValue);
  auto moved = open_sealed(*key, "b", 1, sealed, key->id);
  ASSERT_FALSE(moved.ok());
  EXPECT_EQ(moved.error().to_string(), "secret b version 1: does not open with key file " + dir_ +
                                           "/k (the stored value or the key file was changed)");
  EXPECT_FALSE(open_sealed(*key, "a", 2, sealed, key->id).ok());
  std::string edited = sealed;
  edited[30] ^= 1;
  EXPECT_FALSE(open_sealed(*key, "a", 1, edited, key->id).ok());
}

TEST_F(IdentityTest, RotateKeyReSealsEverySecretAndTheOldKeyIsGone) {
  set("a", "value-a");
  set("b", "value-b");
  set("b", "value-b2");
  const std::string old_key = slurp(dir_ + "/secrets.key");
  auto n = secrets_->rotate_key();
  ASSERT_TRUE(n.ok()) << n.error().to_string();
  EXPECT_EQ(*n, 3u);
  EXPECT_NE(slurp(dir_ + "/secrets.key"), old_key);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/secrets.key.next"));
  auto opened = secrets_->open_current({"a", "b"});
  ASSERT_TRUE(opened.ok()) << opened.error().to_string();
  EXPECT_EQ(opened->at("a").value.reveal(), "value-a");
  EXPECT_EQ(opened->at("b").value.reveal(), "value-b2");
  // Every version, not only the current ones, was re-sealed with the new key.
  auto key = load_key(dir_ + "/secrets.key");
  ASSERT_TRUE(key.ok());
  auto versions = rows_->sealed_versions();
  ASSERT_TRUE(versions.ok());
  for (const auto& v : *versions) EXPECT_EQ(v.key_id, key->id) << v.name;
}

TEST_F(IdentityTest, ARotationInterruptedAfterItsCommitIsFinishedOnTheNextOpen) {
  set("a", "value-a");
  const std::string path = dir_ + "/secrets.key";
  auto old_key = load_key(path);
  ASSERT_TRUE(old_key.ok());
  // The crash: the new key written as .next, the values re-sealed, no rename.
  SealingKey fresh = new_key(path);
  ASSERT_TRUE(write_key(fresh, path + ".next").ok());
  ASSERT_TRUE(
      rows_
          ->reseal_all(
              [&](const store::SealedVersion& v) -> Result<std::pair<std::string, std::string>> {
                auto plain = open_sealed(*old_key, v.name, v.version, v.sealed, v.key_id);
                if (!plain.ok()) return plain.take_error();
                return std::make_pair(seal(fresh, v.name, v.version, plain->reveal()), fresh.id);
              })
          .ok());
  auto opened = secrets_->open_current({"a"});
  ASSERT_TRUE(opened.ok()) << opened.error().to_string();
  EXPECT_EQ(opened->at("a").value.reveal(), "value-a");
  EXPECT_FALSE(std::filesystem::exists(path + ".next"));
}

// The first secrets of a state dir, set by many processes at once, are all
// sealed with the one key file that stays: the key is made once (link(), not
// a rename over another's).
TEST_F(IdentityTest, FirstSetsByManyProcessesAllSealWithTheOneKeyThatStays) {
  for (int round = 0; round < 5; ++round) {
    const std::string state = dir_ + "/round" + std::to_string(round);
    ASSERT_TRUE(std::filesystem::create_directory(state));
    const std::string target = rf::testing::fresh_store_target(state + "/ringfence.db");
    auto s = store::Store::open(target);
    ASSERT_TRUE(s.ok()) << s.error().to_string();
    const int failed = fork_all(16, target, state, [](Secrets& secrets, int i) -> Status {
      auto v = secrets.set(
          {"s" + std::to_string(i), SecretValue("value-" + std::to_string(i)), "builtin", {}});
      return v.ok() ? ok_status() : v.take_error();
    });
    EXPECT_EQ(failed, 0) << "round " << round;
    store::IdentityStore rows(**s);
    EXPECT_EQ(first_unopenable(rows, state), "") << "round " << round;
    auto versions = rows.sealed_versions();
    ASSERT_TRUE(versions.ok());
    EXPECT_EQ(versions->size(), 16u);
    EXPECT_FALSE(std::filesystem::exists(state + "/secrets.key.next"));
  }
}

// Many processes setting one name at once: each version is sealed as the
// version it is stored as, so every one of them opens.
TEST_F(IdentityTest, SetsOfOneNameByManyProcessesEachOpenAsTheVersionStored) {
  set("shared", "first");  // the key exists: only the versions race
  for (int round = 0; round < 4; ++round) {
    const int failed = fork_all(8, target_, dir_, [](Secrets& secrets, int i) -> Status {
      auto v = secrets.set({"shared", SecretValue("value-" + std::to_string(i)), "builtin", {}});
      return v.ok() ? ok_status() : v.take_error();
    });
    EXPECT_EQ(failed, 0) << "round " << round;
    EXPECT_EQ(first_unopenable(*rows_, dir_), "") << "round " << round;
  }
  auto row = rows_->secret("shared");
  ASSERT_TRUE(row.ok() && *row);
  EXPECT_EQ((*row)->current_version, 1 + 4 * 8);
  EXPECT_TRUE(secrets_->open_current({"shared"}).ok());
}

// Two rotate-keys at once take turns: both succeed, and the key file left
// is the one every version is sealed with.
TEST_F(IdentityTest, TwoRotationsAtOnceTakeTurnsAndEverySecretStillOpens) {
  set("a", "value-a");
  set("b", "value-b");
  set("b", "value-b2");
  for (int round = 0; round < 20; ++round) {
    const int failed = fork_all(2, target_, dir_, [](Secrets& secrets, int) -> Status {
      auto n = secrets.rotate_key();
      return n.ok() ? ok_status() : n.take_error();
    });
    EXPECT_EQ(failed, 0) << "round " << round;
    ASSERT_EQ(first_unopenable(*rows_, dir_), "") << "round " << round;
    ASSERT_FALSE(std::filesystem::exists(dir_ + "/secrets.key.next")) << "round " << round;
  }
  auto opened = secrets_->open_current({"a", "b"});
  ASSERT_TRUE(opened.ok()) << opened.error().to_string();
  EXPECT_EQ(opened->at("a").value.reveal(), "value-a");
  EXPECT_EQ(opened->at("b").value.reveal(), "value-b2");
}

// Sets and opens racing a rotation: no value is left sealed by the retired
// key, and no open removes the rotation's new key file (nor fails) while the
// rotation is under way. Many versions make the re-sealing transaction long.
TEST_F(IdentityTest, SetsAndOpensDuringARotationLeaveEveryVersionOpen) {
  for (int i = 0; i < 100; ++i) set("bulk", "value-" + std::to_string(i));
  set("a", "value-a");
  for (int round = 0; round < 10; ++round) {
    const int failed = fork_all(5, target_, dir_, [round](Secrets& secrets, int i) -> Status {
      if (i == 0) {
        auto n = secrets.rotate_key();
        return n.ok() ? ok_status() : n.take_error();
      }
      if (i < 4) {
        auto v = secrets.set({"a", SecretValue("value-a" + std::to_string(round)), "builtin", {}});
        return v.ok() ? ok_status() : v.take_error();
      }
      auto opened = secrets.open_current({"a", "bulk"});
      return opened.ok() ? ok_status() : opened.take_error();
    });
    EXPECT_EQ(failed, 0) << "round " << round;
    ASSERT_EQ(first_unopenable(*rows_, dir_), "") << "round " << round;
  }
  auto opened = secrets_->open_current({"a", "bulk"});
  ASSERT_TRUE(opened.ok()) << opened.error().to_string();
  EXPECT_EQ(opened->at("a").value.reveal(), "value-a9");
  EXPECT_EQ(opened->at("bulk").value.reveal(), "value-99");
}

// The cascade reads its rows when it plans and opens them after: a rotation
// that finished in between re-sealed those versions with the new key. They
// open all the same, as the versions planned (a set since is not taken).
TEST_F(IdentityTest, RowsReadBeforeARotationStillOpenAsTheVersionsRead) {
  set("a", "value-a1");
  set("b", "value-b1");
  auto planned = rows_->current_versions({"a", "b"});
  ASSERT_TRUE(planned.ok()) << planned.error().to_string();
  auto n = secrets_->rotate_key();
  ASSERT_TRUE(n.ok()) << n.error().to_string();
  set("a", "value-a2");
  auto opened = secrets_->open_rows(*planned);
  ASSERT_TRUE(opened.ok()) << opened.error().to_string();
  EXPECT_EQ(opened->at("a").value.reveal(), "value-a1");
  EXPECT_EQ(opened->at("a").version, 1);
  EXPECT_EQ(opened->at("b").value.reveal(), "value-b1");
}

// Every change that grants or takes away (a secret set, revoked or re-sealed,
// a profile, an injection, a token, an approval's decision) is written with
// its audit event in one transaction. Where the event cannot be written the
// change is not made: until 2026-11-29 it stood, with a warning in a log.
TEST_F(IdentityTest, AChangeWhoseAuditEventCannotBeWrittenIsNotMade) {
  set("a", "value-a1");
  ASSERT_TRUE(store_->ensure_project("acme", store::Environment::development).ok());
  store::TokenStore tokens(*store_);
  store::TokenRow live{"tok-live", "acme", "ci", store_->clock_now(), {}, {}, {}};
  ASSERT_TRUE(tokens.add(live, std::string(32, 'L')).ok());
  store::WorkflowStore wf(*store_);
  store::ApprovalRow ask;
  ask.project_id = "acme";
  ask.kind = "credential";
  auto approval = wf.request_approval(ask);
  ASSERT_TRUE(approval.ok()) << approval.error().to_string();
  // A row at the seq the next event would take: every append fails now.
  auto size = store::AuditLog(*store_).size();
  ASSERT_TRUE(size.ok()) << size.error().to_string();
  auto blocked = store_->locked([&](store::Db& db) {
    return db.exec(
        "INSERT INTO audit_events (seq, at, kind, actor, detail_json, prev_hash, hash) "
        "VALUES (" +
        std::to_string(*size + 1) + ", 0, 'blocker', 'test', '{}', '', '')");
  });
  ASSERT_TRUE(blocked.ok()) << blocked.error().to_string();

  EXPECT_FALSE(secrets_->set({"a", SecretValue("value-a2"), "builtin", std::nullopt}).ok());
  EXPECT_FALSE(secrets_->set({"b", SecretValue("value-b1"), "builtin", std::nullopt}).ok());
  EXPECT_FALSE(secrets_->revoke("a", /*hard=*/true).ok());
  EXPECT_FALSE(secrets_->rotate_key().ok());
  auto opened = secrets_->open_current({"a"});
  ASSERT_TRUE(opened.ok()) << opened.error().to_string();
  EXPECT_EQ(opened->at("a").value.reveal(), "value-a1");
  EXPECT_EQ(opened->at("a").version, 1);
  EXPECT_FALSE(rows_->secret("b")->has_value());
  EXPECT_EQ(first_unopenable(*rows_, dir_), "");

  ProfileRow p;
  p.name = "blocked";
  p.level = ProfileLevel::project;
  p.project = "acme";
  p.entries = {{"KEY", ProfileEntry::Kind::secret, "a"}};
  EXPECT_FALSE(rows_
                   ->put_profile(
                       p, [&](int64_t) { return std::vector{identity::profile_set_event("t", p)}; })
                   .ok());
  EXPECT_FALSE(rows_->profile("blocked")->has_value());

  store::InjectionRow injected;
  injected.sandbox_id = "sb-1";
  injected.worker_id = "w";
  injected.project_id = "acme";
  injected.run_id = "run-1";
  injected.key = "KEY";
  injected.secret = "a";
  injected.version = 1;
  identity::CascadePlan plan;
  plan.request.project = "acme";
  EXPECT_FALSE(
      rows_
          ->record_injections(
              {injected},
              [&](int64_t) { return std::vector{identity::injection_event("w", plan, {})}; })
          .ok());
  EXPECT_TRUE(rows_->injections_of_secret("a")->empty());

  auto event = [](const store::TokenRow& t) {
    store::AuditEvent e;
    e.kind = "token.test";
    e.actor = "test";
    e.project_id = t.project;
    return std::vector{e};
  };
  store::TokenRow fresh{"tok-new", "acme", "ci", store_->clock_now(), {}, {}, {}};
  EXPECT_FALSE(tokens.add(fresh, std::string(32, 'N'), event).ok());
  EXPECT_FALSE(tokens.revoke("tok-live", event).ok());
  auto found = tokens.find_by_hash(std::string(32, 'N'));
  ASSERT_TRUE(found.ok());
  EXPECT_FALSE(found->has_value());
  found = tokens.find_by_hash(std::string(32, 'L'));
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_TRUE((*found)->live(store_->clock_now()));

  EXPECT_FALSE(wf.decide_approval(*approval, true, "alice", "ok").ok());
  auto still = wf.approval(*approval);
  ASSERT_TRUE(still.ok()) << still.error().to_string();
  EXPECT_EQ(still->state, store::ApprovalState::pending);
}

TEST_F(IdentityTest, BadSecretsAreRefusedByNameWithoutTheirValue) {
  auto empty = secrets_->set({"e", SecretValue(""), "builtin", std::nullopt});
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().to_string(), "secret e: the value is empty");
  auto huge = secrets_->set({"h", SecretValue(std::string(64 * 1024 + 1, 'z')), "builtin", {}});
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.error().to_string(), "secret h: the value is 65537 bytes; at most 65536 (64 KiB)");
  EXPECT_TRUE(secrets_->set({"max", SecretValue(std::string(64 * 1024, 'z')), "builtin", {}}).ok());
  auto backend = secrets_->set({"b", SecretValue(kValue), "s3", std::nullopt});
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.error().to_string(),
            "secret b: unknown backend \"s3\" (expected builtin or vault)");
  auto vault = secrets_->set({"v", SecretValue(kValue), "vault",
                              store::VaultLocation{"http://127.0.0.1:1", "secret", "v"}});
  ASSERT_FALSE(vault.ok());
  EXPECT_EQ(vault.error().to_string().find(kValue), std::string::npos);
  EXPECT_FALSE(rows_->secret("e")->has_value());
  EXPECT_FALSE(rows_->secret("h")->has_value());
  EXPECT_FALSE(rows_->secret("v")->has_value());
}

// A value that is not UTF-8 text would reach the sandbox altered (the wire is
// JSON; bad bytes become U+FFFD), as bytes the redactor does not know.
TEST_F(IdentityTest, AValueThatIsNotUtf8TextIsRefusedByNameWithoutTheValue) {
  const std::string latin1 = "ghp_caf\xe9-na\xefve-s3cr3t-value-0123456789";
  const std::string with_nul = std::string("ghp_before") + '\0' + "after-the-nul-0123";
  for (const auto& [name, value] :
       std::vector<std::pair<std::string, std::string>>{{"latin1", latin1},
                                                        {"nul", with_nul},
                                                        {"cut", "tok-\xe2\x82"},
                                                        {"sur", "\xed\xa0\x80x"}}) {
    auto v = secrets_->set({name, SecretValue(value), "builtin", std::nullopt});
    ASSERT_FALSE(v.ok()) << name;
    const std::string err = v.error().to_string();
    EXPECT_NE(err.find("secret " + name), std::string::npos) << err;
    EXPECT_NE(err.find("UTF-8"), std::string::npos) << err;
    EXPECT_EQ(err.find("ghp_"), std::string::npos) << err;
    EXPECT_EQ(err.find("s3cr3t"), std::string::npos) << err;
    EXPECT_FALSE(rows_->secret(name)->has_value()) << name;
  }
  // Text in any script is fine.
  EXPECT_TRUE(secrets_
                  ->set({"utf8", SecretValue("caf\xc3\xa9-\xe2\x82\xac-\xf0\x9f\x94\x91"),
                         "builtin", std::nullopt})
                  .ok());
}

// A Vault that answers with bytes that are not UTF-8 text: the resolution is
// refused naming the secret, never showing the value.
class Latin1Vault : public VaultAccess {
 public:
  Result<int64_t> write(const store::VaultLocation&, std::string_view) override { return 1; }
  Result<SecretValue> read(const store::VaultLocation&) override {
    return SecretValue("vault-caf\xe9-s3cr3t-0123456789");
  }
};

TEST_F(IdentityTest, AVaultValueThatIsNotUtf8TextRefusesTheResolutionByName) {
  Latin1Vault vault;
  Secrets with_vault(*store_, SecretsOptions{dir_, &vault, "test"});
  ASSERT_TRUE(with_vault
                  .set({"vtok", SecretValue("fine"), "vault",
                        store::VaultLocation{"http://127.0.0.1:1", "secret", "vtok"}})
                  .ok());
  auto opened = with_vault.open_current({"vtok"});
  ASSERT_FALSE(opened.ok());
  const std::string err = opened.error().to_string();
  EXPECT_NE(err.find("secret vtok"), std::string::npos) << err;
  EXPECT_NE(err.find("UTF-8"), std::string::npos) << err;
  EXPECT_EQ(err.find("s3cr3t"), std::string::npos) << err;
  // The cascade, which resolves a sandbox's values, is refused the same way.
  ASSERT_TRUE(profile("p", ProfileLevel::system, {secret("TOKEN", "vtok")}).ok());
  auto r = resolve_cascade(*rows_, with_vault, {"acme", "", ""});
  ASSERT_FALSE(r.ok());
  const std::string cerr = r.error().to_string();
  EXPECT_NE(cerr.find("vtok"), std::string::npos) << cerr;
  EXPECT_EQ(cerr.find("s3cr3t"), std::string::npos) << cerr;
}

TEST_F(IdentityTest, ProfilesRefuseUnknownSecretsBadScopesAndDuplicateKeys) {
  set("s", kValue);
  auto unknown = profile("p", ProfileLevel::project, {secret("K", "nope")}, "acme");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().to_string(),
            "set profile p: key K names secret nope, which does not exist (set it first: "
            "ringfence secret set nope)");
  auto scope = profile("p", ProfileLevel::project, {plain("K", "v")});
  ASSERT_FALSE(scope.ok());
  EXPECT_EQ(scope.error().to_string(), "set profile p: profile p at level project needs --project");
  auto system_scoped = profile("p", ProfileLevel::system, {plain("K", "v")}, "acme");
  ASSERT_FALSE(system_scoped.ok());
  auto twice = profile("p", ProfileLevel::project, {plain("K", "v"), plain("K", "w")}, "acme");
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.error().to_string(), "set profile p: profile p defines key K twice");
  auto empty = profile("p", ProfileLevel::project, {plain("K", "")}, "acme");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().to_string(), "set profile p: profile p key K: the value is empty");
  ASSERT_TRUE(profile("a", ProfileLevel::project, {plain("K", "v")}, "acme").ok());
  auto dup = profile("b", ProfileLevel::project, {plain("J", "v"), plain("K", "w")}, "acme");
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.error().to_string(),
            "set profile b: key K is already defined at level project for this scope by profile "
            "a (a key is defined once per level and scope)");
  EXPECT_FALSE(rows_->profile("b")->has_value());  // nothing half-written
  // Same key, another project: fine. Replacing a profile keeps one copy.
  EXPECT_TRUE(profile("b", ProfileLevel::project, {plain("K", "w")}, "globex").ok());
  EXPECT_TRUE(profile("a", ProfileLevel::project, {plain("K", "v2")}, "acme").ok());
  EXPECT_EQ((*rows_->profile("a"))->entries, std::vector<ProfileEntry>{plain("K", "v2")});
}

TEST_F(IdentityTest, TheMostSpecificLevelWinsKeyByKey) {
  set("sys", "v-sys");
  set("proj", "v-proj");
  set("user", "v-user");
  ASSERT_TRUE(
      profile("system", ProfileLevel::system,
              {secret("A", "sys"), secret("B", "sys"), plain("C", "c-sys"), plain("D", "d-sys")})
          .ok());
  ASSERT_TRUE(
      profile("acme", ProfileLevel::project, {secret("B", "proj"), plain("C", "c-proj")}, "acme")
          .ok());
  ASSERT_TRUE(profile("wf", ProfileLevel::workflow, {plain("C", "c-wf")}, "acme", "deploy").ok());
  ASSERT_TRUE(profile("wf-any", ProfileLevel::workflow, {plain("D", "d-wf")}, "", "deploy").ok());
  ASSERT_TRUE(profile("alice", ProfileLevel::user, {secret("B", "user")}, "", "", "alice").ok());
  auto r = resolve_cascade(*rows_, *secrets_, {"acme", "deploy", "alice"});
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->env.at("A").reveal(), "v-sys");
  EXPECT_EQ(r->env.at("B").reveal(), "v-user");
  EXPECT_EQ(r->env.at("C").reveal(), "c-wf");
  EXPECT_EQ(r->env.at("D").reveal(), "d-wf");
  const auto& b = r->plan.entries[1];
  EXPECT_EQ(b.key, "B");
  EXPECT_EQ(b.level, ProfileLevel::user);
  EXPECT_EQ(b.overridden, (std::vector<std::string>{"system", "acme"}));
  // Without the user and workflow: the project's.
  r = resolve_cascade(*rows_, *secrets_, {"acme", "", ""});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->env.at("B").reveal(), "v-proj");
  EXPECT_EQ(r->env.at("C").reveal(), "c-proj");
  // Another project sees the system level only.
  r = resolve_cascade(*rows_, *secrets_, {"globex", "", ""});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->env.at("B").reveal(), "v-sys");
  // The plan as JSON never holds a secret's value.
  const std::string j = plan_json(r->plan, true);
  EXPECT_EQ(j.find("v-sys"), std::string::npos);
  EXPECT_NE(j.find("\"secret\":\"sys\""), std::string::npos);
}

TEST_F(IdentityTest, ARevokedSecretRefusesTheCascadeNamingKeyAndSecret) {
  set("s", kValue);
  ASSERT_TRUE(profile("acme", ProfileLevel::project, {secret("TOKEN", "s")}, "acme").ok());
  ASSERT_TRUE(secrets_->revoke("s", false).ok());
  auto plan = plan_cascade(*rows_, {"acme", "", ""});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.error().to_string(),
            "resolve identity for project acme: key TOKEN (profile acme) names secret s, which "
            "is revoked; refused (fail closed)");
  ASSERT_TRUE(secrets_->revoke("s", true).ok());
  EXPECT_NE(plan_cascade(*rows_, {"acme", "", ""}).error().to_string().find("hard_revoked"),
            std::string::npos);
  // A soft revoke does not undo a hard one.
  ASSERT_TRUE(secrets_->revoke("s", false).ok());
  EXPECT_EQ((*rows_->secret("s"))->state, store::SecretState::hard_revoked);
  // A new version is active again.
  set("s", "fresh");
  EXPECT_TRUE(resolve_cascade(*rows_, *secrets_, {"acme", "", ""}).ok());
}

}  // namespace
}  // namespace rf::identity
