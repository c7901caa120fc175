#include "workflow/template.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wshadow"
#include <kainjow/mustache.hpp>
#pragma GCC diagnostic pop

namespace rf::workflow {
namespace {

namespace mustache = kainjow::mustache;

std::string trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return std::string(s);
}

Error at(size_t offset, const std::string& why) {
  return make_error("template (at byte " + std::to_string(offset) + ")", why);
}

mustache::data to_data(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::object: {
      mustache::data d{mustache::data::type::object};
      for (const auto& [k, v] : j.items()) d.set(k, to_data(v));
      return d;
    }
    case nlohmann::json::value_t::array: {
      mustache::data d{mustache::data::type::list};
      for (const auto& v : j) d.push_back(to_data(v));
      return d;
    }
    case nlohmann::json::value_t::string:
      return mustache::data{j.get<std::string>()};
    case nlohmann::json::value_t::boolean:
      // A boolean section shows or hides; as a variable it reads true/false.
      return j.get<bool>() ? mustache::data{std::string("true")} : mustache::data{false};
    case nlohmann::json::value_t::null:
    case nlohmann::json::value_t::discarded:
      return mustache::data{false};
    default:
      return mustache::data{j.dump()};
  }
}

}  // namespace

std::string shell_quote(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  out += "'";
  return out;
}

Result<std::vector<TemplateRef>> template_refs(std::string_view text) {
  std::vector<TemplateRef> refs;
  std::vector<std::string> sections;
  size_t pos = 0;
  for (;;) {
    const size_t open = text.find("{{", pos);
    if (open == std::string_view::npos) break;
    const bool triple = text.substr(open, 3) == "{{{";
    const std::string_view close_mark = triple ? "}}}" : "}}";
    const size_t body = open + (triple ? 3 : 2);
    const size_t close = text.find(close_mark, body);
    if (close == std::string_view::npos) return at(open, "\"{{\" is never closed by \"}}\"");
    std::string_view tag = text.substr(body, close - body);
    pos = close + close_mark.size();
    char sigil = 0;
    if (!triple && !tag.empty() &&
        std::string_view("#^/!>=&").find(tag.front()) != std::string_view::npos) {
      sigil = tag.front();
      tag.remove_prefix(1);
    }
    if (sigil == '!') continue;  // a comment
    if (sigil == '>') return at(open, "partials ({{>...}}) are not supported");
    if (sigil == '=') return at(open, "delimiter changes ({{=...=}}) are not supported");
    const std::string name = trim(tag);
    if (name.empty()) return at(open, "an empty tag");
    for (unsigned char c : name) {
      if (c <= 0x20 || c == '{' || c == '}') {
        return at(open, "\"" + name + "\" is not a name (letters, digits, '_', '-' and '.')");
      }
    }
    if (sigil == '/') {
      if (sections.empty()) return at(open, "{{/" + name + "}} closes no section");
      if (sections.back() != name) {
        return at(open, "{{/" + name + "}} closes section \"" + sections.back() + "\"");
      }
      sections.pop_back();
      continue;
    }
    refs.push_back({name, open, !sections.empty()});
    if (sigil == '#' || sigil == '^') sections.push_back(name);
  }
  if (!sections.empty())
    return at(text.size(), "section \"" + sections.back() + "\" is never closed");
  return refs;
}

Result<std::string> render_template(std::string_view text, const nlohmann::json& context,
                                    Escape escape) {
  RF_TRY(template_refs(text));  // partials, delimiter changes: refused before mustache sees them
  mustache::mustache tmpl{std::string(text)};
  if (!tmpl.is_valid()) return make_error("template", tmpl.error_message());
  if (escape == Escape::kShell) {
    tmpl.set_custom_escape([](const std::string& s) { return shell_quote(s); });
  } else {
    tmpl.set_custom_escape([](const std::string& s) { return s; });
  }
  const mustache::data data = to_data(context);
  std::string out = tmpl.render(data);
  if (!tmpl.is_valid()) return make_error("template", tmpl.error_message());
  return out;
}

}  // namespace rf::workflow
