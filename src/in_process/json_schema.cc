#include "in_process/json_schema.h"

#include <cmath>
#include <regex>
#include <set>

namespace rf::in_process {
namespace {

using nlohmann::json;

const std::set<std::string> kKeywords = {"type",
                                         "enum",
                                         "const",
                                         "required",
                                         "properties",
                                         "additionalProperties",
                                         "patternProperties",
                                         "items",
                                         "prefixItems",
                                         "minItems",
                                         "maxItems",
                                         "uniqueItems",
                                         "minLength",
                                         "maxLength",
                                         "pattern",
                                         "minimum",
                                         "maximum",
                                         "exclusiveMinimum",
                                         "exclusiveMaximum",
                                         "multipleOf",
                                         "minProperties",
                                         "maxProperties",
                                         "allOf",
                                         "anyOf",
                                         "oneOf",
                                         "not",
                                         "if",
                                         "then",
                                         "else",
                                         "$defs",
                                         "definitions",
                                         "$ref",
                                         "title",
                                         "description",
                                         "default",
                                         "examples",
                                         "$schema",
                                         "$id",
                                         "$comment",
                                         "format",
                                         "readOnly",
                                         "writeOnly",
                                         "deprecated"};

std::string escape_token(const std::string& t) {
  std::string out;
  for (char c : t) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

std::string type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "integer";
    case json::value_t::number_float:
      return "number";
    case json::value_t::string:
      return "string";
    case json::value_t::array:
      return "array";
    case json::value_t::object:
      return "object";
    default:
      return "?";
  }
}

bool is_type(const json& v, const std::string& t) {
  if (t == "null") return v.is_null();
  if (t == "boolean") return v.is_boolean();
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "string") return v.is_string();
  if (t == "number") return v.is_number();
  if (t == "integer") {
    if (v.is_number_integer()) return true;
    if (v.is_number_float()) {
      const double d = v.get<double>();
      return std::isfinite(d) && std::floor(d) == d;
    }
  }
  return false;
}

// JSON equality as the spec means it: 1 and 1.0 are equal.
bool equal(const json& a, const json& b) {
  if (a.is_number() && b.is_number()) return a.get<double>() == b.get<double>();
  if (a.type() != b.type()) return false;
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!equal(a[i], b[i])) return false;
    }
    return true;
  }
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (const auto& [k, v] : a.items()) {
      if (!b.contains(k) || !equal(v, b[k])) return false;
    }
    return true;
  }
  return a == b;
}

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) {
    if ((c & 0xC0) != 0x80) ++n;
  }
  return n;
}

std::string brief(const json& v) {
  std::string s = v.dump();
  return s.size() > 60 ? s.substr(0, 60) + "..." : s;
}

class Validator {
 public:
  explicit Validator(const json& root) : root_(root) {}

  Status check(const json& s, const std::string& at, int depth = 0) {
    if (depth > 64) return make_error(at, "the schema nests deeper than 64");
    if (s.is_boolean()) return ok_status();
    if (!s.is_object())
      return make_error(at.empty() ? "/" : at, "a schema is an object or a boolean");
    for (const auto& [k, v] : s.items()) {
      const std::string here = at + "/" + escape_token(k);
      if (!kKeywords.count(k)) {
        return make_error(here,
                          "keyword \"" + k + "\" is not supported (see the json step's docs)");
      }
      if (k == "type") {
        auto one = [&](const json& t) {
          static const std::set<std::string> types = {"null",   "boolean", "object", "array",
                                                      "number", "string",  "integer"};
          return t.is_string() && types.count(t.get<std::string>());
        };
        bool ok = one(v);
        if (v.is_array()) {
          ok = !v.empty();
          for (const auto& t : v) ok = ok && one(t);
        }
        if (!ok) return make_error(here, "expected a type name or a list of them");
      } else if (k == "enum") {
        if (!v.is_array()) return make_error(here, "expected a list");
      } else if (k == "required") {
        if (!v.is_array()) return make_error(here, "expected a list of property names");
        for (const auto& r : v) {
          if (!r.is_string()) return make_error(here, "expected a list of property names");
        }
      } else if (k == "properties" || k == "patternProperties" || k == "$defs" ||
                 k == "definitions") {
        if (!v.is_object()) return make_error(here, "expected an object of schemas");
        for (const auto& [name, sub] : v.items()) {
          if (k == "patternProperties") {
            try {
              std::regex re(name, std::regex::ECMAScript);
            } catch (const std::regex_error&) {
              return make_error(here + "/" + escape_token(name), "not a regular expression");
            }
          }
          RF_TRY(check(sub, here + "/" + escape_token(name), depth + 1));
        }
      } else if (k == "additionalProperties" || k == "items" || k == "not" || k == "if" ||
                 k == "then" || k == "else") {
        RF_TRY(check(v, here, depth + 1));
      } else if (k == "prefixItems" || k == "allOf" || k == "anyOf" || k == "oneOf") {
        if (!v.is_array() || v.empty())
          return make_error(here, "expected a non-empty list of schemas");
        for (size_t i = 0; i < v.size(); ++i) {
          RF_TRY(check(v[i], here + "/" + std::to_string(i), depth + 1));
        }
      } else if (k == "minItems" || k == "maxItems" || k == "minLength" || k == "maxLength" ||
                 k == "minProperties" || k == "maxProperties") {
        if (!is_type(v, "integer") || v.get<double>() < 0) {
          return make_error(here, "expected a non-negative integer");
        }
      } else if (k == "minimum" || k == "maximum" || k == "exclusiveMinimum" ||
                 k == "exclusiveMaximum") {
        if (!v.is_number()) return make_error(here, "expected a number");
      } else if (k == "multipleOf") {
        if (!v.is_number() || v.get<double>() <= 0)
          return make_error(here, "expected a number above 0");
      } else if (k == "uniqueItems") {
        if (!v.is_boolean()) return make_error(here, "expected true or false");
      } else if (k == "pattern") {
        if (!v.is_string()) return make_error(here, "expected a regular expression");
        try {
          std::regex re(v.get<std::string>(), std::regex::ECMAScript);
        } catch (const std::regex_error&) {
          return make_error(here, "not a regular expression");
        }
      } else if (k == "$ref") {
        if (!v.is_string() || resolve(v.get<std::string>()) == nullptr) {
          return make_error(here,
                            "only local references to #/$defs/NAME or #/definitions/NAME "
                            "that exist are supported");
        }
      }
    }
    return ok_status();
  }

  void validate(const json& s, const json& v, const std::string& at, std::vector<std::string>* out,
                int depth = 0) {
    if (depth > 64) {
      out->push_back(where(at) + ": the schema references itself too deep");
      return;
    }
    if (s.is_boolean()) {
      if (!s.get<bool>()) out->push_back(where(at) + ": nothing is allowed here");
      return;
    }
    if (!s.is_object()) return;
    auto fail = [&](const std::string& what) { out->push_back(where(at) + ": " + what); };
    if (s.contains("$ref")) {
      if (const json* target = resolve(s["$ref"].get<std::string>())) {
        validate(*target, v, at, out, depth + 1);
      }
    }
    if (s.contains("type")) {
      const json& t = s["type"];
      bool ok = false;
      std::string names;
      for (const auto& one : t.is_array() ? t : json::array({t})) {
        ok = ok || is_type(v, one.get<std::string>());
        names += (names.empty() ? "" : " or ") + std::string(one.get<std::string>());
      }
      if (!ok)
        fail("expected " + std::string(t.is_array() ? "" : "a ") + names + ", got " + type_name(v) +
             " " + brief(v));
    }
    if (s.contains("enum")) {
      bool found = false;
      for (const auto& e : s["enum"]) found = found || equal(e, v);
      if (!found) fail(brief(v) + " is not one of " + brief(s["enum"]));
    }
    if (s.contains("const") && !equal(s["const"], v)) fail("expected " + brief(s["const"]));
    if (v.is_object()) object_checks(s, v, at, out, depth);
    if (v.is_array()) array_checks(s, v, at, out, depth);
    if (v.is_string()) {
      const std::string& str = v.get_ref<const std::string&>();
      const size_t n = code_points(str);
      if (s.contains("minLength") && n < s["minLength"].get<double>())
        fail("shorter than " + s["minLength"].dump() + " characters");
      if (s.contains("maxLength") && n > s["maxLength"].get<double>())
        fail("longer than " + s["maxLength"].dump() + " characters");
      if (s.contains("pattern")) {
        std::regex re(s["pattern"].get<std::string>(), std::regex::ECMAScript);
        if (!std::regex_search(str, re)) fail("does not match the pattern " + s["pattern"].dump());
      }
    }
    if (v.is_number()) {
      const double d = v.get<double>();
      if (s.contains("minimum") && d < s["minimum"].get<double>())
        fail("below the minimum " + s["minimum"].dump());
      if (s.contains("maximum") && d > s["maximum"].get<double>())
        fail("above the maximum " + s["maximum"].dump());
      if (s.contains("exclusiveMinimum") && d <= s["exclusiveMinimum"].get<double>())
        fail("not above " + s["exclusiveMinimum"].dump());
      if (s.contains("exclusiveMaximum") && d >= s["exclusiveMaximum"].get<double>())
        fail("not below " + s["exclusiveMaximum"].dump());
      if (s.contains("multipleOf")) {
        const double m = s["multipleOf"].get<double>();
        const double q = d / m;
        if (!std::isfinite(q) || std::fabs(q - std::round(q)) > 1e-9)
          fail("not a multiple of " + s["multipleOf"].dump());
      }
    }
    if (s.contains("allOf")) {
      for (const auto& sub : s["allOf"]) validate(sub, v, at, out, depth + 1);
    }
    if (s.contains("anyOf")) {
      bool any = false;
      for (const auto& sub : s["anyOf"]) any = any || passes(sub, v, at, depth);
      if (!any) fail("matches none of anyOf");
    }
    if (s.contains("oneOf")) {
      int n = 0;
      for (const auto& sub : s["oneOf"]) n += passes(sub, v, at, depth) ? 1 : 0;
      if (n != 1) fail("matches " + std::to_string(n) + " of oneOf, not exactly one");
    }
    if (s.contains("not") && passes(s["not"], v, at, depth)) fail("matches what \"not\" forbids");
    if (s.contains("if")) {
      if (passes(s["if"], v, at, depth)) {
        if (s.contains("then")) validate(s["then"], v, at, out, depth + 1);
      } else if (s.contains("else")) {
        validate(s["else"], v, at, out, depth + 1);
      }
    }
  }

 private:
  static std::string where(const std::string& at) { return at.empty() ? "/" : at; }

  bool passes(const json& s, const json& v, const std::string& at, int depth) {
    std::vector<std::string> sub;
    validate(s, v, at, &sub, depth + 1);
    return sub.empty();
  }

  void object_checks(const json& s, const json& v, const std::string& at,
                     std::vector<std::string>* out, int depth) {
    auto fail = [&](const std::string& what) { out->push_back(where(at) + ": " + what); };
    if (s.contains("required")) {
      for (const auto& r : s["required"]) {
        if (!v.contains(r.get<std::string>()))
          fail("missing the property \"" + r.get<std::string>() + "\"");
      }
    }
    if (s.contains("minProperties") && v.size() < s["minProperties"].get<double>())
      fail("fewer than " + s["minProperties"].dump() + " properties");
    if (s.contains("maxProperties") && v.size() > s["maxProperties"].get<double>())
      fail("more than " + s["maxProperties"].dump() + " properties");
    for (const auto& [k, item] : v.items()) {
      const std::string here = at + "/" + escape_token(k);
      bool matched = false;
      if (s.contains("properties") && s["properties"].contains(k)) {
        matched = true;
        validate(s["properties"][k], item, here, out, depth + 1);
      }
      if (s.contains("patternProperties")) {
        for (const auto& [pattern, sub] : s["patternProperties"].items()) {
          if (std::regex_search(k, std::regex(pattern, std::regex::ECMAScript))) {
            matched = true;
            validate(sub, item, here, out, depth + 1);
          }
        }
      }
      if (!matched && s.contains("additionalProperties")) {
        const json& add = s["additionalProperties"];
        if (add.is_boolean() && !add.get<bool>()) {
          out->push_back(where(here) + ": the property \"" + k + "\" is not allowed");
        } else {
          validate(add, item, here, out, depth + 1);
        }
      }
    }
  }

  void array_checks(const json& s, const json& v, const std::string& at,
                    std::vector<std::string>* out, int depth) {
    auto fail = [&](const std::string& what) { out->push_back(where(at) + ": " + what); };
    if (s.contains("minItems") && v.size() < s["minItems"].get<double>())
      fail("fewer than " + s["minItems"].dump() + " items");
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<double>())
      fail("more than " + s["maxItems"].dump() + " items");
    if (s.contains("uniqueItems") && s["uniqueItems"].get<bool>()) {
      for (size_t i = 0; i < v.size(); ++i) {
        for (size_t j = i + 1; j < v.size(); ++j) {
          if (equal(v[i], v[j])) {
            fail("items " + std::to_string(i) + " and " + std::to_string(j) + " are equal");
            i = v.size();
            break;
          }
        }
      }
    }
    size_t first = 0;
    if (s.contains("prefixItems")) {
      const json& prefix = s["prefixItems"];
      for (; first < prefix.size() && first < v.size(); ++first) {
        validate(prefix[first], v[first], at + "/" + std::to_string(first), out, depth + 1);
      }
      first = prefix.size();
    }
    if (s.contains("items")) {
      for (size_t i = first; i < v.size(); ++i) {
        validate(s["items"], v[i], at + "/" + std::to_string(i), out, depth + 1);
      }
    }
  }

  const json* resolve(const std::string& ref) const {
    for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
      const std::string p = prefix;
      if (ref.rfind(p, 0) == 0) {
        const std::string name = ref.substr(p.size());
        const std::string group = p.substr(2, p.size() - 3);
        if (root_.is_object() && root_.contains(group) && root_[group].is_object() &&
            root_[group].contains(name)) {
          return &root_[group][name];
        }
      }
    }
    if (ref == "#") return &root_;
    return nullptr;
  }

  const json& root_;
};

}  // namespace

Status check_schema(const json& schema) { return Validator(schema).check(schema, ""); }

std::vector<std::string> validate_json(const json& schema, const json& value) {
  std::vector<std::string> out;
  Validator v(schema);
  if (auto s = v.check(schema, ""); !s) {
    out.push_back("the schema: " + s.error().to_string());
    return out;
  }
  v.validate(schema, value, "", &out);
  return out;
}

}  // namespace rf::in_process
