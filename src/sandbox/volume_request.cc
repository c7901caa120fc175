#include "sandbox/volume_request.h"

#include "core/units.h"
#include "sandbox/lifetime_request.h"
#include "sandbox/spec.h"

namespace rf {
using nlohmann::json;

Status check_volume_name(const std::string& name, const std::string& field) {
  return check_sandbox_name(name, field);
}

Result<std::vector<VolumeAsk>> take_volumes(json& body) {
  std::vector<VolumeAsk> out;
  if (!body.is_object() || !body.contains("volumes")) return out;
  const json given = body["volumes"];
  body.erase("volumes");
  if (!given.is_array()) return make_error("volumes", "expected an array of {name, path}");
  if (given.size() > kMaxVolumeMounts) {
    return make_error("volumes", "at most " + std::to_string(kMaxVolumeMounts) + " per sandbox");
  }
  for (size_t i = 0; i < given.size(); ++i) {
    const std::string at = "volumes[" + std::to_string(i) + "]";
    const json& v = given[i];
    if (!v.is_object()) return make_error(at, "expected {name, path, readonly}");
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (it.key() != "name" && it.key() != "path" && it.key() != "readonly")
        return make_error(at + "." + it.key(), "unknown field (allowed: name, path, readonly)");
    }
    VolumeAsk ask;
    if (!v.contains("name") || !v["name"].is_string())
      return make_error(at + ".name", "expected the name of one of the project's volumes");
    ask.name = v["name"];
    RF_TRY(check_volume_name(ask.name, at + ".name"));
    if (!v.contains("path") || !v["path"].is_string())
      return make_error(at + ".path", "expected an absolute path, such as /var/agent/state");
    ask.path = v["path"];
    RF_TRY(check_volume_path(ask.path, at + ".path"));
    if (v.contains("readonly")) {
      if (!v["readonly"].is_boolean())
        return make_error(at + ".readonly", "expected true or false");
      ask.readonly = v["readonly"];
    }
    for (const VolumeAsk& earlier : out) {
      if (earlier.path == ask.path)
        return make_error(at + ".path", ask.path + " is another volume's path already");
    }
    out.push_back(std::move(ask));
  }
  return out;
}

Result<VolumeCreate> parse_volume_create(const json& body) {
  if (!body.is_object()) return make_error("body", "expected {\"name\": ..., \"size\": \"1g\"}");
  for (auto it = body.begin(); it != body.end(); ++it) {
    if (it.key() != "name" && it.key() != "size")
      return make_error(it.key(), "unknown field (allowed: name, size)");
  }
  VolumeCreate out;
  if (!body.contains("name") || !body["name"].is_string())
    return make_error("name", "expected a name, such as state");
  out.name = body["name"];
  RF_TRY(check_volume_name(out.name, "name"));
  if (body.contains("size")) {
    const json& s = body["size"];
    Result<uint64_t> bytes = make_error("size", "");
    if (s.is_string()) {
      bytes = parse_size(s.get<std::string>());
    } else if (s.is_number_integer() && s.get<int64_t>() > 0) {
      bytes = static_cast<uint64_t>(s.get<int64_t>());
    }
    if (!bytes) return make_error("size", "expected a size such as \"1g\" or a number of bytes");
    if (*bytes < kMinVolumeSize) return make_error("size", "at least 16m");
    out.size = *bytes;
  }
  return out;
}

}  // namespace rf
