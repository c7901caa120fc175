// The API's JSON answers, for every file of routes: a body, or an error that
// names the field it is about ({"error": ..., "field": ...}).
#pragma once

#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/json_input.h"
#include "httpd/http_server.h"
#include "httpd/request_target.h"

namespace rf::api {

// The HTTP server and request targets are httpd's (src/httpd); the API
// names them as its own.
using httpd::Request;
using httpd::Responder;
using httpd::split_target;
using httpd::Target;

inline constexpr const char* kJson = "application/json";

inline void answer(Responder& r, int status, const nlohmann::json& body,
                   const std::vector<std::pair<std::string, std::string>>& headers = {}) {
  (void)r.respond(status, kJson, body.dump() + "\n", headers);
}

inline void fail(Responder& r, int status, const std::string& field, const std::string& message) {
  nlohmann::json body = {{"error", message}};
  if (!field.empty()) body["field"] = field;
  answer(r, status, body);
}

// The request's body as a JSON object (an empty body is {} when
// `empty_is_object`); otherwise a 400 that says what is wrong with it (not
// JSON, nested too deep, not an object) was sent, and nullopt returned.
inline std::optional<nlohmann::json> body_object(const Request& request, Responder& r,
                                                 bool empty_is_object = false) {
  const std::string& text = request.body();
  if (text.empty() && empty_is_object) return nlohmann::json::object();
  auto parsed = parse_json(text, "body");
  if (!parsed) {
    fail(r, 400, "body", parsed.error().message);
    return std::nullopt;
  }
  if (!parsed->is_object()) {
    fail(r, 400, "body", "expected a JSON object");
    return std::nullopt;
  }
  return std::move(*parsed);
}

// Every key of `body` is one of `allowed`; otherwise a 400 naming the first
// other one was sent, and false returned.
inline bool only_fields(const nlohmann::json& body, std::initializer_list<const char*> allowed,
                        Responder& r) {
  for (auto it = body.begin(); it != body.end(); ++it) {
    bool known = false;
    std::string list;
    for (const char* a : allowed) {
      known = known || it.key() == a;
      list += (list.empty() ? "" : ", ") + std::string(a);
    }
    if (!known) {
      fail(r, 400, it.key(), "unknown field (allowed: " + list + ")");
      return false;
    }
  }
  return true;
}

}  // namespace rf::api
