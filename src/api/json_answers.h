// The API's JSON answers, for every file of routes: a body, or an error that
// names the field it is about ({"error": ..., "field": ...}).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "api/http_server.h"

namespace rf::api {

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

}  // namespace rf::api
