// The in_process `http` and `llm` steps (issue 12): one request from the
// worker, through an egress policy as a sandbox's would be. Each returns what
// it got and the exchange (request and answer, never the key) that replay
// answers with.
//
// llm speaks three APIs, without streaming:
//   openai_chat         POST BASE/chat/completions   (BASE ends in /v1)
//   openai_responses    POST BASE/responses
//   anthropic_messages  POST BASE/v1/messages        (BASE without /v1, as
//                                                     ANTHROPIC_BASE_URL)
// Its egress rule is the base URL's own host and port: a name that resolves
// to loopback or private space is refused, an IP literal written in the URL
// is allowed as written.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/result.h"
#include "http_client/http_client.h"

namespace rf::in_process {

struct HttpStepSpec {
  std::string method = "GET";
  std::string url;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::vector<std::string> allow;  // egress rules, as a sandbox's
  net::ResolveOverride resolve;
  std::chrono::milliseconds timeout{60'000};
};

struct StepAnswer {
  std::string output;                  // the body, or the model's text
  std::optional<nlohmann::json> json;  // the body parsed, or the model's whole answer
  unsigned status = 0;
  nlohmann::json exchange;  // {"request": ..., "response": ...}
  bool retryable = false;   // a failure worth another attempt (5xx, 429, unreachable)
};

// Fails on a refused or unreachable target and on a status of 400 or more,
// naming the method, URL and status (and `retryable` says which kind).
Result<StepAnswer> run_http_step(const HttpStepSpec& spec, bool* retryable);

struct LlmStepSpec {
  std::string api;
  std::string base_url;
  std::string model;
  std::string key;  // never recorded, never in an error
  std::string system;
  std::string prompt;
  int max_tokens = 1024;
  std::optional<double> temperature;
  net::ResolveOverride resolve;
  std::chrono::milliseconds timeout{120'000};
};

Result<StepAnswer> run_llm_step(const LlmStepSpec& spec, bool* retryable);

}  // namespace rf::in_process
