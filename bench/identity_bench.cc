// rf_identity_bench: resolving an identity cascade (issue 11): 3 levels
// (system, project, user) giving 20 keys, every one a builtin secret, from a
// store on disk: profiles read, revocation checked, 20 values opened. The bar
// is 1 ms p50. Floors measured in the same run: the same 20 sealed rows read
// by one plain SQLite query, and the 20 values opened alone.
//
// Then the same cascade with 20 Vault secrets, against the KV v2 fixture
// (tests/identity/vault_fixture.py, Python's http.server) on loopback:
// uncached (bar 5 ms p50) and cached (bar 1 ms p50), with the floor of the 20
// KV v2 reads alone on one kept-alive connection.
#include <signal.h>
#include <sodium.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "bench_support.h"
#include "identity/cascade.h"
#include "identity/secret_box.h"
#include "identity/secrets.h"
#include "store/identity_store.h"
#include "store/store.h"
#include "vault_api/kv2_client.h"
#include "vault_api/vault_backend.h"

extern char** environ;

using namespace rf;
using Clock = std::chrono::steady_clock;

namespace {

template <class F>
bench::Stats time_us(int n, F&& fn) {
  std::vector<double> us;
  for (int i = 0; i < n; ++i) {
    const auto t0 = Clock::now();
    fn();
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  return bench::summarise(us);
}

void row(const char* what, const bench::Stats& s) {
  std::printf("%-52s p50 %8.1f us  p99 %8.1f us\n", what, s.p50, s.p99);
}

// 28 secrets; system gives K0..K9, project K5..K14, user K12..K19: 20 keys
// (K0..K4 system, K5..K11 project, K12..K19 user), 20 distinct secrets.
bool populate(identity::Secrets& secrets, store::IdentityStore& rows, const std::string& backend,
              const std::string& vault_addr) {
  for (int i = 0; i < 28; ++i) {
    std::optional<store::VaultLocation> at;
    if (backend == "vault")
      at = store::VaultLocation{vault_addr, "secret", "bench/s" + std::to_string(i)};
    auto v = secrets.set({"s" + std::to_string(i),
                          identity::SecretValue("sk-bench-value-" + std::to_string(i) +
                                                "-0123456789abcdef0123456789"),
                          backend, at});
    if (!v) {
      std::fprintf(stderr, "%s\n", v.error().to_string().c_str());
      return false;
    }
  }
  auto level = [&](const char* name, store::ProfileLevel l, int from, int to, int secret_base,
                   std::string project, std::string user) {
    store::ProfileRow p{name, l, std::move(project), "", std::move(user), {}, 0, 0};
    for (int k = from; k < to; ++k) {
      p.entries.push_back({"K" + std::to_string(k), store::ProfileEntry::Kind::secret,
                           "s" + std::to_string(secret_base + k - from)});
    }
    if (auto s = rows.put_profile(p); !s)
      std::fprintf(stderr, "%s\n", s.error().to_string().c_str());
  };
  level("system", store::ProfileLevel::system, 0, 10, 0, "", "");
  level("acme", store::ProfileLevel::project, 5, 15, 10, "acme", "");
  level("alice", store::ProfileLevel::user, 12, 20, 20, "", "alice");
  return true;
}

// The KV v2 fixture on 127.0.0.1:<free port>; ended by its pid.
struct Fixture {
  pid_t pid = -1;
  std::string addr;
  ~Fixture() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

bool start_fixture(const std::string& dir, const std::string& token, Fixture& f) {
  { std::ofstream(dir + "/token") << token; }
  std::string py = "/usr/bin/python3", script = RF_VAULT_FIXTURE_PY, tf = dir + "/token",
              pf = dir + "/port";
  std::vector<char*> args = {py.data(),
                             script.data(),
                             const_cast<char*>("--token-file"),
                             tf.data(),
                             const_cast<char*>("--port-file"),
                             pf.data(),
                             nullptr};
  if (posix_spawn(&f.pid, py.c_str(), nullptr, nullptr, args.data(), environ) != 0) return false;
  for (int i = 0; i < 1000 && !std::filesystem::exists(pf); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::ifstream in(pf);
  int port = 0;
  in >> port;
  f.addr = "http://127.0.0.1:" + std::to_string(port);
  return port > 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 2000;
  if (sodium_init() < 0) return 1;
  char tmpl[] = "/tmp/rf-identity-bench-XXXXXX";
  if (!::mkdtemp(tmpl)) return 1;
  const std::string dir = tmpl;
  auto st = store::Store::open(dir + "/ringfence.db");
  if (!st) {
    std::fprintf(stderr, "%s\n", st.error().to_string().c_str());
    return 1;
  }
  store::IdentityStore rows(**st);
  identity::Secrets secrets(**st, {dir, nullptr, "bench"});
  if (!populate(secrets, rows, "builtin", "")) return 1;
  const identity::CascadeRequest request{"acme", "", "alice"};
  auto check = identity::resolve_cascade(rows, secrets, request);
  if (!check || check->env.size() != 20) {
    std::fprintf(stderr, "the cascade does not give 20 keys\n");
    return 1;
  }
  std::printf("rf_identity_bench: %d resolutions each\n", n);
  row("resolve cascade, 3 levels, 20 builtin secrets", time_us(n, [&] {
        auto r = identity::resolve_cascade(rows, secrets, request);
        if (!r) std::abort();
      }));
  row("  of which: plan (profiles + revocation, no values)", time_us(n, [&] {
        auto r = identity::plan_cascade(rows, request);
        if (!r) std::abort();
      }));
  std::vector<std::string> names;
  for (const auto& e : check->plan.entries) names.push_back(e.secret);
  row("floor: the 20 sealed rows read by one SQLite query", time_us(n, [&] {
        auto r = (*st)->locked([&](store::Db& db) -> int {
          auto q = db.prepare(
              "SELECT v.sealed FROM secrets s JOIN secret_versions v ON v.name = s.name AND "
              "v.version = s.current_version WHERE s.name IN (SELECT value FROM json_each(?1))");
          std::string list = "[";
          for (size_t i = 0; i < names.size(); ++i) list += (i ? ",\"" : "\"") + names[i] + "\"";
          list += "]";
          q->bind(1, list);
          int count = 0;
          while (*q->step()) ++count;
          return count;
        });
        if (r != 20) std::abort();
      }));
  auto key = identity::load_key(dir + "/secrets.key");
  auto sealed = rows.sealed_versions();
  row("floor: 20 values opened (XChaCha20-Poly1305)", time_us(n, [&] {
        for (int i = 0; i < 20; ++i) {
          const auto& v = (*sealed)[static_cast<size_t>(i)];
          if (!identity::open_sealed(*key, v.name, v.version, v.sealed, v.key_id)) std::abort();
        }
      }));

  // Vault: the same cascade, 20 secrets in the KV v2 fixture.
  const int nv = std::max(50, n / 10);
  Fixture fixture;
  const std::string token = "hvs.bench-token";
  if (!start_fixture(dir, token, fixture)) {
    std::fprintf(stderr, "the Vault fixture did not start (python3 %s)\n", RF_VAULT_FIXTURE_PY);
    return 1;
  }
  auto vst = store::Store::open(dir + "/vault.db");
  if (!vst) return 1;
  store::IdentityStore vrows(**vst);
  vault::VaultBackendOptions uncached_options{token, std::chrono::milliseconds{0}, {}};
  vault::VaultBackend uncached(uncached_options);
  identity::Secrets vsecrets(**vst, {dir, &uncached, "bench"});
  if (!populate(vsecrets, vrows, "vault", fixture.addr)) return 1;
  auto vcheck = identity::resolve_cascade(vrows, vsecrets, request);
  if (!vcheck || vcheck->env.size() != 20) {
    std::fprintf(stderr, "the Vault cascade does not give 20 keys\n");
    return 1;
  }
  std::printf("Vault KV v2 fixture on %s: %d resolutions each\n", fixture.addr.c_str(), nv);
  row("resolve cascade, 20 Vault secrets, uncached", time_us(nv, [&] {
        auto r = identity::resolve_cascade(vrows, vsecrets, request);
        if (!r) std::abort();
      }));
  vault::VaultBackendOptions cached_options{token, std::chrono::milliseconds{3'600'000}, {}};
  vault::VaultBackend cached(cached_options);
  identity::Secrets csecrets(**vst, {dir, &cached, "bench"});
  if (!identity::resolve_cascade(vrows, csecrets, request)) return 1;
  row("resolve cascade, 20 Vault secrets, cached", time_us(n, [&] {
        auto r = identity::resolve_cascade(vrows, csecrets, request);
        if (!r) std::abort();
      }));
  auto address = vault::parse_vault_address(fixture.addr);
  vault::Kv2Client client(*address, token);
  row("floor: the 20 KV v2 reads alone (one connection)", time_us(nv, [&] {
        for (int i = 0; i < 20; ++i) {
          if (!client.read("secret", "bench/s" + std::to_string(i))) std::abort();
        }
      }));
  std::filesystem::remove_all(dir);
  return 0;
}
