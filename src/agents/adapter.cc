#include "agents/adapter.h"

#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "core/io.h"
#include "core/json_input.h"
#include "core/units.h"
#include "core/yaml_duplicates.h"

namespace rf::agents {
namespace {

using nlohmann::json;

int line_of(const YAML::Node& n) { return n.Mark().is_null() ? 0 : n.Mark().line + 1; }

Error at(const std::string& file, const YAML::Node& n, const std::string& key,
         const std::string& what) {
  return make_error(file + ":" + std::to_string(line_of(n)) + ": " + key, what);
}

const std::vector<std::string> kKeys = {"name",        "description",  "argv",    "env",
                                        "keys",        "endpoint",     "files",   "result",
                                        "unreachable", "memory_floor", "workdir", "stdin_closed"};

Result<std::string> scalar(const std::string& file, const YAML::Node& n, const std::string& key) {
  if (!n.IsScalar()) return at(file, n, key, "expected text");
  return n.Scalar();
}

Result<std::vector<std::string>> list(const std::string& file, const YAML::Node& n,
                                      const std::string& key) {
  if (!n.IsSequence()) return at(file, n, key, "expected a list");
  std::vector<std::string> out;
  for (size_t i = 0; i < n.size(); ++i) {
    auto s = scalar(file, n[i], key + "[" + std::to_string(i) + "]");
    if (!s) return s.take_error();
    out.push_back(std::move(*s));
  }
  return out;
}

// Fills {{prompt}}, {{home}}, ... and {{env.NAME}}. `used` (when given)
// gets the name of each placeholder whose value went in: "endpoint",
// "env.NAME" (not when its fallback did).
Result<std::string> fill(const std::string& text, const std::map<std::string, std::string>& vars,
                         const std::map<std::string, std::string>& env,
                         std::set<std::string>* used = nullptr) {
  std::string out;
  size_t pos = 0;
  for (;;) {
    const size_t open = text.find("{{", pos);
    if (open == std::string::npos) {
      out.append(text, pos);
      return out;
    }
    const size_t end = text.find("}}", open);
    if (end == std::string::npos) return make_error("", "\"{{\" is never closed");
    out.append(text, pos, open - pos);
    std::string name = text.substr(open + 2, end - open - 2);
    name.erase(0, name.find_first_not_of(' '));
    name.erase(name.find_last_not_of(' ') + 1);
    if (name.rfind("env.", 0) == 0) {
      // {{env.NAME|fallback}}: the fallback when NAME is unset or empty.
      std::string var = name.substr(4), fallback;
      if (const size_t bar = var.find('|'); bar != std::string::npos) {
        fallback = var.substr(bar + 1);
        var.resize(bar);
      }
      auto it = env.find(var);
      const bool set = it != env.end() && !it->second.empty();
      out += set ? it->second : fallback;
      if (set && used != nullptr) used->insert("env." + var);
    } else {
      auto it = vars.find(name);
      if (it == vars.end()) {
        return make_error("", "unknown placeholder {{" + name +
                                  "}} (prompt, home, tmp, workdir, endpoint, env.NAME)");
      }
      out += it->second;
      if (used != nullptr) used->insert(name);
    }
    pos = end + 2;
  }
}

// The placeholders a text may hold, checked when the adapter is read: the
// text fills without an error.
Status check_placeholders(const std::string& file, const YAML::Node& n, const std::string& key,
                          const std::string& text) {
  static const std::map<std::string, std::string> known = {
      {"prompt", ""}, {"home", ""}, {"tmp", ""}, {"workdir", ""}, {"endpoint", ""}};
  auto filled = fill(text, known, {});
  if (!filled) return at(file, n, key, filled.error().message);
  return ok_status();
}

std::string join_path(const std::string& dir, const std::string& rel) {
  if (!rel.empty() && rel[0] == '/') return rel;
  return dir + "/" + rel;
}

}  // namespace

Result<AgentAdapter> parse_adapter(const std::string& text, const std::string& file) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return make_error(file + ":" + std::to_string(e.mark.line + 1), "not valid YAML: " + e.msg);
  }
  if (auto dup = find_duplicate_key(root)) return make_error(dup->where(file), dup->message());
  if (!root.IsMap()) return make_error(file, "expected an agent adapter (a mapping)");
  for (const auto& kv : root) {
    const std::string k = kv.first.Scalar();
    if (std::find(kKeys.begin(), kKeys.end(), k) == kKeys.end()) {
      return at(file, kv.first, k,
                "unknown key (expected name, description, argv, env, keys, "
                "endpoint, files, result, unreachable, memory_floor, workdir, "
                "stdin_closed)");
    }
  }
  AgentAdapter a;
  a.file = file;
  for (const char* required : {"name", "argv", "result"}) {
    if (!root[required]) return make_error(file + ": " + required, "missing");
  }
  auto name = scalar(file, root["name"], "name");
  if (!name) return name.take_error();
  a.name = *name;
  if (root["description"]) {
    auto d = scalar(file, root["description"], "description");
    if (!d) return d.take_error();
    a.description = *d;
  }
  auto argv = list(file, root["argv"], "argv");
  if (!argv) return argv.take_error();
  if (argv->empty()) return at(file, root["argv"], "argv", "must not be empty");
  for (const auto& arg : *argv) RF_TRY(check_placeholders(file, root["argv"], "argv", arg));
  a.argv = std::move(*argv);
  if (root["env"]) {
    if (!root["env"].IsMap()) return at(file, root["env"], "env", "expected a mapping");
    for (const auto& kv : root["env"]) {
      auto v = scalar(file, kv.second, "env." + kv.first.Scalar());
      if (!v) return v.take_error();
      RF_TRY(check_placeholders(file, kv.second, "env." + kv.first.Scalar(), *v));
      a.env[kv.first.Scalar()] = *v;
    }
  }
  if (root["keys"]) {
    auto keys = list(file, root["keys"], "keys");
    if (!keys) return keys.take_error();
    a.keys = std::move(*keys);
  }
  if (root["endpoint"]) {
    const YAML::Node& e = root["endpoint"];
    if (!e.IsMap() || !e["env"]) {
      return at(file, e, "endpoint", "expected {env: VARIABLE, default: URL}");
    }
    auto env = scalar(file, e["env"], "endpoint.env");
    if (!env) return env.take_error();
    a.endpoint_env = *env;
    if (e["default"]) {
      auto d = scalar(file, e["default"], "endpoint.default");
      if (!d) return d.take_error();
      a.endpoint_default = *d;
    }
  }
  if (root["files"]) {
    if (!root["files"].IsSequence()) return at(file, root["files"], "files", "expected a list");
    for (size_t i = 0; i < root["files"].size(); ++i) {
      const YAML::Node& f = root["files"][i];
      const std::string key = "files[" + std::to_string(i) + "]";
      if (!f.IsMap() || !f["path"] || !f["content"]) {
        return at(file, f, key, "expected {path: RELATIVE_TO_HOME, content: TEXT}");
      }
      AdapterFile af;
      auto p = scalar(file, f["path"], key + ".path");
      if (!p) return p.take_error();
      if (p->empty() || p->find("..") != std::string::npos) {
        return at(file, f["path"], key + ".path", "a path under HOME, without '..'");
      }
      af.path = *p;
      auto c = scalar(file, f["content"], key + ".content");
      if (!c) return c.take_error();
      RF_TRY(check_placeholders(file, f["content"], key + ".content", *c));
      af.content = *c;
      a.files.push_back(std::move(af));
    }
  }
  const YAML::Node& r = root["result"];
  if (!r.IsMap()) return at(file, r, "result", "expected {from, format, answer, ...}");
  for (const auto& kv : r) {
    static const std::set<std::string> rk = {
        "from", "file", "format", "answer", "error", "event_type_pointer", "event_type"};
    if (!rk.count(kv.first.Scalar())) {
      return at(file, kv.first, "result." + kv.first.Scalar(),
                "unknown key (from, file, format, answer, error, event_type_pointer, event_type)");
    }
  }
  auto opt = [&](const char* k, std::string* out) -> Status {
    if (!r[k]) return ok_status();
    auto v = scalar(file, r[k], std::string("result.") + k);
    if (!v) return v.take_error();
    *out = *v;
    return ok_status();
  };
  RF_TRY(opt("from", &a.result_from));
  RF_TRY(opt("file", &a.result_file));
  RF_TRY(opt("format", &a.result_format));
  RF_TRY(opt("answer", &a.answer_pointer));
  RF_TRY(opt("error", &a.error_pointer));
  RF_TRY(opt("event_type_pointer", &a.jsonl_type_pointer));
  RF_TRY(opt("event_type", &a.jsonl_type_value));
  if (a.result_from != "stdout" && a.result_from != "file") {
    return at(file, r["from"], "result.from", "expected stdout or file");
  }
  if (a.result_from == "file" && a.result_file.empty()) {
    return at(file, r, "result.file", "missing: the file the agent writes its answer to");
  }
  if (a.result_format != "json" && a.result_format != "jsonl" && a.result_format != "text") {
    return at(file, r["format"], "result.format", "expected json, jsonl or text");
  }
  for (const std::string* p : {&a.answer_pointer, &a.error_pointer, &a.jsonl_type_pointer}) {
    if (!p->empty() && (*p)[0] != '/') {
      return at(file, r, "result", "\"" + *p + "\" is not a JSON Pointer (it starts with '/')");
    }
  }
  if (root["unreachable"]) {
    auto u = list(file, root["unreachable"], "unreachable");
    if (!u) return u.take_error();
    a.unreachable = std::move(*u);
  }
  if (root["memory_floor"]) {
    auto m = scalar(file, root["memory_floor"], "memory_floor");
    if (!m) return m.take_error();
    auto bytes = parse_size(*m);
    if (!bytes) return at(file, root["memory_floor"], "memory_floor", bytes.error().message);
    if (*bytes < (1ull << 30)) {
      return at(
          file, root["memory_floor"], "memory_floor",
          "at least 1g: agents peak at hundreds of MB (Claude Code ~310 MB, opencode ~660 MB)");
    }
    a.memory_floor = *bytes;
  }
  if (root["workdir"]) {
    auto w = scalar(file, root["workdir"], "workdir");
    if (!w) return w.take_error();
    a.workdir = *w;
  }
  if (root["stdin_closed"]) {
    auto s = scalar(file, root["stdin_closed"], "stdin_closed");
    if (!s) return s.take_error();
    a.stdin_closed = *s != "false";
  }
  return a;
}

std::string default_agents_dir() {
  if (const char* d = std::getenv("RINGFENCE_AGENTS_DIR"); d != nullptr && *d != '\0') return d;
#ifdef RF_SOURCE_DIR
  if (std::filesystem::exists(std::string(RF_SOURCE_DIR) + "/agents/claude-code.yaml")) {
    return std::string(RF_SOURCE_DIR) + "/agents";
  }
#endif
  return "/usr/share/ringfence/agents";
}

Result<AgentAdapter> load_adapter(const std::string& name, const std::string& agents_dir) {
  const bool is_path = name.find('/') != std::string::npos ||
                       (name.size() > 5 && name.substr(name.size() - 5) == ".yaml") ||
                       (name.size() > 4 && name.substr(name.size() - 4) == ".yml");
  std::string path;
  if (is_path) {
    path = name;
  } else {
    for (char c : name) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') {
        return make_error("agent \"" + name + "\"",
                          "not an agent name or a path to an adapter file");
      }
    }
    path = agents_dir + "/" + name + ".yaml";
    if (!std::filesystem::exists(path)) {
      std::string known;
      std::error_code ec;
      for (const auto& e : std::filesystem::directory_iterator(agents_dir, ec)) {
        if (e.path().extension() == ".yaml") {
          known += (known.empty() ? "" : ", ") + e.path().stem().string();
        }
      }
      return make_error("agent \"" + name + "\"", "no adapter " + path +
                                                      (known.empty() ? ""
                                                                     : " (agents: " + known +
                                                                           "; or give a path to an "
                                                                           "adapter file)"));
    }
  }
  auto text = read_file(path);
  if (!text) return make_error("agent adapter " + path, text.error().to_string());
  return parse_adapter(*text, path);
}

Result<AgentPlan> plan_agent(const AgentAdapter& a, const PlanInput& in) {
  // The agent's environment: identity's, then the step's over it. The keys
  // whose value is identity's are never recorded and never reach argv.
  std::map<std::string, std::string> env = in.identity;
  for (const auto& [k, v] : in.env) env[k] = v;
  std::set<std::string> from_identity;
  for (const auto& [k, v] : in.identity) {
    if (!in.env.count(k)) from_identity.insert(k);
  }
  for (const auto& k : a.keys) {
    if (!env.count(k) || env.at(k).empty()) {
      return make_error("agent " + a.name,
                        "needs " + k + " from identity (add it to an identity profile, e.g. " + k +
                            "=secret:NAME)");
    }
  }
  AgentPlan p;
  p.home = in.home;
  p.tmp = in.tmp;
  p.endpoint = a.endpoint_default;
  std::string endpoint_key;  // the identity key the endpoint comes from, if it does
  if (!a.endpoint_env.empty()) {
    auto it = env.find(a.endpoint_env);
    if (it != env.end() && !it->second.empty()) {
      p.endpoint = it->second;
      if (from_identity.count(a.endpoint_env)) endpoint_key = a.endpoint_env;
    }
  }
  const std::map<std::string, std::string> vars = {{"prompt", in.prompt},
                                                   {"home", in.home},
                                                   {"tmp", in.tmp},
                                                   {"workdir", a.workdir},
                                                   {"endpoint", p.endpoint}};
  auto where = [&](const std::string& what, Error e) {
    return make_error("agent " + a.name + " (" + a.file + ") " + what, e.message);
  };
  // The identity keys a filled text holds.
  auto identity_in = [&](const std::set<std::string>& used) {
    std::set<std::string> keys;
    for (const auto& u : used) {
      if (u == "endpoint" && !endpoint_key.empty()) keys.insert(endpoint_key);
      if (u.rfind("env.", 0) == 0 && from_identity.count(u.substr(4))) keys.insert(u.substr(4));
    }
    return keys;
  };
  // argv never carries values from the environment: a secret must not reach
  // argv (every process in the sandbox reads /proc/PID/cmdline; the call
  // records it). Nor does an endpoint that comes from identity.
  static const std::map<std::string, std::string> no_env;
  auto fill_plain = [&](const std::string& what, const std::string& text) -> Result<std::string> {
    std::set<std::string> used;
    auto v = fill(text, vars, no_env, &used);
    if (!v) return where(what, v.take_error());
    if (!identity_in(used).empty()) {
      return where(what, make_error("", "{{endpoint}} is the value of " + endpoint_key +
                                            ", which comes from identity; a value from identity "
                                            "never goes in argv or result.file: pass it in env: "
                                            "instead (e.g. env: {" +
                                            endpoint_key + ": \"{{endpoint}}\"})"));
    }
    return v;
  };
  for (const auto& arg : a.argv) {
    auto v = fill_plain("argv", arg);
    if (!v) return v.take_error();
    p.argv.push_back(std::move(*v));
  }
  for (const auto& [k, v] : a.env) {
    std::set<std::string> used;
    auto filled = fill(v, vars, env, &used);
    if (!filled) return where("env." + k, filled.take_error());
    p.env[k] = std::move(*filled);
    if (auto keys = identity_in(used); !keys.empty()) p.env_from_identity[k] = std::move(keys);
  }
  for (const auto& f : a.files) {
    AdapterFile out = f;
    out.path = join_path(in.home, f.path);
    auto c = fill(f.content, vars, env);
    if (!c) return where("files " + f.path, c.take_error());
    out.content = std::move(*c);
    p.files.push_back(std::move(out));
  }
  if (a.result_from == "file") {
    auto f = fill_plain("result.file", a.result_file);
    if (!f) return f.take_error();
    p.result_file = std::move(*f);
  }
  return p;
}

std::map<std::string, std::string> env_to_record(const AgentPlan& plan) {
  std::map<std::string, std::string> out = plan.env;
  for (const auto& [k, keys] : plan.env_from_identity) {
    std::string names;
    for (const auto& key : keys) names += (names.empty() ? "" : ",") + key;
    out[k] = "[REDACTED:" + names + "]";
  }
  return out;
}

Result<AgentAnswer> read_answer(const AgentAdapter& a, const std::string& text) {
  AgentAnswer out;
  if (a.result_format == "text") {
    out.answer = text;
    while (!out.answer.empty() && (out.answer.back() == '\n' || out.answer.back() == '\r')) {
      out.answer.pop_back();
    }
    return out;
  }
  auto at_pointer = [](const json& doc, const std::string& p) -> const json* {
    if (p.empty()) return &doc;
    try {
      const json::json_pointer ptr(p);
      return doc.contains(ptr) ? &doc.at(ptr) : nullptr;
    } catch (const json::exception&) {
      return nullptr;
    }
  };
  if (a.result_format == "json") {
    // The JSON document is the last line that parses (agents print notices first).
    json doc = rf::parse_json_or_discarded(text);
    if (doc.is_discarded()) {
      size_t end = text.size();
      while (end > 0) {
        size_t start = text.rfind('\n', end - 1);
        start = start == std::string::npos ? 0 : start + 1;
        json line = rf::parse_json_or_discarded(text.substr(start, end - start));
        if (!line.is_discarded() && line.is_object()) {
          doc = std::move(line);
          break;
        }
        if (start == 0) break;
        end = start - 1;
      }
    }
    if (doc.is_discarded()) {
      return make_error("agent " + a.name, "its output holds no JSON result");
    }
    if (const json* v = at_pointer(doc, a.answer_pointer)) {
      out.answer = v->is_string() ? v->get<std::string>() : v->dump();
    }
    if (const json* e = at_pointer(doc, a.error_pointer);
        e != nullptr && !a.error_pointer.empty()) {
      out.is_error = e->is_boolean() && e->get<bool>();
    }
    out.json = std::move(doc);
    return out;
  }
  // jsonl: the last event of the given type carries the answer.
  size_t pos = 0;
  bool found = false;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    json ev = rf::parse_json_or_discarded(text.substr(pos, nl - pos));
    pos = nl + 1;
    if (ev.is_discarded() || !ev.is_object()) continue;
    const json* type = at_pointer(ev, a.jsonl_type_pointer);
    if (type != nullptr && type->is_string() && type->get<std::string>() == a.jsonl_type_value) {
      if (const json* v = at_pointer(ev, a.answer_pointer)) {
        out.answer = v->is_string() ? v->get<std::string>() : v->dump();
        out.json = ev;
        found = true;
      }
    }
  }
  if (!found) return make_error("agent " + a.name, "its output holds no answer event");
  return out;
}

bool model_unreachable(const AgentAdapter& a, const std::string& output) {
  for (const auto& u : a.unreachable) {
    if (!u.empty() && output.find(u) != std::string::npos) return true;
  }
  return false;
}

}  // namespace rf::agents
