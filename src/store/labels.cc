#include "store/labels.h"

#include <nlohmann/json.hpp>

namespace rf::store {

std::string labels_json(const Labels& labels) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : labels) j[k] = v;
  return j.dump();
}

Result<Labels> labels_from_json(std::string_view text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return make_error("", "labels must be a JSON object of strings");
  Labels out;
  for (const auto& [k, v] : j.items()) {
    if (!v.is_string()) {
      return make_error("label " + k, "the value must be a string (such as \"true\"), not " +
                                          std::string(v.type_name()));
    }
    out.emplace(k, v.get<std::string>());
  }
  RF_TRY(check_labels(out));
  return out;
}

}  // namespace rf::store
