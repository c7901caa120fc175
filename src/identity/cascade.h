// The identity cascade (host side): the profiles that apply to a project,
// workflow and user, merged key by key, the most specific level winning
// (system < project < workflow < user; within workflow and user, one scoped
// to the project beats one for any project). Planning reads no values and
// refuses a cascade that references a revoked secret, naming the key and the
// secret; resolving opens the values of the plan's secrets.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/result.h"
#include "identity/secret_value.h"
#include "identity/secrets.h"
#include "store/identity_store.h"

namespace rf::identity {

struct CascadeRequest {
  std::string project;
  std::string workflow;  // "" = no workflow level
  std::string user;      // "" = no user level
};

struct CascadeEntry {
  std::string key;
  store::ProfileLevel level = store::ProfileLevel::system;
  std::string profile;
  store::ProfileEntry::Kind kind = store::ProfileEntry::Kind::value;
  std::string secret;   // kind secret: its name
  int64_t version = 0;  // kind secret: the version that will be given
  std::string plain;    // kind value: the value (not a secret)
  // How it reaches the sandbox (store::ProfileEntry::delivery): "env"
  // entries are in the environment at start; "gateway" and "proxy" ones are
  // swapped in at the egress edge (a placeholder in the environment); "jit"
  // ones are asked for.
  std::string delivery = "env";
  std::string delivery_json = "{}";
  bool at_start() const { return delivery == "env"; }
  bool at_edge() const { return delivery == "gateway" || delivery == "proxy"; }
  // Opened when the sandbox starts (every delivery but jit).
  bool opened_at_start() const { return delivery != "jit"; }
  // Profiles whose entry for this key lost to this one, least specific first.
  std::vector<std::string> overridden;
};

struct CascadePlan {
  CascadeRequest request;
  std::vector<CascadeEntry> entries;         // by key
  std::vector<std::string> secrets() const;  // the secret names it references
  // The rows planning read (sealed values only), so resolving reads nothing again.
  std::map<std::string, std::pair<store::SecretRow, store::SealedVersion>> rows;
};

struct ResolvedIdentity {
  CascadePlan plan;
  // key -> value: the entries delivered at start (env secrets, plain values);
  // JIT entries are opened only when asked for.
  std::map<std::string, SecretValue> env;
  // key -> value: the gateway and proxy entries, for the egress edge only.
  std::map<std::string, SecretValue> edge;
};

// Refused: an unknown project is fine (no project profiles), but a secret
// that is missing, revoked or hard-revoked is an error naming key and secret
// (for a jit entry, only a missing one: a revoked one is refused when asked for).
Result<CascadePlan> plan_cascade(store::IdentityStore& rows, const CascadeRequest& request);
// Plans, then opens every secret of the plan (fail closed).
Result<ResolvedIdentity> resolve_cascade(store::IdentityStore& rows, Secrets& secrets,
                                         const CascadeRequest& request);

// The plan as JSON for `identity resolve --json` and the audit log: keys,
// levels, profiles, secret names and versions; never a secret's value.
std::string plan_json(const CascadePlan& plan, bool explain);

}  // namespace rf::identity
