#include "workflow/parse.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <utility>
#include <vector>

#include "core/io.h"
#include "core/json_input.h"
#include "core/nearest.h"
#include "core/units.h"
#include "core/yaml_documents.h"
#include "core/yaml_duplicates.h"

namespace rf::workflow {
namespace {

using nlohmann::json;

int line_of(const YAML::Node& n) { return n.Mark().is_null() ? 0 : n.Mark().line + 1; }

std::string describe(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Scalar: {
      std::string s = n.Scalar();
      if (s.size() > 40) s = s.substr(0, 40) + "...";
      return "\"" + s + "\"";
    }
    case YAML::NodeType::Null:
      return "nothing";
    default:
      return "nothing";
  }
}

// The closest of `known` to `word`, when it is close (a typo).
std::string did_you_mean(const std::string& word, const std::vector<std::string>& known) {
  const std::string best = nearest_name(word, known, /*a_start_counts=*/false);
  return best.empty() ? "" : " (did you mean \"" + best + "\"?)";
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// YAML → JSON for values the workflow passes on as data (defaults, json
// patches and schemas, http bodies): scalars that read as numbers, booleans or
// null become those (a plain scalar only; "quoted" text stays text).
json to_json(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      json o = json::object();
      for (const auto& kv : n) o[kv.first.Scalar()] = to_json(kv.second);
      return o;
    }
    case YAML::NodeType::Sequence: {
      json a = json::array();
      for (const auto& v : n) a.push_back(to_json(v));
      return a;
    }
    case YAML::NodeType::Scalar: {
      const std::string& s = n.Scalar();
      if (n.Tag() == "!") return s;  // quoted
      if (s == "true" || s == "True" || s == "TRUE") return true;
      if (s == "false" || s == "False" || s == "FALSE") return false;
      if (s == "null" || s == "~" || s == "Null" || s == "NULL") return nullptr;
      json num = parse_json_or_discarded(s);
      if (!num.is_discarded() && num.is_number()) return num;
      return s;
    }
    default:
      return nullptr;
  }
}

class Reader {
 public:
  Reader(std::string file, std::vector<std::string>* problems)
      : file_(std::move(file)), problems_(problems) {}

  void problem(const YAML::Node& n, const std::string& key, const std::string& what) {
    problems_->push_back(Where{file_, line_of(n), key}.to_string() + ": " + what);
  }
  Where where(const YAML::Node& n, const std::string& key) const {
    return Where{file_, line_of(n), key};
  }

  // Each key of `map` must be one of `known`. An unknown key is a problem,
  // and the known ones are still for the caller to check (every problem at
  // once): false only when `map` is not a mapping at all.
  bool keys(const YAML::Node& map, const std::string& key, const std::vector<std::string>& known) {
    if (!map.IsMap()) {
      problem(map, key, "expected a mapping, got " + describe(map));
      return false;
    }
    for (const auto& kv : map) {
      const std::string k = kv.first.IsScalar() ? kv.first.Scalar() : "?";
      if (std::find(known.begin(), known.end(), k) == known.end()) {
        problem(
            kv.first, join(key, k),
            "unknown key" + did_you_mean(k, known) + " (expected one of: " + joined(known) + ")");
      }
    }
    return true;
  }

  static std::string join(const std::string& key, const std::string& sub) {
    return key.empty() ? sub : key + "." + sub;
  }

  bool text(const YAML::Node& n, const std::string& key, std::string* out, bool nonempty = true) {
    if (!n.IsScalar()) {
      problem(n, key, "expected text, got " + describe(n));
      return false;
    }
    if (nonempty && n.Scalar().empty()) {
      problem(n, key, "must not be empty");
      return false;
    }
    *out = n.Scalar();
    return true;
  }

  bool name(const YAML::Node& n, const std::string& key, std::string* out) {
    if (!text(n, key, out)) return false;
    const bool ok = out->size() <= 64 && std::all_of(out->begin(), out->end(), [](char c) {
                      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                             (c >= '0' && c <= '9') || c == '_' || c == '-';
                    });
    if (!ok) {
      problem(n, key, "\"" + *out + "\" is not a name (letters, digits, '_' and '-', at most 64)");
      return false;
    }
    return true;
  }

  bool boolean(const YAML::Node& n, const std::string& key, bool* out) {
    if (n.IsScalar()) {
      const std::string& s = n.Scalar();
      if (s == "true" || s == "yes") return *out = true, true;
      if (s == "false" || s == "no") return *out = false, true;
    }
    problem(n, key, "expected true or false, got " + describe(n));
    return false;
  }

  bool integer(const YAML::Node& n, const std::string& key, int lo, int hi, int* out) {
    if (n.IsScalar()) {
      const std::string& s = n.Scalar();
      char* end = nullptr;
      const long v = std::strtol(s.c_str(), &end, 10);
      if (!s.empty() && end != nullptr && *end == '\0' && v >= lo && v <= hi) {
        *out = static_cast<int>(v);
        return true;
      }
    }
    problem(n, key,
            "expected a whole number from " + std::to_string(lo) + " to " + std::to_string(hi) +
                ", got " + describe(n));
    return false;
  }

  bool duration(const YAML::Node& n, const std::string& key, std::chrono::milliseconds* out) {
    if (!n.IsScalar()) {
      problem(n, key, "expected a duration such as 30s, got " + describe(n));
      return false;
    }
    auto d = parse_duration(n.Scalar());
    if (!d || d->count() <= 0) {
      problem(n, key, "expected a duration such as 30s, 5m or 250ms, got " + describe(n));
      return false;
    }
    *out = *d;
    return true;
  }

  bool size(const YAML::Node& n, const std::string& key, std::optional<uint64_t>* out) {
    if (!n.IsScalar()) {
      problem(n, key, "expected a size such as 512m, got " + describe(n));
      return false;
    }
    auto v = parse_size(n.Scalar());
    if (!v || *v == 0) {
      problem(n, key, "expected a size such as 512m or 2g, got " + describe(n));
      return false;
    }
    *out = *v;
    return true;
  }

  bool strings(const YAML::Node& n, const std::string& key, std::vector<std::string>* out) {
    if (n.IsScalar() && !n.Scalar().empty()) {  // a lone item: needs: plan
      out->push_back(n.Scalar());
      return true;
    }
    if (!n.IsSequence()) {
      problem(n, key, "expected a list, got " + describe(n));
      return false;
    }
    bool ok = true;
    for (size_t i = 0; i < n.size(); ++i) {
      std::string s;
      if (text(n[i], key + "[" + std::to_string(i) + "]", &s)) {
        out->push_back(std::move(s));
      } else {
        ok = false;
      }
    }
    return ok;
  }

  bool string_map(const YAML::Node& n, const std::string& key,
                  std::map<std::string, std::string>* out) {
    if (!n.IsMap()) {
      problem(n, key, "expected a mapping of NAME: value, got " + describe(n));
      return false;
    }
    bool ok = true;
    for (const auto& kv : n) {
      const std::string k = kv.first.Scalar();
      std::string v;
      if (!text(kv.second, join(key, k), &v, false)) {
        ok = false;
        continue;
      }
      (*out)[k] = v;
    }
    return ok;
  }

  const std::string& file() const { return file_; }

 private:
  std::string file_;
  std::vector<std::string>* problems_;
};

const std::vector<std::string> kTopKeys = {"name",  "description", "inputs",
                                           "steps", "timeout",     "max_parallel"};
const std::vector<std::string> kInputKeys = {"type", "default", "description", "required"};
const std::vector<std::string> kStepKeys = {
    "id",    "needs",   "mode",     "kind",    "timeout", "retry",     "allow_failure", "template",
    "input", "pointer", "patch",    "schema",  "method",  "url",       "headers",       "body",
    "allow", "model",   "prompt",   "system",  "message", "approvers", "duration",      "run",
    "argv",  "agent",   "identity", "sandbox", "env",     "artifact",  "requires"};
const std::vector<std::string> kRetryKeys = {"attempts", "backoff", "factor", "on", "on_interrupt"};
const std::vector<std::string> kModelKeys = {"api",     "base_url",   "model",
                                             "key_env", "max_tokens", "temperature"};
const std::vector<std::string> kSandboxKeys = {"mode", "image", "mem",     "memory", "cpu",
                                               "pids", "disk",  "network", "allow"};
const std::vector<std::string> kIdentityKeys = {"workflow", "user"};
const std::vector<std::string> kArtifactKeys = {"dest",
                                                "path",
                                                "url",
                                                "branch",
                                                "token_key",
                                                "message",
                                                "endpoint",
                                                "bucket",
                                                "key",
                                                "region",
                                                "access_key_key",
                                                "secret_key_key",
                                                "session_token_key",
                                                "max_bytes"};

void parse_inputs(Reader& r, const YAML::Node& n, WorkflowDef* def) {
  if (!n.IsMap())
    return r.problem(n, "inputs", "expected a mapping of NAME: {type: ...}, got " + describe(n));
  for (const auto& kv : n) {
    InputDef in;
    const std::string key = "inputs." + kv.first.Scalar();
    // A bad name is a problem; the input is still checked, and kept so that
    // the templates naming it are not reported as well.
    r.name(kv.first, key, &in.name);
    in.where = r.where(kv.first, key);
    const YAML::Node& v = kv.second;
    if (v.IsNull() || !r.keys(v, key, kInputKeys)) {
      def->inputs.push_back(std::move(in));
      continue;
    }
    if (v["type"]) {
      std::string t;
      if (r.text(v["type"], key + ".type", &t)) {
        static const std::vector<std::string> types = {"string", "number", "boolean", "object",
                                                       "array"};
        if (std::find(types.begin(), types.end(), t) == types.end()) {
          r.problem(v["type"], key + ".type",
                    "unknown type \"" + t + "\" (expected " + joined(types) + ")");
        }
        in.type = t;
      }
    }
    if (v["description"]) r.text(v["description"], key + ".description", &in.description, false);
    if (v["default"]) {
      // The default is checked against the declared type as --input values
      // are: a default of the wrong type would reach the steps unchecked.
      const YAML::Node& d = v["default"];
      const json dv = to_json(d);
      const std::string& t = in.type;
      const bool known = t == "string" || t == "number" || t == "boolean" || t == "object" ||
                         t == "array";  // an unknown type is a problem of its own
      const bool fits = !known || (t == "string" && d.IsScalar() && !dv.is_null()) ||
                        (t == "number" && dv.is_number()) || (t == "boolean" && dv.is_boolean()) ||
                        (t == "object" && dv.is_object()) || (t == "array" && dv.is_array());
      if (!fits) {
        r.problem(d, key + ".default",
                  "expected a" + std::string(t == "array" || t == "object" ? "n " : " ") + t +
                      " (the input's type), got " + describe(d));
      }
      in.default_value = dv;
      in.required = false;
    }
    if (v["required"]) r.boolean(v["required"], key + ".required", &in.required);
    def->inputs.push_back(std::move(in));
  }
}

void parse_retry(Reader& r, const YAML::Node& n, const std::string& key, RetryPolicy* out) {
  if (!r.keys(n, key, kRetryKeys)) return;
  if (n["attempts"]) r.integer(n["attempts"], key + ".attempts", 1, 100, &out->attempts);
  if (n["backoff"]) r.duration(n["backoff"], key + ".backoff", &out->backoff);
  if (n["factor"]) {
    const YAML::Node& f = n["factor"];
    auto d = f.IsScalar() ? parse_decimal(f.Scalar()) : Result<double>(make_error("", ""));
    if (!d || *d < 1 || *d > 10) {
      r.problem(f, key + ".factor", "expected a number from 1 to 10, got " + describe(f));
    } else {
      out->factor = *d;
    }
  }
  if (n["on"]) {
    std::vector<std::string> kinds;
    if (r.strings(n["on"], key + ".on", &kinds)) {
      out->on.clear();
      for (const auto& k : kinds) {
        auto kind = parse_error_kind(k);
        if (!kind) {
          r.problem(n["on"], key + ".on", kind.error().message);
        } else {
          out->on.push_back(*kind);
        }
      }
    }
  }
  if (n["on_interrupt"]) r.boolean(n["on_interrupt"], key + ".on_interrupt", &out->on_interrupt);
  // on_interrupt: true alone is one more attempt; attempts, when given, says how many in all.
  if (out->on_interrupt && !n["attempts"]) out->attempts = 2;
}

void parse_model(Reader& r, const YAML::Node& n, const std::string& key, StepDef* step) {
  if (!r.keys(n, key, kModelKeys)) return;
  ModelDef m;
  for (const char* required : {"api", "base_url", "model"}) {
    if (!n[required]) r.problem(n, key + "." + required, "missing");
  }
  if (n["api"] && r.text(n["api"], key + ".api", &m.api)) {
    static const std::vector<std::string> apis = {"openai_chat", "openai_responses",
                                                  "anthropic_messages"};
    if (std::find(apis.begin(), apis.end(), m.api) == apis.end()) {
      r.problem(n["api"], key + ".api",
                "unknown API \"" + m.api + "\"" + did_you_mean(m.api, apis) + " (expected " +
                    joined(apis) + ")");
    }
  }
  if (n["base_url"] && r.text(n["base_url"], key + ".base_url", &m.base_url)) {
    if (m.base_url.rfind("http://", 0) != 0 && m.base_url.rfind("https://", 0) != 0) {
      r.problem(n["base_url"], key + ".base_url",
                "expected an http:// or https:// URL, got " + describe(n["base_url"]));
    }
  }
  if (n["model"]) r.text(n["model"], key + ".model", &m.model);
  if (n["key_env"]) r.text(n["key_env"], key + ".key_env", &m.key_env);
  if (n["max_tokens"]) r.integer(n["max_tokens"], key + ".max_tokens", 1, 1000000, &m.max_tokens);
  if (n["temperature"]) {
    auto t = n["temperature"].IsScalar() ? parse_decimal(n["temperature"].Scalar())
                                         : Result<double>(make_error("", ""));
    if (n["temperature"].IsScalar() && n["temperature"].Scalar() == "0") t = 0.0;
    if (!t || *t > 2) {
      r.problem(n["temperature"], key + ".temperature", "expected a number from 0 to 2");
    } else {
      m.temperature = *t;
    }
  }
  step->model = std::move(m);
}

void parse_sandbox(Reader& r, const YAML::Node& n, const std::string& key, StepDef* step) {
  if (!r.keys(n, key, kSandboxKeys)) return;
  SandboxDef s;
  s.where = r.where(n, key);
  if (n["mode"] && r.text(n["mode"], key + ".mode", &s.mode)) {
    if (s.mode != "per_tool" && s.mode != "per_run") {
      r.problem(n["mode"], key + ".mode",
                "a step's sandbox mode is per_tool (its own sandbox) or per_run (shared by the "
                "run's steps that ask for the same sandbox), not \"" +
                    s.mode + "\"");
    }
  }
  if (n["image"]) r.text(n["image"], key + ".image", &s.image);
  if (n["mem"]) r.size(n["mem"], key + ".mem", &s.memory_bytes);
  if (n["memory"]) r.size(n["memory"], key + ".memory", &s.memory_bytes);
  if (n["disk"]) r.size(n["disk"], key + ".disk", &s.disk_bytes);
  if (n["cpu"]) {
    auto c =
        n["cpu"].IsScalar() ? parse_decimal(n["cpu"].Scalar()) : Result<double>(make_error("", ""));
    if (!c) {
      r.problem(n["cpu"], key + ".cpu", "expected a number of cpus such as 1.5");
    } else {
      s.cpus = *c;
    }
  }
  if (n["pids"]) {
    int p = 0;
    if (r.integer(n["pids"], key + ".pids", 1, 1 << 20, &p)) s.pids = static_cast<uint64_t>(p);
  }
  if (n["network"]) {
    const YAML::Node& net = n["network"];
    if (net.IsScalar()) {
      s.network = net.Scalar();
      if (s.network != "none" && s.network != "proxy" && s.network != "host") {
        r.problem(net, key + ".network",
                  "expected none, proxy, host, or {allow: [HOST, ...]}, got " + describe(net));
      }
    } else if (net.IsMap()) {
      if (r.keys(net, key + ".network", {"policy", "allow"})) {
        if (net["policy"] && r.text(net["policy"], key + ".network.policy", &s.network) &&
            s.network != "none" && s.network != "proxy" && s.network != "host") {
          r.problem(net["policy"], key + ".network.policy",
                    "expected none, proxy or host, got " + describe(net["policy"]));
        }
        if (net["allow"]) r.strings(net["allow"], key + ".network.allow", &s.allow);
        if (s.network.empty()) s.network = "proxy";
        if (!s.allow.empty() && (s.network == "none" || s.network == "host")) {
          r.problem(net["allow"], key + ".network.allow",
                    "an allow list needs policy proxy (policy " + s.network + " has none)");
        }
      }
    } else {
      r.problem(net, key + ".network",
                "expected none, proxy, host, or {allow: [HOST, ...]}, got " + describe(net));
    }
  }
  if (n["allow"]) {
    r.strings(n["allow"], key + ".allow", &s.allow);
    if (s.network.empty()) s.network = "proxy";
  }
  step->sandbox = std::move(s);
}

// requires: {labels: {KEY: VALUE}} (core/labels.h).
void parse_requires(Reader& r, const YAML::Node& n, const std::string& key, StepDef* step) {
  static const std::vector<std::string> kRequiresKeys = {"labels"};
  if (!r.keys(n, key, kRequiresKeys)) return;
  if (!n["labels"]) return;
  std::map<std::string, std::string> given;
  if (!r.string_map(n["labels"], key + ".labels", &given)) return;
  Labels labels(given.begin(), given.end());
  for (const auto& [k, v] : labels) {
    if (auto bad = check_label(k, v); !bad.ok())
      r.problem(n["labels"], key + ".labels." + k, bad.error().to_string());
  }
  if (labels.size() > kMaxLabels) {
    r.problem(n["labels"], key + ".labels",
              std::to_string(labels.size()) + " labels: at most " + std::to_string(kMaxLabels));
  }
  step->requires_labels = std::move(labels);
}

void parse_artifact(Reader& r, const YAML::Node& n, const std::string& key, StepDef* step) {
  if (!r.keys(n, key, kArtifactKeys)) return;
  ArtifactDef a;
  a.where = r.where(n, key);
  std::string dest;
  if (!n["dest"]) {
    r.problem(n, key + ".dest", "missing (git, s3, local or none)");
  } else if (r.text(n["dest"], key + ".dest", &dest)) {
    if (dest == "git") {
      a.dest = ArtifactDest::kGit;
    } else if (dest == "s3") {
      a.dest = ArtifactDest::kS3;
    } else if (dest == "local") {
      a.dest = ArtifactDest::kLocal;
    } else if (dest == "none" || dest == "store") {
      a.dest = ArtifactDest::kStore;
    } else {
      r.problem(n["dest"], key + ".dest",
                "unknown destination \"" + dest + "\" (expected git, s3, local or none)");
    }
  }
  auto opt = [&](const char* k, std::string* out) {
    if (n[k]) r.text(n[k], key + "." + k, out);
  };
  opt("path", &a.path);
  opt("url", &a.url);
  opt("branch", &a.branch);
  opt("token_key", &a.token_key);
  opt("message", &a.message);
  opt("endpoint", &a.endpoint);
  opt("bucket", &a.bucket);
  opt("key", &a.key);
  opt("region", &a.region);
  opt("access_key_key", &a.access_key_key);
  opt("secret_key_key", &a.secret_key_key);
  opt("session_token_key", &a.session_token_key);
  if (n["max_bytes"]) {
    std::optional<uint64_t> m;
    if (r.size(n["max_bytes"], key + ".max_bytes", &m)) a.max_bytes = *m;
  }
  auto need = [&](const char* k, const std::string& v, const char* why) {
    if (v.empty()) r.problem(n, key + "." + k, std::string("missing: ") + why);
  };
  switch (a.dest) {
    case ArtifactDest::kGit:
      need("url", a.url, "the repository to push to (https://host/owner/repo.git)");
      need("token_key", a.token_key, "the identity key that holds the push token");
      if (!a.url.empty() && a.url.rfind("http://", 0) != 0 && a.url.rfind("https://", 0) != 0) {
        r.problem(n["url"], key + ".url", "git artifacts are pushed over http:// or https://");
      }
      break;
    case ArtifactDest::kS3:
      need("endpoint", a.endpoint, "the S3 endpoint (https://s3.REGION.amazonaws.com)");
      need("bucket", a.bucket, "the bucket");
      break;
    case ArtifactDest::kLocal:
      need("path", a.path, "where under the worker's --artifact-root to copy the workspace");
      break;
    case ArtifactDest::kStore:
      break;
  }
  step->artifact = std::move(a);
}

void parse_step(Reader& r, const YAML::Node& n, size_t index, WorkflowDef* def) {
  const std::string key = "steps[" + std::to_string(index) + "]";
  StepDef s;
  s.where = r.where(n, key);
  if (!n.IsMap())
    return r.problem(n, key, "expected a mapping with id and mode, got " + describe(n));
  r.keys(n, key, kStepKeys);
  for (const auto& kv : n) {
    if (kv.first.IsScalar()) s.keys[kv.first.Scalar()] = line_of(kv.first);
  }
  auto k = [&](const char* sub) { return key + "." + sub; };
  if (!n["id"]) {
    r.problem(n, k("id"), "missing");
  } else {
    r.name(n["id"], k("id"), &s.id);
  }
  if (!n["mode"]) {
    r.problem(n, k("mode"),
              "missing (in_process, sandboxed, identity_scoped, cli_agent or cli_agent_jit)");
  } else {
    std::string m;
    if (r.text(n["mode"], k("mode"), &m)) {
      auto mode = parse_execution_mode(m);
      if (!mode) {
        r.problem(
            n["mode"], k("mode"),
            mode.error().message + did_you_mean(m, {"in_process", "sandboxed", "identity_scoped",
                                                    "cli_agent", "cli_agent_jit"}));
        s.keys.erase("mode");
      } else {
        s.mode = *mode;
      }
    } else {
      s.keys.erase("mode");  // no mode to check the step's settings against
    }
  }
  if (n["kind"]) {
    std::string kind;
    if (r.text(n["kind"], k("kind"), &kind)) {
      static const std::vector<std::pair<std::string, StepKind>> kinds = {
          {"template", StepKind::kTemplate}, {"json", StepKind::kJson},
          {"http", StepKind::kHttp},         {"llm", StepKind::kLlm},
          {"approval", StepKind::kApproval}, {"sleep", StepKind::kSleep}};
      bool found = false;
      for (const auto& [name, value] : kinds) {
        if (name == kind) s.kind = value, found = true;
      }
      if (!found) {
        r.problem(n["kind"], k("kind"),
                  "unknown kind \"" + kind + "\"" +
                      did_you_mean(kind, {"template", "json", "http", "llm", "approval", "sleep"}) +
                      " (expected template, json, http, llm, approval or sleep)");
      }
    }
  }
  if (n["needs"]) r.strings(n["needs"], k("needs"), &s.needs);
  if (n["timeout"]) r.duration(n["timeout"], k("timeout"), &s.timeout);
  if (n["retry"]) parse_retry(r, n["retry"], k("retry"), &s.retry);
  if (n["allow_failure"]) r.boolean(n["allow_failure"], k("allow_failure"), &s.allow_failure);
  if (n["template"]) r.text(n["template"], k("template"), &s.template_text);
  // json
  if (n["input"]) {
    if (n["input"].IsScalar()) {
      s.json_spec["input"] = n["input"].Scalar();
    } else {
      s.json_spec["input_value"] = to_json(n["input"]);
    }
  }
  if (n["pointer"]) {
    std::string p;
    if (r.text(n["pointer"], k("pointer"), &p, false)) {
      if (!p.empty() && p.front() != '/') {
        r.problem(n["pointer"], k("pointer"), "a JSON Pointer starts with '/' (or is empty)");
      } else {
        s.json_spec["pointer"] = p;
      }
    }
  }
  if (n["patch"]) {
    if (!n["patch"].IsSequence()) {
      r.problem(n["patch"], k("patch"), "expected a JSON Patch: a list of operations");
    } else {
      s.json_spec["patch"] = to_json(n["patch"]);
    }
  }
  if (n["schema"]) {
    if (!n["schema"].IsMap()) {
      r.problem(n["schema"], k("schema"), "expected a JSON Schema object");
    } else {
      s.json_spec["schema"] = to_json(n["schema"]);
    }
  }
  // http
  if (n["method"]) {
    std::string m;
    if (r.text(n["method"], k("method"), &m)) {
      static const std::vector<std::string> methods = {"GET",   "POST",   "PUT",
                                                       "PATCH", "DELETE", "HEAD"};
      if (std::find(methods.begin(), methods.end(), m) == methods.end()) {
        r.problem(n["method"], k("method"),
                  "expected " + joined(methods) + ", got " + describe(n["method"]));
      }
      s.http_spec["method"] = m;
    }
  }
  if (n["url"]) {
    std::string u;
    if (r.text(n["url"], k("url"), &u)) s.http_spec["url"] = u;
  }
  if (n["headers"]) {
    std::map<std::string, std::string> h;
    if (r.string_map(n["headers"], k("headers"), &h)) s.http_spec["headers"] = h;
  }
  if (n["body"]) {
    if (n["body"].IsScalar()) {
      s.http_spec["body"] = n["body"].Scalar();
    } else {
      s.http_spec["body_json"] = to_json(n["body"]);
    }
  }
  if (n["allow"]) {
    std::vector<std::string> allow;
    if (r.strings(n["allow"], k("allow"), &allow)) s.http_spec["allow"] = allow;
  }
  if (n["model"]) parse_model(r, n["model"], k("model"), &s);
  if (n["prompt"]) r.text(n["prompt"], k("prompt"), &s.prompt);
  if (n["system"]) r.text(n["system"], k("system"), &s.system_prompt);
  if (n["message"]) r.text(n["message"], k("message"), &s.approval_message);
  if (n["approvers"]) r.strings(n["approvers"], k("approvers"), &s.approvers);
  if (n["duration"]) r.duration(n["duration"], k("duration"), &s.duration);
  if (n["run"]) r.text(n["run"], k("run"), &s.run);
  if (n["argv"]) {
    r.strings(n["argv"], k("argv"), &s.argv);
    if (s.argv.empty()) r.problem(n["argv"], k("argv"), "must not be empty");
  }
  if (n["agent"]) r.text(n["agent"], k("agent"), &s.agent);
  if (n["identity"]) {
    const YAML::Node& id = n["identity"];
    IdentityDef d;
    if (id.IsScalar() && (id.Scalar() == "true" || id.Scalar() == "yes")) {
      s.identity = d;
    } else if (r.keys(id, k("identity"), kIdentityKeys)) {
      if (id["workflow"]) r.name(id["workflow"], k("identity.workflow"), &d.workflow);
      if (id["user"]) r.name(id["user"], k("identity.user"), &d.user);
      s.identity = d;
    }
  }
  if (n["sandbox"]) parse_sandbox(r, n["sandbox"], k("sandbox"), &s);
  if (n["env"]) {
    if (r.string_map(n["env"], k("env"), &s.env)) {
      for (const auto& [name, v] : s.env) {
        const bool ok = !name.empty() && name.find('=') == std::string::npos &&
                        std::all_of(name.begin(), name.end(), [](char c) {
                          return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                                 (c >= '0' && c <= '9') || c == '_';
                        });
        if (!ok) {
          r.problem(n["env"], k("env") + "." + name,
                    "not an environment variable name (letters, digits and '_')");
        }
      }
    }
  }
  if (n["artifact"]) parse_artifact(r, n["artifact"], k("artifact"), &s);
  if (n["requires"]) parse_requires(r, n["requires"], k("requires"), &s);
  def->steps.push_back(std::move(s));
}

// The strict load. yaml-cpp 0.7 lets through what YAML (and PyYAML) refuses,
// and reads it as something else: a quoted string left open runs to the end
// of the text (the steps after it vanish into it), only the first document is
// read (what follows `...`, a second `---` or a closed JSON object is
// dropped, and a ',' where a document may start reads as an empty one), and
// a line with no ':' in a mapping becomes a key with no value. Each of these
// is refused here, at its line and column, as is a key given twice
// (core/yaml_duplicates.h).
struct TextProblem {
  std::string where;  // "FILE:LINE:COL", or "FILE:LINE:COL: KEY" for a duplicate key
  std::string what;
};

std::string at(const std::string& file, int line, int column) {
  return file + ":" + std::to_string(line + 1) + ":" + std::to_string(column + 1);
}
std::string at(const std::string& file, const YAML::Mark& m) { return at(file, m.line, m.column); }

// Whether the quoted scalar opening at text[open] is closed: yaml-cpp's own
// rules, a backslash escaping the next character in "...", '' standing for a
// quote in '...'.
bool quote_closes(std::string_view text, size_t open) {
  const char q = text[open];
  for (size_t i = open + 1; i < text.size(); ++i) {
    if (q == '"' && text[i] == '\\') {
      ++i;
    } else if (text[i] == q) {
      if (q == '\'' && i + 1 < text.size() && text[i + 1] == '\'') {
        ++i;
      } else {
        return true;
      }
    }
  }
  return false;
}

// The first quoted scalar (key or value) under `node` left open: the offset
// of its opening quote in `text`, what yaml-cpp read (its marks' positions
// are byte offsets). A scalar's mark is at its properties (!tag, &anchor)
// when it has them, else at its first character: a quote only for a quoted
// scalar.
std::optional<size_t> open_quote(const YAML::Node& node, std::string_view text, long* budget) {
  if (--*budget < 0) return std::nullopt;
  if (node.IsScalar()) {
    const YAML::Mark m = node.Mark();
    if (m.is_null() || m.pos < 0) return std::nullopt;
    auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
    size_t p = static_cast<size_t>(m.pos);
    while (p < text.size() && (text[p] == '!' || text[p] == '&')) {
      while (p < text.size() && !space(text[p])) ++p;
      while (p < text.size() && space(text[p])) ++p;
    }
    if (p < text.size() && (text[p] == '"' || text[p] == '\'') && !quote_closes(text, p)) return p;
  } else if (node.IsMap()) {
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (auto p = open_quote(it->first, text, budget)) return p;
      if (auto p = open_quote(it->second, text, budget)) return p;
    }
  } else if (node.IsSequence()) {
    for (const auto& v : node) {
      if (auto p = open_quote(v, text, budget)) return p;
    }
  }
  return std::nullopt;
}

// The first entry of a block mapping that had no ':' (yaml-cpp makes it a key
// with no value, both at the same place; a `key:` with no value has its
// value's place after the ':', a `? key` its key's after the '?').
std::optional<YAML::Node> key_without_colon(const YAML::Node& node, long* budget) {
  if (--*budget < 0) return std::nullopt;
  if (node.IsMap()) {
    for (auto it = node.begin(); it != node.end(); ++it) {
      const YAML::Mark k = it->first.Mark(), v = it->second.Mark();
      if (node.Style() != YAML::EmitterStyle::Flow && it->second.IsNull() && !k.is_null() &&
          !v.is_null() && k.pos == v.pos) {
        return it->first;
      }
      if (auto n = key_without_colon(it->first, budget)) return n;
      if (auto n = key_without_colon(it->second, budget)) return n;
    }
  } else if (node.IsSequence()) {
    for (const auto& v : node) {
      if (auto n = key_without_colon(v, budget)) return n;
    }
  }
  return std::nullopt;
}

// The key find_duplicate_key reports, found the same way (depth first, in
// document order), for its column.
std::optional<YAML::Mark> repeated_key(const YAML::Node& node, long* budget) {
  if (--*budget < 0) return std::nullopt;
  if (node.IsMap()) {
    std::set<std::string> seen;
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (!it->first.IsScalar()) continue;
      if (!seen.insert(it->first.Scalar()).second) return it->first.Mark();
      if (auto m = repeated_key(it->second, budget)) return m;
    }
  } else if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i) {
      if (auto m = repeated_key(node[i], budget)) return m;
    }
  }
  return std::nullopt;
}

// The first of these problems of `text`, or nullopt and its document in
// `root`. `workflow`: the text is a workflow file (for the messages), not
// another file read the same way.
std::optional<TextProblem> strict_load(std::string_view text, const std::string& file,
                                       bool workflow, YAML::Node* root) {
  const std::string invalid = "not valid YAML or JSON: ";
  std::string source(text);
  std::optional<TextProblem> syntax;
  try {
    *root = YAML::Load(source);
  } catch (const YAML::Exception& e) {
    syntax = TextProblem{at(file, e.mark), invalid + e.msg};
    // A quoted string left open at the very end of a text with no final
    // newline is refused where the text ends; read with one, it is found
    // where it opens, as it is with one.
    if (e.msg != YAML::ErrorMsg::EOF_IN_SCALAR) return syntax;
    source += "\n";
    try {
      *root = YAML::Load(source);
    } catch (const YAML::Exception&) {
      return syntax;
    }
  }
  if (auto big = yaml_too_large(*root)) return TextProblem{file, *big};
  // yaml-cpp's positions are byte offsets in UTF-8 text, past a byte order
  // mark; text in UTF-16 or UTF-32 (which it reads too, recoded) is not
  // looked into.
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  const bool utf8 = text.substr(0, 4).find('\0') == std::string_view::npos &&
                    text.substr(0, 2) != "\xFE\xFF" && text.substr(0, 2) != "\xFF\xFE";
  long budget = 200'000;
  if (auto p = utf8 ? open_quote(*root, text, &budget) : std::nullopt) {
    const size_t line_start = *p == 0 ? 0 : text.rfind('\n', *p - 1) + 1;  // npos + 1 is 0
    const auto line = std::count(text.begin(), text.begin() + static_cast<long>(*p), '\n');
    return TextProblem{at(file, static_cast<int>(line), static_cast<int>(*p - line_start)),
                       invalid + "the " + (text[*p] == '"' ? "double" : "single") +
                           "-quoted string that opens here is never closed"};
  }
  if (syntax) return syntax;
  // One document: a second one, or anything else after the first, is refused.
  // Not YAML::LoadAll (core/yaml_documents.h).
  std::vector<YAML::Mark> starts;
  try {
    starts = yaml_document_starts(source);
  } catch (const YAML::Exception& e) {
    return TextProblem{at(file, e.mark), invalid + e.msg};
  }
  if (starts.size() > 1) {
    const YAML::Mark& first = starts[0];
    const YAML::Mark& second = starts[1];
    if (second.pos == first.pos) {  // the first read nothing: what is there is no YAML
      const size_t p = static_cast<size_t>(std::max(0, second.pos));
      return TextProblem{at(file, second),
                         invalid + "unexpected " +
                             (utf8 && p < text.size() ? "'" + std::string(1, text[p]) + "'"
                                                      : std::string("text"))};
    }
    return TextProblem{at(file, second),
                       invalid + "trailing content after the " +
                           (workflow ? "workflow (a workflow file" : "document (the file") +
                           " holds one YAML document)"};
  }
  budget = 200'000;
  if (const auto k = key_without_colon(*root, &budget)) {
    return TextProblem{at(file, k->Mark()),
                       invalid + "expected KEY: VALUE, got " + describe(*k) + " with no ':'"};
  }
  if (auto dup = find_duplicate_key(*root)) {
    budget = 100'000;
    const auto m = repeated_key(*root, &budget);
    const std::string where =
        m && m->line + 1 == dup->line ? at(file, *m) + ": " + dup->path : dup->where(file);
    return TextProblem{where, dup->message()};
  }
  return std::nullopt;
}

}  // namespace

Loaded parse_workflow(std::string_view text, const std::string& file) {
  Loaded out;
  out.def.file = file;
  out.def.source = std::string(text);
  Reader r(file, &out.problems);
  YAML::Node root;
  if (auto bad = strict_load(text, file, true, &root)) {
    out.problems.push_back(bad->where + ": " + bad->what);
    return out;
  }
  if (!root.IsMap()) {
    out.problems.push_back(file + ": expected a workflow (a mapping with name and steps), got " +
                           describe(root));
    return out;
  }
  r.keys(root, "", kTopKeys);
  WorkflowDef& def = out.def;
  if (!root["name"]) {
    out.problems.push_back(file + ":1: name: missing");
  } else {
    r.name(root["name"], "name", &def.name);
  }
  if (root["description"]) r.text(root["description"], "description", &def.description, false);
  if (root["timeout"]) r.duration(root["timeout"], "timeout", &def.timeout);
  if (root["max_parallel"])
    r.integer(root["max_parallel"], "max_parallel", 1, 64, &def.max_parallel);
  if (root["inputs"]) parse_inputs(r, root["inputs"], &def);
  if (!root["steps"]) {
    out.problems.push_back(file + ":1: steps: missing");
  } else if (!root["steps"].IsSequence() || root["steps"].size() == 0) {
    r.problem(root["steps"], "steps", "expected a list of steps, got " + describe(root["steps"]));
  } else {
    const YAML::Node& steps = root["steps"];
    for (size_t i = 0; i < steps.size(); ++i) parse_step(r, steps[i], i, &def);
  }
  return out;
}

Result<WorkflowDef> load_workflow_text(std::string_view text, const std::string& file) {
  Loaded loaded = parse_workflow(text, file);
  // The shape's problems and the rest, all at once (a file that is not YAML has no steps),
  // in file order.
  validate_workflow(loaded);
  if (!loaded.ok()) {
    const std::string prefix = file + ":";
    auto line = [&prefix](const std::string& p) {  // "FILE:LINE..." (0: the whole file)
      if (p.compare(0, prefix.size(), prefix) != 0) return 0L;
      return std::strtol(p.c_str() + prefix.size(), nullptr, 10);
    };
    std::stable_sort(loaded.problems.begin(), loaded.problems.end(),
                     [&](const std::string& a, const std::string& b) { return line(a) < line(b); });
    std::string all;
    for (const auto& p : loaded.problems) all += (all.empty() ? "" : "\n") + p;
    return make_error("", all);
  }
  return std::move(loaded.def);
}

Result<WorkflowDef> load_workflow_file(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && size > (1u << 20)) {
    return make_error("workflow " + path,
                      "the file is over 1 MiB (" + std::to_string(size) + " bytes)");
  }
  auto text = read_file(path);
  if (!text) return make_error("workflow " + path, text.error().to_string());
  return load_workflow_text(*text, path);
}

Result<json> yaml_document(std::string_view text, const std::string& file) {
  YAML::Node root;
  if (auto bad = strict_load(text, file, false, &root)) return make_error(bad->where, bad->what);
  return to_json(root);
}

}  // namespace rf::workflow
