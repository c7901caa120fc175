// The HTTP JSON API of `ringfence serve` (issue 14; docs/openapi.yaml): routes,
// bearer-token auth, per-token bounds, and the answers' JSON. Every route but
// /healthz needs a token; a token sees its own project only, and anything of
// another project answers 404, as if it did not exist.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "api/http_server.h"
#include "api/mcp.h"
#include "api/request_target.h"
#include "api/sandbox_service.h"
#include "proof/signing_key.h"
#include "store/store.h"
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
};

class Api {
 public:
  Api(store::Store& store, SandboxService& sandboxes, ApiOptions options = {});
  void handle(const Request& request, Responder& responder);

 private:
  struct Caller {
    std::string token_id;
    std::string token_name;
    std::string project;
  };
  struct CachedToken {
    std::optional<store::TokenRow> row;
    std::chrono::steady_clock::time_point fetched;
  };
  // The token's project, or an answer was sent (401/429) and nullopt returned.
  std::optional<Caller> authenticate(const Request& request, Responder& responder);
  void route(const Caller& caller, const Target& target, const Request& request,
             Responder& responder);
  std::string metrics_text();
  void serve_mcp(const Caller& caller, const Request& request, Responder& responder);
  // api_records.cc: runs, approvals, audit, the console's stream.
  void route_records(const Caller& caller, const Target& target, const Request& request,
                     Responder& responder);
  nlohmann::json console_snapshot(const std::string& project);
  // /v1/audit/checkpoint, /v1/audit/proofs/inclusion?seq=N,
  // /v1/audit/proofs/consistency?from=M[&to=N] (issue 15): the log's Merkle
  // tree, whole (its checkpoints and proofs name no project's data).
  void route_audit_proofs(const Caller& caller, const Target& target, const Request& request,
                          Responder& responder);
  void route_calls(const Caller& caller, const Target& target, const Request& request,
                   Responder& responder);
  // api_secrets.cc: /v1/secrets (list), /v1/secrets/NAME (PUT sets, DELETE revokes).
  void route_secrets(const Caller& caller, const Target& target, const Request& request,
                     Responder& responder);

  store::Store& store_;
  store::TokenStore tokens_;
  SandboxService& sandboxes_;
  McpServer mcp_;
  ApiOptions options_;

  std::mutex mu_;
  std::map<std::string, CachedToken> token_cache_;  // by hash
  std::map<std::string, int> in_flight_;            // by token id

  // /metrics
  std::atomic<uint64_t> requests_{0}, unauthorized_{0}, throttled_{0};
  std::atomic<uint64_t> execs_{0}, exec_errors_{0}, streams_open_{0};
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

}  // namespace rf::api
