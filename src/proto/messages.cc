#include "proto/messages.h"

#include <nlohmann/json.hpp>

#include "core/json_input.h"

namespace rf::proto {
namespace {

using nlohmann::json;

// Reads fields out of a JSON object, remembering the first error with the
// message name and field path ("exec.argv[2]: expected a string").
class Reader {
 public:
  Reader(const std::string& text, const char* msg) : msg_(msg) {
    j_ = rf::parse_json_or_discarded(text);
    if (j_.is_discarded())
      fail("", "not valid JSON");
    else if (!j_.is_object())
      fail("", "expected a JSON object");
  }

  template <class T>
  void get(const char* key, T* out, bool required = false) {
    if (err_) return;
    auto it = j_.find(key);
    if (it == j_.end()) {
      if (required) fail(key, "missing");
      return;
    }
    read(*it, key, out);
  }

  bool ok() const { return !err_.has_value(); }
  Error error() const { return *err_; }

 private:
  void fail(const std::string& field, const std::string& what) {
    if (err_) return;
    err_ = make_error(field.empty() ? msg_ : msg_ + "." + field, what);
  }
  void read(const json& v, const std::string& path, std::string* out) {
    if (!v.is_string()) return fail(path, "expected a string");
    *out = v.get<std::string>();
  }
  void read(const json& v, const std::string& path, bool* out) {
    if (!v.is_boolean()) return fail(path, "expected true or false");
    *out = v.get<bool>();
  }
  template <class I>
  requires std::is_integral_v<I>
  void read(const json& v, const std::string& path, I* out) {
    if (!v.is_number_integer()) return fail(path, "expected an integer");
    if (v.is_number_unsigned()) {
      const auto u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<I>::max()))
        return fail(path, "out of range");
      *out = static_cast<I>(u);
      return;
    }
    const auto s = v.get<int64_t>();
    if (s < static_cast<int64_t>(std::numeric_limits<I>::min()) ||
        (s > 0 &&
         static_cast<uint64_t>(s) > static_cast<uint64_t>(std::numeric_limits<I>::max()))) {
      return fail(path, "out of range");
    }
    *out = static_cast<I>(s);
  }
  template <class T>
  void read(const json& v, const std::string& path, std::vector<T>* out) {
    if (!v.is_array()) return fail(path, "expected an array");
    out->clear();
    for (size_t i = 0; i < v.size() && !err_; ++i) {
      T item{};
      read(v[i], path + "[" + std::to_string(i) + "]", &item);
      out->push_back(std::move(item));
    }
  }
  void read(const json& v, const std::string& path, std::map<std::string, std::string>* out) {
    if (!v.is_object()) return fail(path, "expected an object of strings");
    out->clear();
    for (auto it = v.begin(); it != v.end() && !err_; ++it) {
      if (!it.value().is_string()) return fail(path + "." + it.key(), "expected a string");
      (*out)[it.key()] = it.value().get<std::string>();
    }
  }

  std::string msg_;
  json j_;
  std::optional<Error> err_;
};

template <class T>
Result<T> finish(const Reader& r, T value) {
  if (!r.ok()) return r.error();
  return value;
}

json file_info_json(const FileInfo& f) {
  json j = {{"type", f.type}, {"size", f.size}, {"mode", f.mode}, {"mtime", f.mtime}};
  if (!f.name.empty()) j["name"] = f.name;
  return j;
}

// Never throws: bytes that are not UTF-8 (a file name made inside the sandbox)
// become U+FFFD instead of an exception that would end the runner.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

Result<Version> parse_version(const std::string& text) {
  Version v;
  char extra = 0;
  if (std::sscanf(text.c_str(), "%d.%d.%d%c", &v.major, &v.minor, &v.patch, &extra) != 3 ||
      v.major < 0 || v.minor < 0 || v.patch < 0) {
    return make_error("version \"" + text + "\"", "not a semantic version MAJOR.MINOR.PATCH");
  }
  return v;
}

std::string compatible_range() {
  return ">=" + std::to_string(kProtocolMajor) + "." + std::to_string(kMinMinor) + ",<" +
         std::to_string(kProtocolMajor) + "." + std::to_string(kMaxMinor + 1);
}

bool valid_env_name(std::string_view k) {
  if (k.empty() || (k[0] >= '0' && k[0] <= '9')) return false;
  for (char c : k) {
    if (!(c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) {
      return false;
    }
  }
  return true;
}

std::string join_env_names(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) {
    if (!out.empty()) out += ',';
    out += n;
  }
  return out;
}

Result<std::vector<std::string>> parse_env_names(std::string_view text) {
  std::vector<std::string> names;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view name = text.substr(0, comma);
    if (!valid_env_name(name)) {
      return make_error("--self-probe-at-start",
                        "bad variable name \"" + std::string(name) + "\" (NAME,NAME,...)");
    }
    names.emplace_back(name);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
    if (text.empty()) return make_error("--self-probe-at-start", "ends in ','");
  }
  return names;
}

Status check_compatible(const std::string& peer) {
  auto v = parse_version(peer);
  if (!v) return v.take_error();
  if (v->major != kProtocolMajor || v->minor < kMinMinor || v->minor > kMaxMinor) {
    return make_error(ErrorCode::kIncompatible, "protocol",
                      "peer speaks " + peer + ", this build accepts " + compatible_range() + " (" +
                          std::string(kProtocolVersion) + ")");
  }
  return ok_status();
}

std::string to_json(const Hello& m) {
  return dump(
      json{{"protocol", m.protocol}, {"role", m.role}, {"runner_version", m.runner_version}});
}
std::string to_json(const ExecRequest& m) {
  json j{{"argv", m.argv},
         {"env", m.env},
         {"cwd", m.cwd},
         {"timeout_ms", m.timeout_ms},
         {"output_limit", m.output_limit},
         {"pty", m.pty},
         {"rows", m.rows},
         {"cols", m.cols}};
  if (!m.started) j["started"] = false;  // absent: the default, as runners before it read it
  return dump(j);
}
std::string to_json(const Started& m) { return dump(json{{"pid", m.pid}}); }
std::string to_json(const ExitStatus& m) {
  return dump(json{{"exit_code", m.exit_code},
                   {"signal", m.signal},
                   {"timed_out", m.timed_out},
                   {"output_truncated", m.output_truncated},
                   {"limit", m.limit},
                   {"exec_errno", m.exec_errno},
                   {"error", m.error},
                   {"wall_us", m.wall_us},
                   {"user_us", m.user_us},
                   {"sys_us", m.sys_us},
                   {"max_rss_kb", m.max_rss_kb}});
}
std::string to_json(const FileRequest& m) {
  json j{{"path", m.path}, {"mode", m.mode}, {"parents", m.parents}, {"max_bytes", m.max_bytes}};
  // Only when set: the fields of protocol 0.4's file operations.
  if (!m.to.empty()) j["to"] = m.to;
  if (m.recursive) j["recursive"] = true;
  return dump(j);
}
std::string to_json(const FileInfo& m) { return dump(file_info_json(m)); }
std::string to_json(const std::vector<FileInfo>& entries) {
  json arr = json::array();
  for (const auto& e : entries) arr.push_back(file_info_json(e));
  return dump(json{{"entries", arr}});
}
std::string to_json(const std::vector<FileEvent>& events) {
  json arr = json::array();
  for (const auto& e : events) arr.push_back({{"type", e.type}, {"path", e.path}, {"dir", e.dir}});
  return dump(json{{"events", arr}});
}
std::string to_json(const SetEnv& m) { return dump(json{{"set", m.set}, {"unset", m.unset}}); }
std::string to_json(const Signal& m) { return dump(json{{"signal", m.signal}}); }
std::string to_json(const Resize& m) { return dump(json{{"rows", m.rows}, {"cols", m.cols}}); }
std::string to_json(const ErrorMsg& m) {
  return dump(json{{"where", m.where}, {"message", m.message}, {"errno", m.sys_errno}});
}
std::string to_json(const CredRequest& m) {
  return dump(json{{"request", m.request},
                   {"name", m.name},
                   {"scope", m.scope},
                   {"reason", m.reason},
                   {"pid", m.pid}});
}
std::string to_json(const CredAnswer& m) {
  return dump(json{{"request", m.request}, {"granted", m.granted}, {"message", m.message}});
}
std::string to_json(const CredWithdrawn& m) { return dump(json{{"request", m.request}}); }
std::string to_json(const ProbeResult& m) {
  return dump(json{{"pid", m.pid},
                   {"uid", m.uid},
                   {"gid", m.gid},
                   {"hostname", m.hostname},
                   {"no_new_privs", m.no_new_privs},
                   {"seccomp_mode", m.seccomp_mode},
                   {"cap_eff", m.cap_eff},
                   {"cap_prm", m.cap_prm},
                   {"cap_bnd", m.cap_bnd},
                   {"cap_amb", m.cap_amb},
                   {"open_fds", m.open_fds}});
}

Result<Hello> parse_hello(const std::string& s) {
  Reader r(s, "hello");
  Hello m;
  r.get("protocol", &m.protocol, true);
  r.get("role", &m.role, true);
  r.get("runner_version", &m.runner_version);
  return finish(r, m);
}

Result<ExecRequest> parse_exec(const std::string& s) {
  Reader r(s, "exec");
  ExecRequest m;
  r.get("argv", &m.argv, true);
  r.get("env", &m.env);
  r.get("cwd", &m.cwd);
  r.get("timeout_ms", &m.timeout_ms);
  r.get("output_limit", &m.output_limit);
  r.get("pty", &m.pty);
  r.get("rows", &m.rows);
  r.get("cols", &m.cols);
  r.get("started", &m.started);
  if (!r.ok()) return r.error();
  if (m.argv.empty()) return make_error("exec.argv", "must name a command");
  for (size_t i = 0; i < m.argv.size(); ++i) {
    if (m.argv[i].find('\0') != std::string::npos) {
      return make_error("exec.argv[" + std::to_string(i) + "]", "contains a NUL byte");
    }
  }
  for (const auto& [k, v] : m.env) {
    if (k.empty() || k.find('=') != std::string::npos || k.find('\0') != std::string::npos) {
      return make_error("exec.env", "bad variable name \"" + k + "\"");
    }
    if (v.find('\0') != std::string::npos)
      return make_error("exec.env." + k, "contains a NUL byte");
  }
  if (m.timeout_ms < 0) return make_error("exec.timeout_ms", "must not be negative");
  if (m.output_limit < 0) return make_error("exec.output_limit", "must not be negative");
  if (m.rows <= 0 || m.rows > 10000 || m.cols <= 0 || m.cols > 10000) {
    return make_error("exec.rows", "terminal size out of range");
  }
  return m;
}

Result<Started> parse_started(const std::string& s) {
  Reader r(s, "started");
  Started m;
  r.get("pid", &m.pid, true);
  return finish(r, m);
}

Result<ExitStatus> parse_exit(const std::string& s) {
  Reader r(s, "exit");
  ExitStatus m;
  r.get("exit_code", &m.exit_code, true);
  r.get("signal", &m.signal);
  r.get("timed_out", &m.timed_out);
  r.get("output_truncated", &m.output_truncated);
  r.get("limit", &m.limit);
  r.get("exec_errno", &m.exec_errno);
  r.get("error", &m.error);
  r.get("wall_us", &m.wall_us);
  r.get("user_us", &m.user_us);
  r.get("sys_us", &m.sys_us);
  r.get("max_rss_kb", &m.max_rss_kb);
  return finish(r, m);
}

Result<FileRequest> parse_file_request(const std::string& s) {
  Reader r(s, "file");
  FileRequest m;
  r.get("path", &m.path, true);
  r.get("mode", &m.mode);
  r.get("parents", &m.parents);
  r.get("max_bytes", &m.max_bytes);
  r.get("to", &m.to);
  r.get("recursive", &m.recursive);
  if (!r.ok()) return r.error();
  if (m.path.empty() || m.path.find('\0') != std::string::npos) {
    return make_error("file.path", "must be a non-empty path without NUL bytes");
  }
  if (m.to.find('\0') != std::string::npos) {
    return make_error("file.to", "must be a path without NUL bytes");
  }
  if (m.mode > 07777) return make_error("file.mode", "must be at most 07777");
  return m;
}

Result<FileInfo> parse_file_info(const std::string& s) {
  Reader r(s, "file_info");
  FileInfo m;
  r.get("name", &m.name);
  r.get("type", &m.type, true);
  r.get("size", &m.size);
  r.get("mode", &m.mode);
  r.get("mtime", &m.mtime);
  return finish(r, m);
}

Result<std::vector<FileInfo>> parse_file_entries(const std::string& s) {
  const json j = rf::parse_json_or_discarded(s);
  if (j.is_discarded() || !j.is_object() || !j.contains("entries") || !j["entries"].is_array()) {
    return make_error("file_entries.entries", "expected an array");
  }
  std::vector<FileInfo> out;
  for (size_t i = 0; i < j["entries"].size(); ++i) {
    auto e = parse_file_info(j["entries"][i].dump());
    if (!e) {
      return make_error("file_entries.entries[" + std::to_string(i) + "]", e.error().to_string());
    }
    out.push_back(std::move(*e));
  }
  return out;
}

Result<std::vector<FileEvent>> parse_watch_events(const std::string& s) {
  const json j = rf::parse_json_or_discarded(s);
  if (j.is_discarded() || !j.is_object() || !j.contains("events") || !j["events"].is_array()) {
    return make_error("watch_events.events", "expected an array");
  }
  std::vector<FileEvent> out;
  for (size_t i = 0; i < j["events"].size(); ++i) {
    const json& e = j["events"][i];
    if (!e.is_object() || !e.contains("type") || !e["type"].is_string() || !e.contains("path") ||
        !e["path"].is_string()) {
      return make_error("watch_events.events[" + std::to_string(i) + "]",
                        "expected {type, path, dir}");
    }
    out.push_back({e["type"], e["path"], e.value("dir", false)});
  }
  return out;
}

Result<SetEnv> parse_set_env(const std::string& s) {
  Reader r(s, "set_env");
  SetEnv m;
  r.get("set", &m.set);
  r.get("unset", &m.unset);
  if (!r.ok()) return r.error();
  for (const auto& [k, v] : m.set) {
    if (k.empty() || k.find('=') != std::string::npos || k.find('\0') != std::string::npos ||
        v.find('\0') != std::string::npos) {
      return make_error("set_env.set", "bad variable \"" + k + "\"");
    }
  }
  return m;
}

Result<Signal> parse_signal(const std::string& s) {
  Reader r(s, "signal");
  Signal m;
  r.get("signal", &m.signal, true);
  if (r.ok() && (m.signal <= 0 || m.signal >= 65))
    return make_error("signal.signal", "out of range");
  return finish(r, m);
}

Result<Resize> parse_resize(const std::string& s) {
  Reader r(s, "resize");
  Resize m;
  r.get("rows", &m.rows, true);
  r.get("cols", &m.cols, true);
  if (r.ok() && (m.rows <= 0 || m.rows > 10000 || m.cols <= 0 || m.cols > 10000)) {
    return make_error("resize", "terminal size out of range");
  }
  return finish(r, m);
}

Result<ErrorMsg> parse_error(const std::string& s) {
  Reader r(s, "error");
  ErrorMsg m;
  r.get("where", &m.where);
  r.get("message", &m.message);
  r.get("errno", &m.sys_errno);
  return finish(r, m);
}

Result<ProbeResult> parse_probe_result(const std::string& s) {
  Reader r(s, "probe_result");
  ProbeResult m;
  r.get("pid", &m.pid);
  r.get("uid", &m.uid);
  r.get("gid", &m.gid);
  r.get("hostname", &m.hostname);
  r.get("no_new_privs", &m.no_new_privs);
  r.get("seccomp_mode", &m.seccomp_mode);
  r.get("cap_eff", &m.cap_eff);
  r.get("cap_prm", &m.cap_prm);
  r.get("cap_bnd", &m.cap_bnd);
  r.get("cap_amb", &m.cap_amb);
  r.get("open_fds", &m.open_fds);
  return finish(r, m);
}

Result<CredRequest> parse_cred_request(const std::string& s) {
  Reader r(s, "cred_request");
  CredRequest m;
  r.get("request", &m.request, true);
  r.get("name", &m.name, true);
  r.get("scope", &m.scope);
  r.get("reason", &m.reason);
  r.get("pid", &m.pid);
  if (!r.ok()) return r.error();
  if (m.request == 0) return make_error("cred_request.request", "0 is never a request");
  if (m.name.empty()) return make_error("cred_request.name", "empty");
  if (m.name.size() > kMaxCredName) return make_error("cred_request.name", "longer than 256 bytes");
  if (m.scope.size() > kMaxCredName)
    return make_error("cred_request.scope", "longer than 256 bytes");
  if (m.reason.size() > kMaxCredReason)
    return make_error("cred_request.reason", "longer than 4096 bytes");
  if (m.pid < 0) return make_error("cred_request.pid", "out of range");
  return m;
}

Result<CredAnswer> parse_cred_answer(const std::string& s) {
  Reader r(s, "cred_answer");
  CredAnswer m;
  r.get("request", &m.request, true);
  r.get("granted", &m.granted, true);
  r.get("message", &m.message);
  if (!r.ok()) return r.error();
  if (m.request == 0) return make_error("cred_answer.request", "0 is never a request");
  return m;
}

Result<CredWithdrawn> parse_cred_withdrawn(const std::string& s) {
  Reader r(s, "cred_withdrawn");
  CredWithdrawn m;
  r.get("request", &m.request, true);
  if (!r.ok()) return r.error();
  if (m.request == 0) return make_error("cred_withdrawn.request", "0 is never a request");
  return m;
}

}  // namespace rf::proto
