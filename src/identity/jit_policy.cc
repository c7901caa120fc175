#include "identity/jit_policy.h"

#include <fnmatch.h>
#include <yaml-cpp/yaml.h>

#include "core/io.h"
#include "core/units.h"
#include "core/yaml_duplicates.h"

namespace rf::identity {
namespace {

int line_of(const YAML::Node& n) { return n.Mark().is_null() ? 1 : n.Mark().line + 1; }

Error at(const std::string& path, const YAML::Node& n, const std::string& what) {
  return make_error(path + ":" + std::to_string(line_of(n)), what);
}

bool glob(const std::string& pattern, const std::string& text) {
  return pattern == "*" || ::fnmatch(pattern.c_str(), text.c_str(), 0) == 0;
}

Result<std::string> scalar(const std::string& path, const YAML::Node& n, const std::string& field) {
  if (!n.IsScalar()) return at(path, n, field + ": expected a string");
  std::string s = n.as<std::string>();
  if (s.empty()) return at(path, n, field + ": empty (use \"*\" for any)");
  return s;
}

Result<JitRule> parse_rule(const std::string& path, const YAML::Node& n, int index) {
  JitRule r;
  r.index = index;
  r.line = line_of(n);
  if (!n.IsMap()) return at(path, n, "rule " + std::to_string(index) + ": expected a mapping");
  bool has_verdict = false;
  for (const auto& kv : n) {
    const std::string field = kv.first.as<std::string>();
    const YAML::Node& v = kv.second;
    const std::string name = "rule " + std::to_string(index) + "." + field;
    std::string* glob_field = field == "secret"     ? &r.secret
                              : field == "key"      ? &r.key
                              : field == "scope"    ? &r.scope
                              : field == "project"  ? &r.project
                              : field == "workflow" ? &r.workflow
                              : field == "step"     ? &r.step
                              : field == "agent"    ? &r.agent
                                                    : nullptr;
    if (glob_field != nullptr) {
      auto s = scalar(path, v, name);
      if (!s) return s.take_error();
      *glob_field = *s;
    } else if (field == "verdict") {
      auto s = scalar(path, v, name);
      if (!s) return s.take_error();
      if (*s == "allow") {
        r.verdict = JitVerdict::allow;
      } else if (*s == "deny") {
        r.verdict = JitVerdict::deny;
      } else if (*s == "ask") {
        r.verdict = JitVerdict::ask;
      } else {
        return at(path, v, name + ": \"" + *s + "\" is not allow, deny or ask");
      }
      has_verdict = true;
    } else if (field == "max_uses") {
      auto s = scalar(path, v, name);
      if (!s) return s.take_error();
      char* end = nullptr;
      const long uses = std::strtol(s->c_str(), &end, 10);
      if (*end != '\0' || uses < 1 || uses > 1'000'000) {
        return at(path, v, name + ": expected a whole number of 1 or more, got \"" + *s + "\"");
      }
      r.max_uses = static_cast<int>(uses);
    } else if (field == "ttl" || field == "timeout") {
      auto s = scalar(path, v, name);
      if (!s) return s.take_error();
      auto d = parse_duration(*s);
      if (!d) return at(path, v, name + ": " + d.error().message);
      if (d->count() <= 0) return at(path, v, name + ": must be more than 0");
      (field == "ttl" ? r.ttl : r.timeout) = *d;
    } else if (field == "approvers") {
      if (!v.IsSequence()) return at(path, v, name + ": expected a list of names");
      for (const auto& a : v) {
        auto s = scalar(path, a, name);
        if (!s) return s.take_error();
        r.approvers.push_back(*s);
      }
    } else {
      return at(path, kv.first,
                name +
                    ": unknown field (a rule has secret, key, scope, project, workflow, step, "
                    "agent, verdict, max_uses, ttl, timeout, approvers)");
    }
  }
  if (!has_verdict) {
    return at(path, n, "rule " + std::to_string(index) + ": no verdict (allow, deny or ask)");
  }
  if (r.verdict != JitVerdict::ask && (!r.approvers.empty() || n["timeout"])) {
    return at(path, n,
              "rule " + std::to_string(index) + ": approvers and timeout go with verdict ask");
  }
  return r;
}

}  // namespace

std::string_view to_string(JitVerdict v) {
  switch (v) {
    case JitVerdict::allow:
      return "allow";
    case JitVerdict::deny:
      return "deny";
    case JitVerdict::ask:
      return "ask";
  }
  return "deny";
}

std::string JitPolicy::describe(const JitRule& rule) const {
  return "rule " + std::to_string(rule.index) + " (" + path + ":" + std::to_string(rule.line) + ")";
}

Result<JitPolicy> parse_jit_policy(const std::string& text, const std::string& path) {
  JitPolicy policy;
  policy.path = path;
  try {
    const YAML::Node root = YAML::Load(text);
    if (auto dup = find_duplicate_key(root)) return make_error(dup->where(path), dup->message());
    if (!root.IsMap()) return at(path, root, "expected a mapping with `rules:`");
    for (const auto& kv : root) {
      const std::string field = kv.first.as<std::string>();
      if (field != "rules") {
        return at(path, kv.first, "unknown field \"" + field + "\" (the file has `rules:`)");
      }
    }
    const YAML::Node rules = root["rules"];
    if (!rules || !rules.IsSequence()) return at(path, root, "rules: expected a list of rules");
    int index = 0;
    for (const auto& n : rules) {
      auto r = parse_rule(path, n, ++index);
      if (!r) return r.take_error();
      policy.rules.push_back(std::move(*r));
    }
  } catch (const YAML::Exception& e) {
    if (e.mark.is_null()) return make_error(path, "invalid YAML: " + e.msg);
    return make_error(path + ":" + std::to_string(e.mark.line + 1), "invalid YAML: " + e.msg);
  }
  return policy;
}

Result<JitPolicy> load_jit_policy(const std::string& path) {
  auto text = read_file(path);
  if (!text) return make_error("JIT policy " + path, text.error().to_string());
  return parse_jit_policy(*text, path);
}

JitDecision evaluate_jit(const JitPolicy& policy, const JitAsk& ask) {
  for (const auto& r : policy.rules) {
    if (glob(r.secret, ask.secret) && glob(r.key, ask.key) && glob(r.scope, ask.scope) &&
        glob(r.project, ask.project) && glob(r.workflow, ask.workflow) && glob(r.step, ask.step) &&
        glob(r.agent, ask.agent)) {
      return {&r, r.verdict};
    }
  }
  return {};
}

}  // namespace rf::identity
