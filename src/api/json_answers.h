// The API's JSON answers, for every file of routes: a body, or an error that
// names the field it is about ({"error": ..., "field": ...}).
#pragma once

#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/json_input.h"
#include "httpd/http_server.h"
#include "httpd/request_target.h"
#include "store/audit_log.h"

namespace rf::api {

// The HTTP server and request targets are httpd's (src/httpd); the API
// names them as its own.
using httpd::Request;
using httpd::Responder;
using httpd::split_target;
using httpd::Target;

inline constexpr const char* kJson = "application/json";

// A header's value, or a request target, as a string_view.
inline std::string_view sv(boost::beast::string_view s) { return {s.data(), s.size()}; }

// An optional value as JSON: null when absent.
inline nlohmann::json opt(const std::optional<int64_t>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}
inline nlohmann::json opt(const std::optional<std::string>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

// An audit event as GET /v1/audit and the console show it.
inline nlohmann::json audit_event_json(const store::AuditEvent& e) {
  return {{"seq", e.seq},
          {"at", e.at},
          {"kind", e.kind},
          {"actor", e.actor},
          {"project", opt(e.project_id)},
          {"run", opt(e.run_id)},
          {"call", opt(e.call_id)},
          {"sandbox", opt(e.sandbox_id)},
          {"detail", parse_json_or_discarded(e.detail_json)},
          {"hash", e.hash}};
}

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

// `text` with every `id` in it shown as `name`: a run's id where its project
// named it otherwise (store/run_names.h) never reaches the tenant.
inline std::string with_name(std::string text, const std::string& id, const std::string& name) {
  if (id == name || id.empty()) return text;
  for (size_t at = text.find(id); at != std::string::npos; at = text.find(id, at + name.size())) {
    text.replace(at, id.size(), name);
  }
  return text;
}

// A run name as a tenant may give it: 1 to 128 printable ASCII characters,
// no '/' nor '~' (the store's own ids use it); else a 400 naming `field`.
inline bool valid_run_name(const std::string& name, const char* field, Responder& r) {
  bool ok = !name.empty() && name.size() <= 128;
  for (char ch : name) ok = ok && ch > ' ' && ch < 0x7f && ch != '/' && ch != '~';
  if (!ok) {
    fail(r, 400, field, "a run's name is 1 to 128 printable characters, without '/' or '~'");
  }
  return ok;
}

}  // namespace rf::api
