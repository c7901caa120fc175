// `ringfence secret set | list | revoke | rotate-key` (issue 11). A value is
// read from stdin, never from argv, and is never printed.
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/client_store.h"
#include "cli/commands.h"
#include "cli/vault_wiring.h"
#include "identity/secrets.h"

namespace rf::cli {
namespace {

struct SecretFlags {
  std::string state_dir, name, backend = "builtin", vault_addr, vault_mount = "secret", vault_path;
  bool hard = false, json = false;
};

// All of stdin, less one trailing newline ("echo value | ringfence secret set").
Result<identity::SecretValue> read_value_from_stdin() {
  if (::isatty(STDIN_FILENO)) {
    return make_error("secret set", "pipe the value in on stdin (it is never taken from argv)");
  }
  std::string bytes;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sys_error("secret set: read stdin");
    if (n == 0) break;
    bytes.append(buf, static_cast<size_t>(n));
    if (bytes.size() > identity::kMaxSecretBytes + 2) break;  // refused below, by size
  }
  if (bytes.ends_with("\r\n")) {
    bytes.resize(bytes.size() - 2);
  } else if (bytes.ends_with('\n')) {
    bytes.pop_back();
  }
  return identity::SecretValue(std::move(bytes));
}

struct Opened {
  std::unique_ptr<store::Store> store;
  std::unique_ptr<identity::VaultAccess> vault;
  std::unique_ptr<identity::Secrets> secrets;
};

Result<Opened> open_secrets(const SecretFlags& f) {
  const std::string dir = state_dir_or_default(f.state_dir);
  auto st = open_client_store(dir);
  if (!st.ok()) return st.take_error();
  auto vault = make_vault_access();
  if (!vault.ok()) return vault.take_error();
  Opened o{std::move(*st), std::move(*vault), nullptr};
  o.secrets = std::make_unique<identity::Secrets>(
      *o.store, identity::SecretsOptions{dir, o.vault.get(), "cli"});
  return o;
}

int run_set(const SecretFlags& f) {
  auto value = read_value_from_stdin();
  if (!value.ok()) return fail(value.error().to_string(), kExitUsage);
  auto o = open_secrets(f);
  if (!o.ok()) return fail(o.error().to_string(), kExitRuntime);
  identity::NewSecret s{f.name, std::move(*value), f.backend, std::nullopt};
  if (f.backend == "vault") {
    s.vault = store::VaultLocation{f.vault_addr, f.vault_mount,
                                   f.vault_path.empty() ? f.name : f.vault_path};
  } else if (!f.vault_addr.empty()) {
    return fail("secret set: --vault-addr is for --backend vault", kExitUsage);
  }
  auto version = o->secrets->set(s);
  if (!version.ok()) return fail(version.error().to_string(), kExitUsage);
  std::fprintf(stderr, "secret %s: version %lld (%s)\n", f.name.c_str(),
               static_cast<long long>(*version), f.backend.c_str());
  return 0;
}

int run_list(const SecretFlags& f) {
  auto o = open_secrets(f);
  if (!o.ok()) return fail(o.error().to_string(), kExitRuntime);
  auto all = o->secrets->list();
  if (!all.ok()) return fail(all.error().to_string(), kExitRuntime);
  nlohmann::json out = nlohmann::json::array();
  for (const auto& s : *all) {
    nlohmann::json j = {{"name", s.name},
                        {"backend", s.backend},
                        {"state", store::to_string(s.state)},
                        {"version", s.current_version},
                        {"updated_at", s.updated_at}};
    if (s.vault) j["vault"] = s.vault->addr + "/v1/" + s.vault->mount + "/data/" + s.vault->path;
    out.push_back(std::move(j));
  }
  if (f.json) {
    std::printf("%s\n", out.dump().c_str());
    return 0;
  }
  std::printf("%-32s %-8s %-13s %s\n", "NAME", "BACKEND", "STATE", "VERSION");
  for (const auto& s : *all) {
    std::printf("%-32s %-8s %-13s %lld\n", s.name.c_str(), s.backend.c_str(),
                std::string(store::to_string(s.state)).c_str(),
                static_cast<long long>(s.current_version));
  }
  return 0;
}

int run_revoke(const SecretFlags& f) {
  auto o = open_secrets(f);
  if (!o.ok()) return fail(o.error().to_string(), kExitRuntime);
  if (auto s = o->secrets->revoke(f.name, f.hard); !s)
    return fail(s.error().to_string(), kExitUsage);
  std::fprintf(stderr,
               f.hard ? "secret %s: hard-revoked; every running call and sandbox that received "
                        "it is being ended\n"
                      : "secret %s: revoked; no new call or sandbox receives it\n",
               f.name.c_str());
  return 0;
}

int run_rotate(const SecretFlags& f) {
  auto o = open_secrets(f);
  if (!o.ok()) return fail(o.error().to_string(), kExitRuntime);
  auto n = o->secrets->rotate_key();
  if (!n.ok()) return fail(n.error().to_string(), kExitRuntime);
  std::fprintf(stderr, "re-sealed %zu secret versions with a new key in %s\n", *n,
               o->secrets->key_path().c_str());
  return 0;
}

}  // namespace

void add_secret_commands(CLI::App* secret, CommandResult* result) {
  auto f = std::make_shared<SecretFlags>();
  secret->require_subcommand(1);
  auto state_dir = [&](CLI::App* c) {
    c->add_option("--state-dir", f->state_dir, "The state dir (default ~/.ringfence/state)");
  };
  auto* set = secret->add_subcommand("set", "Set a secret (a new version); the value from stdin");
  set->add_option("name", f->name, "Secret name")->required();
  set->add_option("--backend", f->backend, "builtin (sealed in the store) or vault")
      ->check(CLI::IsMember({"builtin", "vault"}));
  set->add_option("--vault-addr", f->vault_addr, "Vault's address, e.g. http://127.0.0.1:8200");
  set->add_option("--vault-mount", f->vault_mount, "The KV v2 mount")->default_val("secret");
  set->add_option("--vault-path", f->vault_path, "The path under the mount (default: the name)");
  state_dir(set);
  set->footer(
      "The value is all of stdin less one trailing newline, at most 64 KiB. "
      "Vault's token comes from VAULT_TOKEN.");
  set->callback([f, result] { result->exit_code = run_set(*f); });
  auto* list = secret->add_subcommand("list", "Secrets: names, backends, states, versions");
  list->add_flag("--json", f->json, "As JSON");
  state_dir(list);
  list->callback([f, result] { result->exit_code = run_list(*f); });
  auto* revoke = secret->add_subcommand("revoke", "Revoke a secret: no call receives it again");
  revoke->add_option("name", f->name, "Secret name")->required();
  revoke->add_flag("--hard", f->hard,
                   "Also end, within a second, every running call and sandbox that received it");
  state_dir(revoke);
  revoke->callback([f, result] { result->exit_code = run_revoke(*f); });
  auto* rotate =
      secret->add_subcommand("rotate-key", "Re-seal every builtin secret with a new key");
  state_dir(rotate);
  rotate->callback([f, result] { result->exit_code = run_rotate(*f); });
}

}  // namespace rf::cli
