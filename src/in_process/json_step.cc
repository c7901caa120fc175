#include "in_process/json_step.h"

#include "in_process/json_schema.h"

namespace rf::in_process {

using nlohmann::json;

Result<json> run_json_step(const JsonStepSpec& spec) {
  json doc;
  if (spec.input) {
    doc = *spec.input;
  } else {
    try {
      doc = json::parse(spec.input_text);
    } catch (const json::parse_error& e) {
      std::string head = spec.input_text.substr(0, 80);
      for (char& c : head) {
        if (static_cast<unsigned char>(c) < 0x20) c = ' ';
      }
      return make_error("input",
                        std::string("not JSON: ") + e.what() + " (it begins \"" + head + "\")");
    }
  }
  if (spec.patch) {
    try {
      doc = doc.patch(*spec.patch);
    } catch (const json::exception& e) {
      return make_error("patch", e.what());
    }
  }
  if (!spec.pointer.empty()) {
    try {
      const json::json_pointer p(spec.pointer);
      if (!doc.contains(p))
        return make_error("pointer " + spec.pointer, "no such value in the input");
      doc = json(doc.at(p));
    } catch (const json::exception& e) {
      return make_error("pointer " + spec.pointer, e.what());
    }
  }
  if (spec.schema) {
    const auto problems = validate_json(*spec.schema, doc);
    if (!problems.empty()) {
      std::string all;
      for (size_t i = 0; i < problems.size() && i < 10; ++i) all += (i ? "; " : "") + problems[i];
      if (problems.size() > 10) all += "; and " + std::to_string(problems.size() - 10) + " more";
      return make_error("schema", all);
    }
  }
  return doc;
}

}  // namespace rf::in_process
