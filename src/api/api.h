// The HTTP JSON API of `ringfence serve` (issue 14; docs/openapi.yaml): a
// table of routes, each with the principal it needs (none, a token of the
// route's project, an operator token), and the handlers. Every request but
// /healthz and the console's page has a principal (policy/principal.h): the
// token's project, bound user and role, never what its body claims. A token
// sees its own project only: anything of another project answers exactly as
// an unknown id does. What a tenant asks for is bounded by its project's
// operator policy (policy/operator_policy.h).
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "api/json_answers.h"
#include "api/mcp.h"
#include "api/port_tokens.h"
#include "api/sandbox_service.h"
#include "httpd/http_server.h"
#include "httpd/request_target.h"
#include "policy/principal.h"
#include "proof/signing_key.h"
#include "store/identity_store.h"
#include "store/store.h"
#include "store/store_pool.h"
#include "store/token_store.h"

namespace rf::api {

struct ApiOptions {
  // Requests of one token in flight at once; more answer 429.
  int max_requests_per_token = 64;
  // How long a token's state is trusted before the store is asked again
  // (a revoked token stops working within this).
  std::chrono::milliseconds token_cache{1000};
  // Signs the audit log's checkpoints (GET /v1/audit/checkpoint, proofs);
  // without one those answer 503.
  const proof::SigningKey* signing_key = nullptr;
  // Where the key that seals secrets lives (identity/secrets.h); empty:
  // /v1/secrets answers 503.
  std::string state_dir;
  // More connections for the call routes (POST /v1/calls, GET /v1/calls/ID),
  // which many clients use at once; without a pool they share `store`.
  store::StorePool* call_stores = nullptr;
  // Ports by host name (issue 41): a request whose Host is
  // "{port}-{sandbox}.{port_domain}" goes to that port, its whole target
  // the port's. Empty: only the path form.
  std::string port_domain;
};

class Api {
 public:
  Api(store::Store& store, SandboxService& sandboxes, ApiOptions options = {});
  void handle(const Request& request, Responder& responder);

  // Every route this server answers, as "METHOD /path/{param}" (the paths of
  // docs/openapi.yaml, which must describe each: tests/tenancy).
  static std::vector<std::string> route_names();

 private:
  // One request on its way through a handler.
  struct Ctx {
    const policy::Principal& who;
    const Target& target;
    const Request& request;
    Responder& out;
    std::map<std::string, std::string> params;  // {name} segments of the route
    const std::string& param(const char* name) const { return params.at(name); }
    // A port token that came in the query (api/port_tokens.h): set as a
    // cookie with the port's answer, so the page's own requests carry it.
    std::string port_token;
    // The request came by host name (ApiOptions::port_domain): its whole
    // target is the port's, and a port token's cookie is for "/".
    bool host_form = false;
  };
  enum class Access { kPublic, kToken, kOperator };
  using Fn = void (Api::*)(Ctx&);
  struct Route {
    boost::beast::http::verb method;
    std::string_view path;  // "/v1/runs/{id}:cancel": {x} is one segment
    Access access;
    Fn fn;
    // The query parameters it reads, comma-separated ("*": any, for the
    // console's page). Any other is a 400 naming it: a mistyped ?projetc=
    // is never silently the caller's own project.
    std::string_view query = "";
    // The path's last {name} takes every segment left, slashes and all (a
    // port's paths: /v1/sandboxes/{id}/ports/{port}/{path}).
    bool rest = false;
  };
  static std::span<const Route> routes();

  struct CachedToken {
    std::optional<store::TokenRow> row;
    std::chrono::steady_clock::time_point fetched;
  };
  // The token's principal, or an answer was sent (401/503) and nullopt returned.
  std::optional<policy::Principal> authenticate(const Request& request, Responder& responder);
  bool take_slot(const policy::Principal& who, Responder& responder);
  void give_slot(const policy::Principal& who);
  // The project a request acts for: its token's; an operator token may name
  // another with ?project=. Unknown to the caller: a 404 was sent.
  std::optional<std::string> project_of(Ctx& c);

  // api.cc: the server's own routes.
  void healthz(Ctx& c);
  void console(Ctx& c);
  void metrics(Ctx& c);
  void mcp(Ctx& c);
  void fleet(Ctx& c);
  std::string metrics_text();
  // api_sandboxes.cc: /v1/sandboxes.
  void sandboxes_create(Ctx& c);
  void sandboxes_list(Ctx& c);
  void sandbox_get(Ctx& c);
  void sandbox_delete(Ctx& c);
  void sandbox_timeout(Ctx& c);
  void sandbox_pause(Ctx& c);
  void sandbox_resume(Ctx& c);
  void set_paused(Ctx& c, bool paused);
  void sandbox_file_stat(Ctx& c);
  void sandbox_file_delete(Ctx& c);
  void sandbox_file_mkdir(Ctx& c);
  void sandbox_file_move(Ctx& c);
  void sandbox_file_watch(Ctx& c);
  void sandbox_processes(Ctx& c);   // every /v1/sandboxes/{id}/processes route
  void sandbox_port(Ctx& c);        // every /v1/sandboxes/{id}/ports/{port}/... request
  void sandbox_port_share(Ctx& c);  // a token for one port, for a browser
  void sandbox_ports(Ctx& c);       // the ports its processes listen on
  void volumes_create(Ctx& c);
  void volumes_list(Ctx& c);
  void volume_get(Ctx& c);
  void volume_delete(Ctx& c);
  void sandbox_exec(Ctx& c);
  void sandbox_file_get(Ctx& c);
  void sandbox_file_put(Ctx& c);
  void sandbox_files_list(Ctx& c);
  // api_records.cc: workflow runs, approvals, the console's stream.
  void runs_start(Ctx& c);
  void runs_list(Ctx& c);
  void run_get(Ctx& c);
  void run_cancel(Ctx& c);
  void run_replay(Ctx& c);
  void run_events(Ctx& c);
  void approvals_list(Ctx& c);
  void approval_get(Ctx& c);
  void approval_approve(Ctx& c);
  void approval_deny(Ctx& c);
  void approval_decide(Ctx& c, bool approve);
  void console_events(Ctx& c);
  std::optional<bool> audit_intact();
  nlohmann::json console_snapshot(const std::string& project);
  // api_calls.cc: POST /v1/calls, GET /v1/calls/{id}.
  void calls_create(Ctx& c);
  void call_get(Ctx& c);
  // api_audit.cc: the audit log, its checkpoint and proofs (issue 15).
  void audit_list(Ctx& c);
  void audit_verify(Ctx& c);
  void audit_checkpoint(Ctx& c);
  void audit_inclusion(Ctx& c);
  void audit_consistency(Ctx& c);
  // api_secrets.cc: /v1/secrets (list), /v1/secrets/NAME (get, set, revoke).
  void secrets_list(Ctx& c);
  void secret_get(Ctx& c);
  void secret_put(Ctx& c);
  void secret_delete(Ctx& c);
  std::optional<std::optional<store::SecretRow>> secret_of(Ctx& c);

  // A Store for one request's statements: one of options_.call_stores, else store_.
  struct Borrowed {
    store::StorePool::Lease lease;  // empty: `store` is store_
    store::Store* store = nullptr;
    store::Store& operator*() const { return *store; }
  };
  Borrowed borrow_store();

  store::Store& store_;
  store::TokenStore tokens_;
  SandboxService& sandboxes_;
  std::unique_ptr<PortTokens> port_tokens_;  // null without a state dir
  McpServer mcp_;
  ApiOptions options_;

  std::mutex mu_;
  std::map<std::string, CachedToken> token_cache_;  // by hash
  std::map<std::string, int> in_flight_;            // by token id
  std::mutex verdict_mu_;
  std::optional<bool> verdict_;
  std::chrono::steady_clock::time_point verdict_at_{};

  // /metrics
  std::atomic<uint64_t> requests_{0}, unauthorized_{0}, throttled_{0}, denied_{0};
  std::atomic<uint64_t> execs_{0}, exec_errors_{0}, streams_open_{0}, abandoned_{0};
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

}  // namespace rf::api
