#include "runner/cred_line.h"

#include <nlohmann/json.hpp>

#include "core/json_input.h"

namespace rf::runner {

Result<proto::CredRequest> parse_cred_line(const std::string& line) {
  using nlohmann::json;
  const json j = rf::parse_json_or_discarded(line);
  proto::CredRequest r;
  auto text = [&](const char* key, std::string* out) {
    auto f = j.find(key);
    if (f == j.end()) return true;
    if (!f->is_string()) return false;
    *out = f->get<std::string>();
    return true;
  };
  if (!j.is_object() || !text("name", &r.name) || !text("scope", &r.scope) ||
      !text("reason", &r.reason)) {
    return make_error("", "rf-cred: the request is not a JSON object of strings");
  }
  if (r.name.empty()) return make_error("", "rf-cred: no credential name was given");
  if (r.name.size() > proto::kMaxCredName || r.scope.size() > proto::kMaxCredName ||
      r.reason.size() > proto::kMaxCredReason) {
    return make_error("", "rf-cred: name and scope take at most 256 bytes, the reason 4096 bytes");
  }
  return r;
}

}  // namespace rf::runner
