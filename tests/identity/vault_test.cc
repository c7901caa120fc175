// The Vault backend (issue 11) against the KV v2 fixture on loopback, with
// python3-hvac, the real client, reading what ringfence wrote and writing
// what ringfence reads. Everything that can go wrong fails closed: Vault
// down, a refused or revoked token (403), a deleted or destroyed version, a
// missing path, a bad certificate; a secret revoked in ringfence is refused
// even while its value sits in the cache. No error ever holds the value or
// the token.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "identity/cascade.h"
#include "identity/secrets.h"
#include "identity/vault_access.h"
#include "store/identity_store.h"
#include "store/store.h"
#include "support/vault_server.h"
#include "vault_api/kv2_client.h"
#include "vault_api/vault_address.h"
#include "vault_api/vault_backend.h"

namespace rf::testing {
namespace {

using namespace std::chrono_literals;
using vault::Kv2Client;
using vault::Kv2Failure;
using vault::VaultBackend;

constexpr char kToken[] = "hvs.fixture-root-token-7c1d9e";
constexpr char kValue[] = "sk-vault-4a8f0c2e6b1d3f5a7c9e";

class VaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rf-vault-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    server_ = std::make_unique<VaultServer>(dir_, kToken);
  }
  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::unique_ptr<Kv2Client> client(const std::string& token = kToken) {
    auto a = vault::parse_vault_address(server_->addr());
    EXPECT_TRUE(a.ok()) << a.error().to_string();
    return std::make_unique<Kv2Client>(*a, token, vault::Kv2Options{2000ms});
  }
  std::unique_ptr<VaultBackend> backend(std::chrono::milliseconds ttl) {
    vault::VaultBackendOptions o;
    o.token = kToken;
    o.ttl = ttl;
    o.client.timeout = 2000ms;
    return std::make_unique<VaultBackend>(std::move(o));
  }
  store::VaultLocation at(const std::string& path) { return {server_->addr(), "secret", path}; }

  // Every error text of a test: none may hold the value or the token.
  void expect_clean(const std::string& error) {
    errors_.push_back(error);
    EXPECT_EQ(error.find(kValue), std::string::npos) << error;
    EXPECT_EQ(error.find(kToken), std::string::npos) << error;
  }

  std::string dir_;
  std::unique_ptr<VaultServer> server_;
  std::vector<std::string> errors_;
};

TEST_F(VaultTest, WhatRingfenceWritesHvacReadsAndTheOtherWayRound) {
  auto c = client();
  auto v1 = c->write("secret", "acme/anthropic", {{"value", kValue}});
  ASSERT_TRUE(v1.ok()) << v1.error().to_string();
  EXPECT_EQ(*v1, 1);
  auto seen = server_->hvac({"read", "acme/anthropic"});
  EXPECT_EQ(seen["version"], 1);
  EXPECT_EQ(seen["value"], kValue);

  auto hv = server_->hvac({"write", "acme/anthropic"}, "written-by-hvac-2");
  EXPECT_EQ(hv["version"], 2);
  auto read = c->read("secret", "acme/anthropic");
  ASSERT_TRUE(read.ok()) << read.error().to_string();
  EXPECT_EQ(read->version, 2);
  EXPECT_EQ(read->fields.at("value"), "written-by-hvac-2");
  // The same kept-alive connection serves many exchanges.
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(c->read("secret", "acme/anthropic").ok());
}

TEST_F(VaultTest, FailsClosedWhenVaultIsDown) {
  auto c = client();
  ASSERT_TRUE(c->write("secret", "p", {{"value", kValue}}).ok());
  server_->stop();
  Kv2Failure why = Kv2Failure::kNone;
  auto read = c->read("secret", "p", &why);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(why, Kv2Failure::kUnreachable);
  const std::string e = read.error().to_string();
  EXPECT_NE(e.find("vault GET " + server_->addr() + "/v1/secret/data/p"), std::string::npos) << e;
  EXPECT_NE(e.find("unreachable"), std::string::npos) << e;
  expect_clean(e);
}

TEST_F(VaultTest, FailsClosedOnARefusedOrRevokedToken) {
  ASSERT_TRUE(client()->write("secret", "p", {{"value", kValue}}).ok());
  Kv2Failure why = Kv2Failure::kNone;
  auto wrong = client("hvs.not-the-token")->read("secret", "p", &why);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(why, Kv2Failure::kForbidden);
  EXPECT_NE(wrong.error().to_string().find("403 permission denied"), std::string::npos);
  EXPECT_NE(wrong.error().to_string().find("VAULT_TOKEN"), std::string::npos);
  expect_clean(wrong.error().to_string());

  auto none = client("")->read("secret", "p");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().to_string().find("set VAULT_TOKEN"), std::string::npos);

  // The token is revoked in Vault (by hvac): the next read is refused.
  auto c = client();
  ASSERT_TRUE(c->read("secret", "p").ok());
  EXPECT_EQ(server_->hvac({"revoke-self"}).dump(), "{}");
  auto after = c->read("secret", "p", &why);
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(why, Kv2Failure::kForbidden);
  expect_clean(after.error().to_string());
}

TEST_F(VaultTest, DeletedDestroyedAndMissingVersionsAreErrorsNamingThem) {
  auto c = client();
  ASSERT_TRUE(c->write("secret", "p", {{"value", kValue}}).ok());
  ASSERT_TRUE(c->write("secret", "p", {{"value", kValue}}).ok());
  EXPECT_EQ(server_->hvac({"delete", "p"}).dump(), "{}");
  Kv2Failure why = Kv2Failure::kNone;
  auto deleted = c->read("secret", "p", &why);
  ASSERT_FALSE(deleted.ok());
  EXPECT_EQ(why, Kv2Failure::kDeleted);
  EXPECT_NE(deleted.error().to_string().find("latest version (2) was deleted at"),
            std::string::npos)
      << deleted.error().to_string();
  expect_clean(deleted.error().to_string());
  // Never the older version instead.
  EXPECT_EQ(server_->hvac({"read", "p"})["error"], "InvalidPath");

  ASSERT_TRUE(c->write("secret", "q", {{"value", kValue}}).ok());
  EXPECT_EQ(server_->hvac({"destroy", "q", "1"}).dump(), "{}");
  auto destroyed = c->read("secret", "q", &why);
  ASSERT_FALSE(destroyed.ok());
  EXPECT_EQ(why, Kv2Failure::kDeleted);
  EXPECT_NE(destroyed.error().to_string().find("latest version (1) is destroyed"),
            std::string::npos);

  auto missing = c->read("secret", "nothing/here", &why);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(why, Kv2Failure::kNotFound);
  EXPECT_NE(missing.error().to_string().find("404: no secret at this path"), std::string::npos);
  auto no_mount = c->read("kv-nowhere", "p", &why);
  ASSERT_FALSE(no_mount.ok());
  EXPECT_NE(no_mount.error().to_string().find("no handler for route"), std::string::npos)
      << no_mount.error().to_string();
}

TEST_F(VaultTest, BadLocationsAndAddressesAreRefusedByName) {
  auto c = client();
  for (const char* path : {"", "/abs", "a/../b", "a b", "a?x=1", "a#f", "trailing/", "a%2f"}) {
    auto r = c->read("secret", path);
    ASSERT_FALSE(r.ok()) << path;
    EXPECT_NE(r.error().to_string().find("Vault path \"" + std::string(path) + "\""),
              std::string::npos)
        << r.error().to_string();
  }
  for (const char* addr : {"127.0.0.1:8200", "ftp://h", "http://", "http://h:0", "http://h:99999",
                           "http://h/v1", "http://u:p@h", "http://[::1"}) {
    std::string shown = addr;
    while (!shown.empty() && shown.back() == '/') shown.pop_back();  // as the error shows it
    auto a = vault::parse_vault_address(addr);
    ASSERT_FALSE(a.ok()) << addr;
    EXPECT_NE(a.error().to_string().find("Vault address \"" + shown), std::string::npos)
        << a.error().to_string();
  }
  auto v6 = vault::parse_vault_address("https://[::1]");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->endpoint.host, "::1");
  EXPECT_EQ(v6->endpoint.port, 8200);
  EXPECT_TRUE(v6->endpoint.tls);
}

TEST_F(VaultTest, TheCacheServesWithinItsTtlAndNeverAfterAFailure) {
  auto c = client();
  ASSERT_TRUE(c->write("secret", "a", {{"value", kValue}}).ok());
  ASSERT_TRUE(c->write("secret", "b", {{"value", "other"}}).ok());
  auto b = backend(60s);
  for (int i = 0; i < 5; ++i) {
    auto v = b->read(at("a"));
    ASSERT_TRUE(v.ok()) << v.error().to_string();
    EXPECT_EQ(v->reveal(), kValue);
  }
  EXPECT_EQ(b->counts().fetched, 1u);
  EXPECT_EQ(b->counts().cached, 4u);

  // A 403 anywhere drops every cached value: "a" is asked of Vault again,
  // and refused.
  EXPECT_EQ(server_->hvac({"revoke-self"}).dump(), "{}");
  ASSERT_TRUE(b->read(at("a")).ok());  // still within its TTL
  auto other = b->read(at("b"));
  ASSERT_FALSE(other.ok());
  auto a_again = b->read(at("a"));
  ASSERT_FALSE(a_again.ok());
  EXPECT_NE(a_again.error().to_string().find("403"), std::string::npos);
  expect_clean(a_again.error().to_string());
}

TEST_F(VaultTest, ManyAreReadAtOnceEachInItsPlace) {
  auto c = client();
  std::vector<store::VaultLocation> wanted;
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(
        c->write("secret", "many/" + std::to_string(i), {{"value", "v" + std::to_string(i)}}).ok());
    wanted.push_back(at("many/" + std::to_string(i)));
  }
  wanted.push_back(at("many/absent"));
  auto b = backend(60s);
  for (int round = 0; round < 3; ++round) {  // fetched, then cached
    auto got = b->read_all(wanted);
    ASSERT_EQ(got.size(), 21u);
    for (int i = 0; i < 20; ++i) {
      ASSERT_TRUE(got[i].ok()) << got[i].error().to_string();
      EXPECT_EQ(got[i]->reveal(), "v" + std::to_string(i));
    }
    ASSERT_FALSE(got[20].ok());
    EXPECT_NE(got[20].error().to_string().find("many/absent"), std::string::npos);
  }
  EXPECT_EQ(b->counts().fetched, 20u + 3u);  // the absent one is asked each time
  EXPECT_EQ(b->counts().cached, 40u);
}

TEST_F(VaultTest, AnExpiredEntryIsNotServedWhenVaultIsDown) {
  ASSERT_TRUE(client()->write("secret", "a", {{"value", kValue}}).ok());
  auto b = backend(100ms);
  ASSERT_TRUE(b->read(at("a")).ok());
  server_->stop();
  ASSERT_TRUE(b->read(at("a")).ok());  // within the TTL: no request at all
  std::this_thread::sleep_for(150ms);
  auto stale = b->read(at("a"));
  ASSERT_FALSE(stale.ok());
  EXPECT_NE(stale.error().to_string().find("unreachable"), std::string::npos);
  expect_clean(stale.error().to_string());
  EXPECT_EQ(b->counts().fetched, 2u);
}

TEST_F(VaultTest, ARevocationInRingfenceIsNeverAnsweredFromTheCache) {
  auto st = store::Store::open(dir_ + "/ringfence.db");
  ASSERT_TRUE(st.ok()) << st.error().to_string();
  auto b = backend(60s);
  identity::Secrets secrets(**st, {dir_, b.get(), "test"});
  auto v = secrets.set({"acme-vault", identity::SecretValue(kValue), "vault", at("acme/key")});
  ASSERT_TRUE(v.ok()) << v.error().to_string();
  EXPECT_EQ(server_->hvac({"read", "acme/key"})["value"], kValue);

  store::IdentityStore rows(**st);
  store::ProfileRow p;
  p.name = "acme";
  p.level = store::ProfileLevel::project;
  p.project = "acme";
  p.entries = {{"API_KEY", store::ProfileEntry::Kind::secret, "acme-vault"}};
  ASSERT_TRUE(rows.put_profile(p).ok());
  const identity::CascadeRequest req{"acme", "", ""};
  auto resolved = identity::resolve_cascade(rows, secrets, req);
  ASSERT_TRUE(resolved.ok()) << resolved.error().to_string();
  EXPECT_EQ(resolved->env.at("API_KEY").reveal(), kValue);
  ASSERT_TRUE(identity::resolve_cascade(rows, secrets, req).ok());
  EXPECT_EQ(b->counts().cached, 1u);

  ASSERT_TRUE(secrets.revoke("acme-vault", false).ok());
  auto refused = identity::resolve_cascade(rows, secrets, req);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().to_string().find("API_KEY"), std::string::npos);
  EXPECT_NE(refused.error().to_string().find("acme-vault"), std::string::npos);
  expect_clean(refused.error().to_string());
  EXPECT_EQ(b->counts().cached, 1u);  // the cache was not asked

  // The store never holds the value: it lives in Vault.
  for (const char* f : {"/ringfence.db", "/ringfence.db-wal"}) {
    std::ifstream in(dir_ + f, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    EXPECT_EQ(ss.str().find(kValue), std::string::npos) << f;
  }
}

TEST_F(VaultTest, TlsIsVerifiedAgainstTheGivenCa) {
  const std::string cert = dir_ + "/cert.pem", key = dir_ + "/key.pem";
  auto made =
      run_capture({"/usr/bin/openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                   "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                   "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", cert},
                  {});
  ASSERT_EQ(made.status, 0);
  server_->stop();
  server_->start(true, cert, key);
  ::setenv("RINGFENCE_DOCKER_TLS", RF_DOCKER_TLS_PATH, 1);

  auto a = vault::parse_vault_address(server_->addr());
  ASSERT_TRUE(a.ok());
  a->endpoint.ca_file = cert;
  a->endpoint.tls_verify = true;
  Kv2Client trusted(*a, kToken, vault::Kv2Options{5000ms});
  auto w = trusted.write("secret", "tls", {{"value", kValue}});
  ASSERT_TRUE(w.ok()) << w.error().to_string();
  auto r = trusted.read("secret", "tls");
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->fields.at("value"), kValue);

  a->endpoint.ca_file.clear();  // the system's CAs do not know this one
  Kv2Client untrusted(*a, kToken, vault::Kv2Options{5000ms});
  Kv2Failure why = Kv2Failure::kNone;
  auto refused = untrusted.read("secret", "tls", &why);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(why, Kv2Failure::kUnreachable);
  EXPECT_NE(refused.error().to_string().find("certificate"), std::string::npos)
      << refused.error().to_string();
  expect_clean(refused.error().to_string());
}

}  // namespace
}  // namespace rf::testing
