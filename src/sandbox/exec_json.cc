#include "sandbox/exec_json.h"

#include <set>

#include "core/base64.h"
#include "core/units.h"
#include "core/utf8.h"
#include "sandbox/result_json.h"

namespace rf {

using nlohmann::json;

void put_bytes(json& j, const std::string& name, const std::string& bytes) {
  if (valid_utf8(bytes)) {
    j[name] = bytes;
  } else {
    j[name] = nullptr;
    j[name + "_base64"] = base64_encode(bytes);
  }
}

Result<ExecCall> parse_exec_json(const json& j) {
  auto bad = [](std::string field, std::string message) {
    return make_error(std::move(field), std::move(message));
  };
  if (!j.is_object()) return bad("body", "expected a JSON object");
  static const std::set<std::string> kKeys = {"argv", "cmd", "stdin",  "stdin_base64",
                                              "env",  "cwd", "timeout"};
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!kKeys.count(it.key()))
      return bad(it.key(),
                 "unknown field (allowed: argv, cmd, stdin, stdin_base64, env, cwd, timeout)");
  }
  ExecCall call;
  if (j.contains("argv") == j.contains("cmd")) {
    return bad("argv", "give exactly one of argv (an array of strings) and cmd (a shell string)");
  }
  if (j.contains("argv")) {
    const json& a = j["argv"];
    if (!a.is_array() || a.empty()) return bad("argv", "expected a non-empty array of strings");
    for (size_t i = 0; i < a.size(); ++i) {
      if (!a[i].is_string()) return bad("argv[" + std::to_string(i) + "]", "expected a string");
      call.argv.push_back(a[i].get<std::string>());
    }
  } else {
    if (!j["cmd"].is_string() || j["cmd"].get<std::string>().empty()) {
      return bad("cmd", "expected a non-empty string");
    }
    call.argv = {"/bin/sh", "-c", j["cmd"].get<std::string>()};
  }
  if (j.contains("stdin") && j.contains("stdin_base64")) {
    return bad("stdin", "give stdin or stdin_base64, not both");
  }
  if (j.contains("stdin")) {
    if (!j["stdin"].is_string()) return bad("stdin", "expected a string");
    call.stdin_data = j["stdin"].get<std::string>();
  }
  if (j.contains("stdin_base64")) {
    if (!j["stdin_base64"].is_string()) return bad("stdin_base64", "expected a string");
    auto bytes = base64_decode(j["stdin_base64"].get<std::string>());
    if (!bytes) return bad("stdin_base64", "not valid base64");
    call.stdin_data = std::move(*bytes);
  }
  if (j.contains("env")) {
    if (!j["env"].is_object()) return bad("env", "expected an object of strings");
    for (auto it = j["env"].begin(); it != j["env"].end(); ++it) {
      if (!it.value().is_string()) return bad("env." + it.key(), "expected a string");
      if (it.key().empty() || it.key().find('=') != std::string::npos) {
        return bad("env." + it.key(), "not a variable name");
      }
      call.env[it.key()] = it.value().get<std::string>();
    }
  }
  if (j.contains("cwd")) {
    if (!j["cwd"].is_string() || j["cwd"].get<std::string>().empty() ||
        j["cwd"].get<std::string>()[0] != '/') {
      return bad("cwd", "expected an absolute path");
    }
    call.cwd = j["cwd"].get<std::string>();
  }
  if (j.contains("timeout")) {
    const json& t = j["timeout"];
    if (t.is_number()) {
      const double s = t.get<double>();
      if (!(s > 0) || s > 86400) return bad("timeout", "expected seconds in (0, 86400]");
      call.timeout = std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
    } else if (t.is_string()) {
      auto d = parse_duration(t.get<std::string>());
      if (!d || d->count() <= 0) return bad("timeout", "expected a duration such as \"30s\"");
      call.timeout = *d;
    } else {
      return bad("timeout", "expected seconds or a duration such as \"30s\"");
    }
  }
  return call;
}

std::optional<std::string> bytes_of(const json& j, const std::string& name) {
  if (j.contains(name) && j[name].is_string()) return j[name].get<std::string>();
  const std::string b64 = name + "_base64";
  if (j.contains(b64) && j[b64].is_string()) return base64_decode(j[b64].get<std::string>());
  return std::nullopt;
}

}  // namespace rf
