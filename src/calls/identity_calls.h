// Identity-scoped calls (worker side, issue 11). For a call made with
// `call --identity`, the worker:
//  - refuses sandbox mode none for production projects, and elsewhere unless
//    the operator opted in (sandbox.allow_identity_without_sandbox), loudly;
//  - resolves the cascade again when the sandbox starts (fail closed: a
//    secret revoked after enqueue never reaches it);
//  - puts the values into that call's environment only, records the
//    injection (store and audit log, never values), and marks the sandbox:
//    it never goes back to a pool, never serves another run, and every later
//    call in it (a per_run sandbox) is redacted too, a call for another user
//    or workflow is refused;
//  - watches for hard revocations: within a second, the sandboxes that
//    received a hard-revoked secret are ended, and their calls end revoked.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "identity/cascade.h"
#include "identity/secrets.h"
#include "redact/patterns.h"
#include "sandbox/sandbox.h"
#include "store/identity_store.h"
#include "store/store.h"

namespace rf::calls {

// What a sandbox received: for whom, and what to redact from it from now on.
struct IdentityMark {
  std::string scope;                           // "project\nworkflow\nuser"
  std::vector<redact::SecretToRedact> values;  // every value it received
  std::shared_ptr<const redact::Patterns> patterns;
};

// Who receives identity: a call (`call --identity`) or a workflow step's
// call; the cascade is resolved for its project and scope.
struct IdentityUse {
  int64_t call_id = 0;
  std::string project;
  std::string run;
  store::IdentityScope scope;
  // A claimed call's: its scope, or none when it asked for no identity.
  static IdentityUse of(const store::ClaimedCall& call);
};

struct PreparedIdentity {
  // resolved.env also holds what the gateway and proxy entries put in the
  // environment: their placeholders, gateway URLs, git's config.
  identity::ResolvedIdentity resolved;
  std::vector<redact::SecretToRedact> values;
  std::shared_ptr<const redact::Patterns> patterns;
  std::string scope;
  // The gateway and proxy entries, for the sandbox's egress edge.
  std::vector<net::EdgeCredential> edge;
  // A proxy entry: the sandbox must trust a CA of its own (spec tls_intercept).
  bool needs_intercept() const;
};

class IdentityCalls {
 public:
  struct Options {
    std::string worker_id;
    std::string state_dir;
    identity::VaultAccess* vault = nullptr;
    bool allow_without_sandbox = false;
    std::chrono::milliseconds watch_period{200};
  };
  // `discard` ends a sandbox now (the router's discard).
  IdentityCalls(store::Store& store, Options options,
                std::function<void(const std::shared_ptr<Sandbox>&)> discard);
  ~IdentityCalls();

  // Before the sandbox: may identity go where this worker runs calls
  // (`in_sandbox` false: sandbox mode none), and what does the cascade give
  // now. `notice` gets a line for the call's stderr when identity runs
  // without a sandbox (opted in).
  Result<PreparedIdentity> prepare(const IdentityUse& use, bool in_sandbox, std::string* notice);
  // The cascade alone, resolved and audited (prepare's second half): for the
  // worker's own use (an in_process llm step's key) the values go into no
  // sandbox, so the sandbox mode does not matter.
  Result<PreparedIdentity> resolve_for_worker(const IdentityUse& use);
  // The sandbox is known: refuses one marked for another scope; else records
  // the injection, marks the sandbox, and binds the gateway and proxy entries
  // at its egress edge (added to what earlier calls in it bound). Call before exec.
  Status inject(const IdentityUse& use, const PreparedIdentity& prepared,
                const std::shared_ptr<Sandbox>& sandbox);
  // The scope a sandbox received identity for ("" = none): a workflow run
  // keeps a per_run sandbox per scope.
  std::string scope_of(const Sandbox& sandbox);
  // What to redact from a call without identity in `sandbox`: a per_run
  // sandbox that received identity for an earlier call of its run may still
  // hold the values (in files, in processes), so its later calls are redacted
  // too. Null: nothing to redact.
  std::shared_ptr<const redact::Patterns> patterns_for(const Sandbox& sandbox);
  // ---- JIT (issue 13)
  // The cascade of `use` as it stands now (fail closed: a revoked secret in it
  // is an error naming it); values are not opened.
  Result<identity::CascadePlan> plan_now(const IdentityUse& use);
  // The current value of one secret (fail closed).
  Result<identity::OpenedSecret> open_secret(const std::string& name);
  // A value granted to a live sandbox: recorded as an injection first (hard
  // revocation finds it), with `audit` (the request's trail so far) in the
  // same transaction, then added to what its calls are redacted of.
  // Returns the sandbox's patterns with it.
  Result<std::shared_ptr<const redact::Patterns>> inject_late(
      const IdentityUse& use, const std::shared_ptr<Sandbox>& sandbox, const std::string& key,
      const std::string& secret, int64_t version, std::string_view value,
      const std::vector<store::AuditEvent>& audit = {});
  const std::string& worker_id() const { return options_.worker_id; }

  // The call ended. Returns the reason when a hard revocation ended it.
  std::optional<std::string> call_ended(int64_t call_id);
  // The sandbox is gone (after the call, or its run ended).
  void sandbox_gone(const std::string& sandbox_id);

 private:
  // What an injection of `key` into `sandbox_id` is recorded as (never the value).
  store::InjectionRow injection_row(const IdentityUse& use, const std::string& sandbox_id,
                                    const std::string& key, const std::string& secret,
                                    int64_t version) const;
  // Audits the refusal and returns it as the error.
  Error refuse(const IdentityUse& use, std::string why);
  void watch_loop();
  void end_revoked();

  store::Store& store_;
  store::IdentityStore rows_;
  // ---- The egress edge: revocation and what requests did (gateway, proxy)
  Status bind_edge(const IdentityUse& call, const PreparedIdentity& prepared,
                   const std::shared_ptr<Sandbox>& sandbox);
  // Takes each bound credential whose secret is no longer active away from
  // its sandbox (from the next request on), and audits it.
  void withdraw_revoked_edge();
  // Writes what the edge reported (edge.used, edge.refused) to the audit log.
  void audit_edge_events();
  // Hears what the edge's requests did (on a proxy thread): queued for the watcher.
  std::function<void(const net::EdgeEvent&)> edge_listener();

  Options options_;
  std::function<void(const std::shared_ptr<Sandbox>&)> discard_;
  identity::Secrets secrets_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  struct Marked {
    IdentityMark mark;
    std::weak_ptr<Sandbox> sandbox;
    std::vector<net::EdgeCredential> edge;  // bound at its egress edge
    std::string project, run;
  };
  std::vector<net::EdgeEvent> edge_events_;       // from the proxy's threads, to audit
  std::map<std::string, Marked> marked_;          // by sandbox id
  std::map<int64_t, std::string> revoked_calls_;  // call id -> why it was ended
  std::thread watcher_;
};

}  // namespace rf::calls
