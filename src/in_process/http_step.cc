#include "in_process/http_step.h"

#include "core/json_input.h"
#include "net/egress_policy.h"

namespace rf::in_process {
namespace {

using nlohmann::json;

constexpr size_t kRecordBody = 256 << 10;  // bytes of each body an exchange keeps

std::string clip(const std::string& s) {
  return s.size() > kRecordBody ? s.substr(0, kRecordBody) : s;
}

std::string scrub(std::string text, const std::string& secret) {
  if (secret.empty()) return text;
  static const std::string mark = "[REDACTED:key]";
  for (size_t at = text.find(secret); at != std::string::npos;
       at = text.find(secret, at + mark.size())) {
    text.replace(at, secret.size(), mark);
  }
  return text;
}

json headers_json(const http::Headers& h, const std::string& hide) {
  json out = json::object();
  for (const auto& [k, v] : h) out[k] = hide.empty() ? v : scrub(v, hide);
  return out;
}

bool retry_status(unsigned status) { return status == 429 || status >= 500; }

Result<StepAnswer> exchange(const http::Request& req, const http::Options& options,
                            const std::string& hide, bool* retryable) {
  *retryable = false;
  StepAnswer out;
  out.exchange["request"] = {{"method", req.method},
                             {"url", req.url},
                             {"headers", headers_json(req.headers, hide)},
                             {"body", clip(scrub(req.body, hide))}};
  http::Failure failure = http::Failure::kNone;
  const auto started = std::chrono::steady_clock::now();
  auto resp = http::fetch(req, options, &failure);
  out.exchange["duration_ms"] =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  if (!resp) {
    *retryable = failure == http::Failure::kUnreachable || failure == http::Failure::kTimeout;
    return make_error(resp.error().where, scrub(resp.error().message, hide));
  }
  out.status = resp->status;
  out.exchange["response"] = {{"status", resp->status},
                              {"headers", headers_json(resp->headers, hide)},
                              {"body", clip(scrub(resp->body, hide))}};
  if (resp->status >= 400) {
    *retryable = retry_status(resp->status);
    std::string body = scrub(resp->body, hide);
    for (char& c : body) {
      if (static_cast<unsigned char>(c) < 0x20) c = ' ';
    }
    if (body.size() > 300) body = body.substr(0, 300) + "...";
    return make_error(req.method + " " + req.url, "answered " + std::to_string(resp->status) +
                                                      (body.empty() ? "" : ": " + body));
  }
  out.output = scrub(resp->body, hide);
  json parsed = rf::parse_json_or_discarded(out.output);
  if (!parsed.is_discarded()) out.json = std::move(parsed);
  return out;
}

std::string trim_slash(std::string s) {
  while (!s.empty() && s.back() == '/') s.pop_back();
  return s;
}

}  // namespace

Result<StepAnswer> run_http_step(const HttpStepSpec& spec, bool* retryable) {
  *retryable = false;
  auto policy = net::EgressPolicy::parse(spec.allow);
  if (!policy) return make_error("allow", policy.error().to_string());
  http::Options options;
  options.policy = &*policy;
  options.resolve = spec.resolve;
  options.timeout = spec.timeout;
  http::Request req;
  req.method = spec.method;
  req.url = spec.url;
  req.headers = spec.headers;
  req.body = spec.body;
  return exchange(req, options, "", retryable);
}

Result<StepAnswer> run_llm_step(const LlmStepSpec& s, bool* retryable) {
  *retryable = false;
  auto base = http::parse_url(s.base_url);
  if (!base) return base.take_error();
  // The base URL's own host and port is the one place this request may go.
  const bool v6 = base->host.find(':') != std::string::npos;
  const std::string rule =
      (v6 ? "[" + base->host + "]" : base->host) + ":" + std::to_string(base->port);
  auto policy = net::EgressPolicy::parse({rule});
  if (!policy) return make_error("model.base_url", policy.error().to_string());
  http::Options options;
  options.policy = &*policy;
  options.resolve = s.resolve;
  options.timeout = s.timeout;
  http::Request req;
  req.method = "POST";
  req.headers = {{"Content-Type", "application/json"}};
  json body;
  const std::string root = trim_slash(s.base_url);
  if (s.api == "openai_chat") {
    req.url = root + "/chat/completions";
    req.headers.emplace_back("Authorization", "Bearer " + s.key);
    json messages = json::array();
    if (!s.system.empty()) messages.push_back({{"role", "system"}, {"content", s.system}});
    messages.push_back({{"role", "user"}, {"content", s.prompt}});
    body = {{"model", s.model}, {"messages", messages}, {"max_tokens", s.max_tokens}};
  } else if (s.api == "openai_responses") {
    req.url = root + "/responses";
    req.headers.emplace_back("Authorization", "Bearer " + s.key);
    body = {{"model", s.model}, {"input", s.prompt}, {"max_output_tokens", s.max_tokens}};
    if (!s.system.empty()) body["instructions"] = s.system;
  } else if (s.api == "anthropic_messages") {
    req.url = root + "/v1/messages";
    req.headers.emplace_back("x-api-key", s.key);
    req.headers.emplace_back("anthropic-version", "2023-06-01");
    body = {{"model", s.model},
            {"max_tokens", s.max_tokens},
            {"messages", json::array({{{"role", "user"}, {"content", s.prompt}}})}};
    if (!s.system.empty()) body["system"] = s.system;
  } else {
    return make_error("model.api", "unknown API \"" + s.api + "\"");
  }
  if (s.temperature) body["temperature"] = *s.temperature;
  body["stream"] = false;
  req.body = body.dump();
  auto got = exchange(req, options, s.key, retryable);
  if (!got) return make_error("model " + s.model + " at " + s.base_url, got.error().to_string());
  if (!got->json || !got->json->is_object()) {
    *retryable = true;
    return make_error("model " + s.model + " at " + s.base_url, "the answer is not JSON");
  }
  const json& a = *got->json;
  std::string text;
  if (s.api == "openai_chat") {
    if (a.contains("choices") && a["choices"].is_array() && !a["choices"].empty() &&
        a["choices"][0].contains("message") && a["choices"][0]["message"].contains("content") &&
        a["choices"][0]["message"]["content"].is_string()) {
      text = a["choices"][0]["message"]["content"].get<std::string>();
    }
  } else if (s.api == "openai_responses") {
    if (a.contains("output_text") && a["output_text"].is_string()) {
      text = a["output_text"].get<std::string>();
    } else if (a.contains("output") && a["output"].is_array()) {
      for (const auto& item : a["output"]) {
        if (!item.is_object() || !item.contains("content") || !item["content"].is_array()) continue;
        for (const auto& c : item["content"]) {
          if (c.is_object() && c.value("type", "") == "output_text" && c.contains("text") &&
              c["text"].is_string()) {
            text += c["text"].get<std::string>();
          }
        }
      }
    }
  } else {
    if (a.contains("content") && a["content"].is_array()) {
      for (const auto& c : a["content"]) {
        if (c.is_object() && c.value("type", "") == "text" && c.contains("text") &&
            c["text"].is_string()) {
          text += c["text"].get<std::string>();
        }
      }
    }
  }
  if (text.empty()) {
    return make_error("model " + s.model + " at " + s.base_url,
                      "the answer holds no text (" + s.api + ")");
  }
  got->output = text;
  return got;
}

}  // namespace rf::in_process
