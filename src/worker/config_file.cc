#include "worker/config_file.h"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <functional>
#include <map>
#include <sstream>
#include <vector>

#include "core/io.h"
#include "core/nearest.h"
#include "core/units.h"
#include "core/yaml_documents.h"
#include "core/yaml_duplicates.h"
#include "net/egress_policy.h"
#include "store/db.h"

namespace rf::worker {
namespace {

// Where in the file a value sits: "path:line" and the dotted key.
struct Loc {
  const std::string& path;
  int line;
  std::string key;

  std::string where() const { return path + ":" + std::to_string(line) + ": " + key; }
  std::string source() const { return config_source(path, line); }
};

int line_of(const YAML::Node& node) { return node.Mark().is_null() ? 1 : node.Mark().line + 1; }

std::string describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Scalar:
      return "\"" + node.Scalar() + "\"";
    default:
      return "nothing";
  }
}

template <class T>
Status set_scalar(const YAML::Node& v, const Loc& loc, const std::string& what,
                  SettingParser<T> parse, Maybe<T>* out) {
  if (!v.IsScalar()) return make_error(loc.where(), "expected " + what + ", got " + describe(v));
  auto value = parse(v.Scalar());
  if (!value) return make_error(loc.where(), value.error().message);
  *out = Resolved<T>{std::move(*value), loc.source()};
  return ok_status();
}

// sandbox.allow: a list of egress rules, each checked as the sandbox spec will.
Status set_allow(const YAML::Node& v, const Loc& loc, Maybe<std::vector<std::string>>* out) {
  if (!v.IsSequence()) {
    return make_error(loc.where(),
                      "expected a list of hosts such as [api.example.com], got " + describe(v));
  }
  std::vector<std::string> rules;
  for (size_t i = 0; i < v.size(); ++i) {
    const Loc item{loc.path, line_of(v[i]), loc.key + "[" + std::to_string(i) + "]"};
    Maybe<std::string> rule;
    RF_TRY(set_scalar<std::string>(v[i], item, "a host rule", parse_text, &rule));
    if (auto p = net::EgressPolicy::parse({rule->value}); !p)
      return make_error(item.where(), p.error().to_string());
    rules.push_back(rule->value);
  }
  *out = Resolved<std::vector<std::string>>{std::move(rules), loc.source()};
  return ok_status();
}

// labels: a mapping of KEY: VALUE (store/labels.h); YAML's true and 3 are
// taken as the texts "true" and "3".
Status set_labels(const YAML::Node& v, const Loc& loc, Maybe<store::Labels>* out) {
  if (!v.IsMap()) {
    return make_error(loc.where(),
                      "expected a mapping such as {gpu: true, zone: eu}, got " + describe(v));
  }
  store::Labels labels;
  for (auto it = v.begin(); it != v.end(); ++it) {
    const Loc item{loc.path, line_of(it->first), loc.key + "." + it->first.Scalar()};
    if (!it->first.IsScalar() || !it->second.IsScalar()) {
      return make_error(item.where(),
                        "expected KEY: VALUE with a text value, got " + describe(it->second));
    }
    if (auto bad = store::check_label(it->first.Scalar(), it->second.Scalar()); !bad.ok())
      return make_error(item.where(), bad.error().to_string());
    labels[it->first.Scalar()] = it->second.Scalar();
  }
  if (auto bad = store::check_labels(labels); !bad.ok())
    return make_error(loc.where(), bad.error().to_string());
  *out = Resolved<store::Labels>{std::move(labels), loc.source()};
  return ok_status();
}

// sandbox.proxy_resolve: a list of NAME=ADDR.
Status set_resolve(const YAML::Node& v, const Loc& loc, Maybe<std::vector<std::string>>* out) {
  if (!v.IsSequence()) {
    return make_error(loc.where(),
                      "expected a list such as [api.test=127.0.0.1], got " + describe(v));
  }
  std::vector<std::string> entries;
  for (size_t i = 0; i < v.size(); ++i) {
    const Loc item{loc.path, line_of(v[i]), loc.key + "[" + std::to_string(i) + "]"};
    Maybe<std::string> entry;
    RF_TRY(set_scalar<std::string>(v[i], item, "NAME=ADDR", parse_proxy_resolve, &entry));
    entries.push_back(entry->value);
  }
  *out = Resolved<std::vector<std::string>>{std::move(entries), loc.source()};
  return ok_status();
}

Status set_backends(const YAML::Node& v, const Loc& loc, Maybe<std::vector<BackendKind>>* out) {
  if (!v.IsSequence()) {
    return make_error(loc.where(),
                      "expected a list of backends such as [native], got " + describe(v));
  }
  std::vector<BackendKind> backends;
  for (size_t i = 0; i < v.size(); ++i) {
    const Loc item{loc.path, line_of(v[i]), loc.key + "[" + std::to_string(i) + "]"};
    Maybe<BackendKind> backend;
    RF_TRY(set_scalar<BackendKind>(v[i], item, "a backend", parse_backend, &backend));
    backends.push_back(backend->value);
  }
  *out = Resolved<std::vector<BackendKind>>{std::move(backends), loc.source()};
  return ok_status();
}

using SetFromYaml = std::function<Status(const YAML::Node&, const Loc&, SettingsLayer*)>;

struct Field {
  std::string name;
  SetFromYaml apply;
};

template <class T>
Field field(std::string name, std::string what, SettingParser<T> parse,
            Maybe<T> SettingsLayer::*member) {
  return {std::move(name), [=](const YAML::Node& v, const Loc& loc, SettingsLayer* layer) {
            return set_scalar(v, loc, what, parse, &(layer->*member));
          }};
}

// "(did you mean "cpu"?)" for a near miss, else the list of known keys.
std::string unknown_key_message(const std::string& name, const std::vector<Field>& fields) {
  std::vector<std::string> names;
  for (const Field& f : fields) names.push_back(f.name);
  if (auto best = nearest_name(name, names, /*a_start_counts=*/true); !best.empty())
    return "unknown key (did you mean \"" + best + "\"?)";
  std::string known;
  for (const std::string& n : names) known += (known.empty() ? "" : ", ") + n;
  return "unknown key (allowed: " + known + ")";
}

Status parse_mapping(const YAML::Node& map, const std::string& path, const std::string& prefix,
                     const std::vector<Field>& fields, SettingsLayer* layer) {
  std::map<std::string, int> seen;
  for (auto it = map.begin(); it != map.end(); ++it) {
    const int line = line_of(it->first);
    if (!it->first.IsScalar()) {
      const std::string at = prefix.empty() ? "" : ": " + prefix.substr(0, prefix.size() - 1);
      return make_error(path + ":" + std::to_string(line) + at,
                        "expected a key name, got " + describe(it->first));
    }
    const Loc loc{path, line, prefix + it->first.Scalar()};
    const auto [first, inserted] = seen.emplace(it->first.Scalar(), line);
    if (!inserted) {
      return make_error(loc.where(),
                        "duplicate key (first at line " + std::to_string(first->second) + ")");
    }
    const auto f = std::find_if(fields.begin(), fields.end(),
                                [&](const Field& x) { return x.name == it->first.Scalar(); });
    if (f == fields.end()) {
      return make_error(loc.where(), unknown_key_message(it->first.Scalar(), fields));
    }
    RF_TRY(f->apply(it->second, loc, layer));
  }
  return ok_status();
}

Field section(std::string name, std::vector<Field> fields) {
  return {name,
          [name, fields = std::move(fields)](const YAML::Node& v, const Loc& loc,
                                             SettingsLayer* layer) -> Status {
            if (v.IsNull()) return ok_status();
            if (!v.IsMap()) {
              return make_error(loc.where(),
                                "expected a mapping of " + name + " settings, got " + describe(v));
            }
            return parse_mapping(v, loc.path, name + ".", fields, layer);
          }};
}

// What each kind of limit reads, for "expected ..." when a value is not a scalar.
std::string limit_shape(LimitKind kind) {
  switch (kind) {
    case LimitKind::kCpus:
      return "a number of cpus such as 1.5";
    case LimitKind::kSize:
      return "a size such as 512m";
    case LimitKind::kCount:
      return "a whole number";
    case LimitKind::kDuration:
      return "a duration such as 30s";
  }
  return "a value";
}

// sandbox.<limit>, one per limit of sandbox/limits.h.
Field limit_field(const LimitField& f) {
  return {std::string(f.name),
          [&f](const YAML::Node& v, const Loc& loc, SettingsLayer* layer) -> Status {
            if (!v.IsScalar()) {
              return make_error(loc.where(),
                                "expected " + limit_shape(f.kind) + ", got " + describe(v));
            }
            if (auto bad = check_limit_text(f, v.Scalar()); !bad) {
              return make_error(loc.where(), bad.error().message);
            }
            layer->limits[std::string(f.name)] = Resolved<std::string>{v.Scalar(), loc.source()};
            return ok_status();
          }};
}

std::vector<Field> make_sandbox_fields() {
  std::vector<Field> fields = {
      field("mode", "a sandbox mode (none, per_tool, per_run, per_worker)", parse_sandbox_mode,
            &SettingsLayer::mode),
      field("backend", "a backend (native, docker, remotedocker, local)", parse_backend,
            &SettingsLayer::backend),
      field("docker_host", "a docker host URL (unix:///path, tcp://HOST:PORT, ssh://USER@HOST)",
            parse_text, &SettingsLayer::docker_host),
      {"fallback_backends",
       [](const YAML::Node& v, const Loc& loc, SettingsLayer* layer) {
         return set_backends(v, loc, &layer->fallback_backends);
       }},
      field("image", "an image name", parse_text, &SettingsLayer::image),
      field("network", "a network policy (none, proxy, host)", parse_network,
            &SettingsLayer::network),
      {"allow", [](const YAML::Node& v, const Loc& loc,
                   SettingsLayer* layer) { return set_allow(v, loc, &layer->allow); }},
      {"proxy_resolve",
       [](const YAML::Node& v, const Loc& loc, SettingsLayer* layer) {
         return set_resolve(v, loc, &layer->proxy_resolve);
       }},
      field("egress_ca_file", "a file of CAs (PEM)", parse_text, &SettingsLayer::egress_ca_file),
      field("allow_host_network", "true or false", parse_bool, &SettingsLayer::allow_host_network),
      field("allow_identity_without_sandbox", "true or false", parse_bool,
            &SettingsLayer::allow_identity_without_sandbox),
  };
  for (const LimitField& f : limit_fields()) fields.push_back(limit_field(f));
  fields.push_back(field("idle_timeout", "a duration such as 30s", parse_duration_setting,
                         &SettingsLayer::idle_timeout));
  return fields;
}

const std::vector<Field>& sandbox_fields() {
  static const std::vector<Field> fields = make_sandbox_fields();
  return fields;
}

const std::vector<Field>& pool_fields() {
  static const std::vector<Field> fields = {
      field("name", "a pool name", parse_name, &SettingsLayer::pool_name),
      field("target", "a whole number", parse_count, &SettingsLayer::pool_target),
      field("max", "a whole number", parse_count, &SettingsLayer::pool_max),
  };
  return fields;
}

const std::vector<Field>& identity_fields() {
  static const std::vector<Field> fields = {
      field("jit_policy", "a file", parse_text, &SettingsLayer::jit_policy),
  };
  return fields;
}

const std::vector<Field>& root_fields() {
  static const std::vector<Field> fields = {
      field("project_environment", "a project environment (production, staging, development)",
            parse_project_environment, &SettingsLayer::project_environment),
      field("project", "a project name", parse_project_name, &SettingsLayer::project),
      field("state_dir", "a directory", parse_text, &SettingsLayer::state_dir),
      field("store", "a store (an absolute SQLite file path or a postgres:// URI)", parse_store,
            &SettingsLayer::store),
      field("host_id", "a host id such as rack4-node2", parse_name, &SettingsLayer::host_id),
      {"labels", [](const YAML::Node& v, const Loc& loc,
                    SettingsLayer* layer) { return set_labels(v, loc, &layer->labels); }},
      section("sandbox", sandbox_fields()),
      section("pool", pool_fields()),
      section("identity", identity_fields()),
  };
  return fields;
}

Result<SettingsLayer> parse_document(const YAML::Node& root, const std::string& path) {
  SettingsLayer layer;
  if (!root.IsDefined() || root.IsNull()) return layer;  // an empty file
  if (!root.IsMap()) {
    return make_error(path + ":" + std::to_string(line_of(root)),
                      "expected a mapping of settings, got " + describe(root));
  }
  RF_TRY(parse_mapping(root, path, "", root_fields(), &layer));
  return layer;
}

Error yaml_error(const std::string& path, const YAML::Exception& e) {
  if (e.mark.is_null()) return make_error(path, "invalid YAML: " + e.msg);
  return make_error(
      path + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1),
      "invalid YAML: " + e.msg);
}

}  // namespace

std::string home_directory() {
  if (const char* home = std::getenv("HOME"); home != nullptr && home[0] != '\0') return home;
  struct passwd pw {};
  struct passwd* found = nullptr;
  char buf[4096];
  if (::getpwuid_r(::getuid(), &pw, buf, sizeof buf, &found) == 0 && found != nullptr) {
    return found->pw_dir;
  }
  return "/";
}

std::string default_config_path(const std::string& home) {
  return home + "/.ringfence/worker.yaml";
}

Result<Resolved<std::string>> locate_config_file(const std::optional<std::string>& given,
                                                 const std::string& home) {
  struct stat st {};
  if (given) {
    if (::stat(given->c_str(), &st) != 0) return sys_error("--config " + *given);
    return Resolved<std::string>{*given, flag_source("--config")};
  }
  const std::string path = default_config_path(home);
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Resolved<std::string>{};  // a missing default file is fine
    return sys_error(path);
  }
  return Resolved<std::string>{path, std::string(kDefaultSource)};
}

Result<SettingsLayer> parse_config_yaml(const std::string& text, const std::string& path) {
  try {
    // Not YAML::LoadAll: a file that is "," took all memory (core/yaml_documents.h).
    const std::vector<YAML::Mark> starts = yaml_document_starts(text);
    if (starts.size() > 1) {
      return make_error(path + ":" + std::to_string(starts[1].line + 1),
                        starts[1].pos == starts[0].pos
                            ? std::string("not YAML: unexpected text")
                            : std::string("expected one YAML document, got more"));
    }
    const YAML::Node document = YAML::Load(text);
    if (auto big = yaml_too_large(document)) return make_error(path, *big);
    return parse_document(document, path);
  } catch (const YAML::Exception& e) {
    return yaml_error(path, e);
  }
}

Result<SettingsLayer> load_config_file(const std::string& path) {
  auto text = read_file(path);
  if (!text) return text.take_error();
  return parse_config_yaml(*text, path);
}

std::string settings_to_yaml(const WorkerSettings& s) {
  std::vector<std::string> backends;
  for (BackendKind k : s.fallback_backends.value) backends.emplace_back(to_string(k));
  YAML::Emitter out;
  out << YAML::BeginMap;
  if (s.project_environment.value != ProjectEnvironment::kNone) {
    out << YAML::Key << "project_environment" << YAML::Value
        << to_string(s.project_environment.value);
  }
  if (!s.project.value.empty()) out << YAML::Key << "project" << YAML::Value << s.project.value;
  out << YAML::Key << "state_dir" << YAML::Value << s.state_dir.value;
  // Without its password: this is shown, not kept.
  if (!s.store.value.empty()) {
    out << YAML::Key << "store" << YAML::Value << store::engine::redact_uri(s.store.value);
  }
  if (!s.host_id.value.empty()) out << YAML::Key << "host_id" << YAML::Value << s.host_id.value;
  if (!s.labels.value.empty()) {
    out << YAML::Key << "labels" << YAML::Value << YAML::BeginMap;
    for (const auto& [k, v] : s.labels.value) out << YAML::Key << k << YAML::Value << v;
    out << YAML::EndMap;
  }
  out << YAML::Key << "sandbox" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "mode" << YAML::Value << to_string(s.mode.value);
  out << YAML::Key << "backend" << YAML::Value << std::string(to_string(s.backend.value));
  if (!s.docker_host.value.empty()) {
    out << YAML::Key << "docker_host" << YAML::Value << s.docker_host.value;
  }
  out << YAML::Key << "fallback_backends" << YAML::Value << YAML::Flow << backends;
  out << YAML::Key << "image" << YAML::Value << s.image.value;
  out << YAML::Key << "network" << YAML::Value << std::string(to_string(s.network.value));
  out << YAML::Key << "allow" << YAML::Value << YAML::Flow << s.allow.value;
  out << YAML::Key << "proxy_resolve" << YAML::Value << YAML::Flow << s.proxy_resolve.value;
  if (!s.egress_ca_file.value.empty()) {
    out << YAML::Key << "egress_ca_file" << YAML::Value << s.egress_ca_file.value;
  }
  out << YAML::Key << "allow_host_network" << YAML::Value
      << (s.allow_host_network.value ? "true" : "false");
  out << YAML::Key << "allow_identity_without_sandbox" << YAML::Value
      << (s.allow_identity_without_sandbox.value ? "true" : "false");
  for (const LimitField& f : limit_fields()) {
    out << YAML::Key << std::string(f.name) << YAML::Value << f.get(s.limits.value);
  }
  out << YAML::Key << "idle_timeout" << YAML::Value << format_duration(s.idle_timeout.value);
  out << YAML::EndMap;
  out << YAML::Key << "pool" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << s.pool_name.value;
  out << YAML::Key << "target" << YAML::Value << std::to_string(s.pool_target.value);
  out << YAML::Key << "max" << YAML::Value << std::to_string(s.pool_max.value);
  out << YAML::EndMap;
  if (!s.jit_policy.value.empty()) {
    out << YAML::Key << "identity" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "jit_policy" << YAML::Value << s.jit_policy.value;
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace rf::worker
