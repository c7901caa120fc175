#include "sandbox/lifetime_request.h"

#include "core/units.h"
#include "core/utf8.h"

namespace rf {

using nlohmann::json;

Result<std::chrono::milliseconds> parse_lifetime_timeout(const json& value,
                                                         std::string_view field) {
  const std::string where(field);
  if (value.is_number()) {
    const double s = value.get<double>();
    if (!(s > 0) || s > 366.0 * 86400) return make_error(where, "expected seconds, more than 0");
    return std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
  }
  if (value.is_string()) {
    auto d = parse_duration(value.get<std::string>());
    if (!d) return make_error(where, d.error().message);
    if (d->count() <= 0) return make_error(where, "must be more than 0");
    return *d;
  }
  return make_error(where, "expected seconds or a duration such as \"10m\"");
}

Status check_sandbox_name(std::string_view name, std::string_view field) {
  const std::string where(field);
  if (name.empty() || name.size() > 64)
    return make_error(where, "expected 1 to 64 characters, got " + std::to_string(name.size()));
  if (name.front() == '.' || name.front() == '-')
    return make_error(where, "must not start with '.' or '-'");
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return make_error(where, "only letters, digits, '.', '_' and '-' are allowed");
  }
  return ok_status();
}

Result<LifetimeRequest> take_lifetime(json& body) {
  LifetimeRequest r;
  if (!body.is_object()) return r;
  if (body.contains("timeout")) {
    auto t = parse_lifetime_timeout(body["timeout"], "timeout");
    if (!t) return t.take_error();
    r.timeout = *t;
    body.erase("timeout");
  }
  if (body.contains("idle_timeout")) {
    auto t = parse_lifetime_timeout(body["idle_timeout"], "idle_timeout");
    if (!t) return t.take_error();
    r.idle_timeout = *t;
    body.erase("idle_timeout");
  }
  if (body.contains("name")) {
    if (!body["name"].is_string()) return make_error("name", "expected a string");
    r.name = body["name"].get<std::string>();
    RF_TRY(check_sandbox_name(r.name, "name"));
    body.erase("name");
  }
  if (body.contains("cwd")) {
    if (!body["cwd"].is_string() || body["cwd"].get<std::string>().empty() ||
        body["cwd"].get<std::string>()[0] != '/' || !valid_utf8(body["cwd"].get<std::string>()))
      return make_error("cwd", "expected an absolute path");
    r.cwd = body["cwd"].get<std::string>();
    body.erase("cwd");
  }
  if (body.contains("metadata")) {
    const json& m = body["metadata"];
    if (!m.is_object()) return make_error("metadata", "expected an object of strings");
    if (m.size() > kMaxMetadataPairs)
      return make_error("metadata", "at most " + std::to_string(kMaxMetadataPairs) + " keys");
    for (auto it = m.begin(); it != m.end(); ++it) {
      const std::string field = "metadata." + it.key();
      if (it.key().empty() || it.key().size() > kMaxMetadataKey || !valid_utf8(it.key()))
        return make_error("metadata", "a key of 1 to " + std::to_string(kMaxMetadataKey) +
                                          " bytes of UTF-8 is expected");
      if (!it.value().is_string()) return make_error(field, "expected a string");
      const std::string v = it.value().get<std::string>();
      if (v.size() > kMaxMetadataValue || !valid_utf8(v))
        return make_error(
            field, "expected at most " + std::to_string(kMaxMetadataValue) + " bytes of UTF-8");
      r.metadata[it.key()] = v;
    }
    body.erase("metadata");
  }
  return r;
}

}  // namespace rf
