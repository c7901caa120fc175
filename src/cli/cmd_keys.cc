// `ringfence keys show | rotate` (issue 15): the Ed25519 pair that signs
// boundary reports, receipts and the audit log's checkpoints.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/client_store.h"
#include "cli/commands.h"
#include "proof/boundary_facts.h"
#include "proof/signing_key.h"

namespace rf::cli {
namespace {

struct KeysFlags {
  std::string state_dir;
  bool json = false;
};

int show(const KeysFlags& f) {
  const std::string dir = state_dir_or_default(f.state_dir);
  auto key = proof::SigningKey::load_or_create(dir);
  if (!key) return fail(key.error().to_string(), kExitRuntime);
  if (f.json) {
    nlohmann::json j = {{"public_key_pem", key->public_key().pem()},
                        {"keyid", key->public_key().key_id()},
                        {"path", proof::public_key_path(dir)}};
    // What the default seccomp profile publishes: reports compare the
    // programs loaded in a sandbox with these.
    if (auto d = proof::seccomp_profile_digests("default")) j["seccomp_default"] = *d;
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%s", key->public_key().pem().c_str());
  }
  return 0;
}

int rotate(const KeysFlags& f) {
  const std::string dir = state_dir_or_default(f.state_dir);
  auto key = proof::SigningKey::rotate(dir);
  if (!key) return fail(key.error().to_string(), kExitRuntime);
  std::fprintf(
      stderr,
      "ringfence: a new signing key (keyid %s...); the old public key is kept in %s/retired "
      "for receipts it signed\n",
      key->public_key().key_id().substr(0, 16).c_str(), proof::key_dir(dir).c_str());
  std::printf("%s", key->public_key().pem().c_str());
  return 0;
}

}  // namespace

void add_keys_commands(CLI::App* keys, CommandResult* result) {
  keys->require_subcommand(1);
  auto f = std::make_shared<KeysFlags>();
  auto* show_cmd = keys->add_subcommand(
      "show",
      "Print the public key (PEM) that verifies reports, receipts and checkpoints; "
      "the pair is made on first use");
  show_cmd->add_option("--state-dir", f->state_dir, "The state dir (default ~/.ringfence/state)");
  show_cmd->add_flag("--json", f->json,
                     "As JSON, with the keyid and the default seccomp profile's digests");
  show_cmd->callback([f, result] { result->exit_code = show(*f); });
  auto* rotate_cmd = keys->add_subcommand(
      "rotate", "Replace the pair; the old public key is kept under keys/retired/");
  rotate_cmd->add_option("--state-dir", f->state_dir, "The state dir (default ~/.ringfence/state)");
  rotate_cmd->callback([f, result] { result->exit_code = rotate(*f); });
}

}  // namespace rf::cli
