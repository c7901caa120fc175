// `ringfence call --api URL`: the same call, sent to `serve` instead of the
// store. The client then needs no store and no store credentials, only its
// project's API token (RINGFENCE_TOKEN or --token-file, never argv), and the
// token decides the project. serve queues the call (POST /v1/calls) under the
// project's operator policy and streams its output back as server-sent
// events (GET /v1/calls/{id}); the exit codes are `call`'s own.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "core/result.h"

namespace rf::cli {

struct ApiCall {
  std::string api;      // serve's base URL, http://HOST:PORT or https://...
  std::string token;    // the project's token (rft_...)
  nlohmann::json body;  // a CallRequest (docs/openapi.yaml)
};

// serve's URL without trailing slashes, for appending /v1/...
std::string api_base(std::string api);
// serve's error answer ({"error", "field"}) as one line: "HTTP 404: no
// sandbox x (field id)".
std::string api_error_line(unsigned status, const std::string& body);

// The token: RINGFENCE_TOKEN, or the first line of `token_file` when given.
// Errors name where it was looked for.
Result<std::string> api_token(const std::string& token_file);

// Queues the call, writes its output as it comes, and returns the exit code
// `call` documents (the command's own; 122 never queued; 123 queued, outcome
// unknown here; 124 cancelled; 125 failed, refused or unusable).
int run_call_via_api(const ApiCall& call);

}  // namespace rf::cli
